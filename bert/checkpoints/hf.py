"""Hugging Face BERT weights: `model.safetensors` names <-> TF1 names.

Read with the `safetensors` package (NumPy, no PyTorch). `pytorch_model.bin`
is a pickle and is never opened.

HF keys are the TF1 names spelled with dots: "layer.3" for "layer_3",
Linear "weight" [out, in] for a TF1 "kernel" [in, out] (transposed),
LayerNorm "weight"/"bias" for "gamma"/"beta". Encoder keys carry a "bert."
prefix when the file also holds the pre-training heads (BertForPreTraining).
"""

import os
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.untrusted import first_line, kind, named_path, read_json

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5")

# Special cases; everything else follows the generic rules below.
_HF_TO_TF1 = {
    "cls.predictions.bias": ("cls/predictions/output_bias", False),
    "cls.seq_relationship.weight": ("cls/seq_relationship/output_weights", False),
    "cls.seq_relationship.bias": ("cls/seq_relationship/output_bias", False),
}
_TF1_TO_HF = {v[0]: (k, v[1]) for k, v in _HF_TO_TF1.items()}
_EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings")
# Buffers and tied copies that carry no weights of their own.
_HF_BUFFERS = re.compile(r"(^|\.)position_ids$|(^|\.)token_type_ids$")
_TIED_DECODER = {"cls.predictions.decoder.weight": "bert/embeddings/word_embeddings",
                 "cls.predictions.decoder.bias": "cls/predictions/output_bias"}


def hf_to_tf1_name(key: str) -> Tuple[str, bool]:
  """HF key -> (TF1 name, transpose). Keys that fit no rule come back as is."""
  k = key[len("bert."):] if key.startswith("bert.") else key
  if k in _HF_TO_TF1:
    return _HF_TO_TF1[k]
  parts = k.split(".")
  if len(parts) == 3 and parts[0] == "embeddings" and parts[1] in _EMBEDDINGS \
      and parts[2] == "weight":
    return f"bert/embeddings/{parts[1]}", False
  if parts[-1] not in ("weight", "bias", "gamma", "beta") or len(parts) < 2:
    return key, False
  path = []
  i = 0
  while i < len(parts) - 1:
    if parts[i] == "layer" and i + 1 < len(parts) - 1 and parts[i + 1].isdigit():
      path.append(f"layer_{parts[i + 1]}")
      i += 2
    else:
      path.append(parts[i])
      i += 1
  leaf = parts[-1]
  if path[-1] == "LayerNorm":
    leaf = {"weight": "gamma", "bias": "beta"}.get(leaf, leaf)
    transpose = False
  else:
    transpose = leaf == "weight"
    leaf = {"weight": "kernel"}.get(leaf, leaf)
  root = "" if path[0] == "cls" else "bert/"
  return root + "/".join(path + [leaf]), transpose


def tf1_to_hf_name(name: str, prefixed: bool) -> Tuple[str, bool]:
  """TF1 name -> (HF key, transpose); `prefixed` adds "bert." to encoder keys."""
  if name in _TF1_TO_HF:
    return _TF1_TO_HF[name]
  if name.startswith("bert/encoder/embedding_hidden_mapping_in"):
    raise CheckpointError("factorised embeddings (embedding_size != "
                          "hidden_size) have no Hugging Face BertModel "
                          "equivalent")
  parts = name.split("/")
  transpose = False
  if parts[0] == "bert" and parts[1] == "embeddings" and parts[2] in _EMBEDDINGS:
    key = f"embeddings.{parts[2]}.weight"
  else:
    leaf = parts[-1]
    if parts[-2] == "LayerNorm":
      leaf = {"gamma": "weight", "beta": "bias"}[leaf]
    elif leaf == "kernel":
      leaf, transpose = "weight", True
    path = []
    for p in parts[:-1]:
      m = re.fullmatch(r"layer_(\d+)", p)
      path += ["layer", m.group(1)] if m else [p]
    if path[0] == "bert":
      path = path[1:]
    key = ".".join(path + [leaf])
  if prefixed and not name.startswith("cls/"):
    key = "bert." + key
  return key, transpose


def reject_pickles(folder: str) -> None:
  """Raises if the folder holds only pickled weights; never opens them."""
  for name in PICKLES:
    if os.path.exists(os.path.join(folder, name)):
      raise CheckpointError(
          f"{os.path.join(folder, name)}: PyTorch/Keras pickled weights are "
          "never loaded (unpickling runs code from the file). Convert them to "
          "safetensors first, in an environment you trust, e.g. "
          "`transformers.BertModel.from_pretrained(folder)"
          ".save_pretrained(out, safe_serialization=True)`")


def safetensors_files(folder: str) -> Dict[str, Optional[List[str]]]:
  """{safetensors file: the tensor names the index puts in it}, or
  {model.safetensors: None} for an unsharded folder. The index is an
  object whose `weight_map` maps each tensor name to a shard file inside
  the folder."""
  index = os.path.join(folder, SAFETENSORS_INDEX)
  if not os.path.exists(index):
    return {os.path.join(folder, SAFETENSORS): None}
  weight_map = read_json(index, CheckpointError).get("weight_map")
  if not isinstance(weight_map, dict) or not weight_map:
    raise CheckpointError(f"{index}: \"weight_map\" must be a non-empty "
                          f"object of tensor name -> file, found "
                          f"{kind(weight_map)}")
  files: Dict[str, List[str]] = {}
  for key, name in weight_map.items():
    path = named_path(folder, name, CheckpointError, index)
    if path not in files and not os.path.isfile(path):
      raise CheckpointError(f"{index}: names {name!r}, which is not a file "
                            f"in {folder}")
    files.setdefault(path, []).append(key)
  return dict(sorted(files.items()))


def _read_shards(folder: str) -> Dict[str, np.ndarray]:
  """{HF key: array} of every shard, each holding what the index says."""
  from safetensors import safe_open  # pylint: disable=g-import-not-at-top
  raw: Dict[str, np.ndarray] = {}
  for path, listed in safetensors_files(folder).items():
    if not os.path.exists(path):
      raise CheckpointError(f"{path}: file not found")
    try:
      with safe_open(path, framework="np") as f:
        keys = list(f.keys())
        if listed is not None and sorted(keys) != sorted(listed):
          raise CheckpointError(
              f"{path}: its tensors are not the ones {SAFETENSORS_INDEX} "
              f"puts in it (e.g. {sorted(set(keys) ^ set(listed))[0]!r})")
        for key in keys:
          if key in raw:
            raise CheckpointError(f"{path}: tensor {key!r} is in another "
                                  "shard too")
          raw[key] = f.get_tensor(key)
    except CheckpointError:
      raise
    except Exception as e:  # safetensors raises its own error types
      raise CheckpointError(f"{path}: cannot read safetensors file "
                            f"({type(e).__name__}: {first_line(e)})") from e
  return raw


def read_tf1_arrays(folder: str) -> Dict[str, np.ndarray]:
  """All tensors of the folder's safetensors file(s), keyed by TF1 name."""
  raw = _read_shards(folder)
  arrays: Dict[str, np.ndarray] = {}
  tied = {}
  for key, value in raw.items():
    if _HF_BUFFERS.search(key):
      continue
    if key in _TIED_DECODER:
      tied[key] = value
      continue
    name, transpose = hf_to_tf1_name(key)
    if name in arrays:
      raise CheckpointMismatchError(f"{folder}: {key} maps to {name}, which "
                                    "another tensor already provided")
    if np.issubdtype(value.dtype, np.floating):
      value = value.astype(np.float32)
    arrays[name] = value.T if transpose else value
  # A decoder copy must equal what it is tied to; otherwise it is a real,
  # untied weight that the tied masked-LM head cannot hold.
  for key, value in tied.items():
    target = arrays.get(_TIED_DECODER[key])
    if target is None or target.shape != value.shape or not np.array_equal(
        target, value.astype(target.dtype)):
      raise CheckpointMismatchError(
          f"{folder}: {key} is not a copy of {_TIED_DECODER[key]}; untied "
          "masked-LM output weights are not supported")
  return arrays


def write(arrays: Dict[str, np.ndarray], folder: str,
          metadata: Optional[Dict[str, str]] = None) -> None:
  """Writes {TF1 name: array} as `model.safetensors` in HF naming."""
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  prefixed = any(n.startswith("cls/") for n in arrays)
  tensors = {}
  for name, value in arrays.items():
    key, transpose = tf1_to_hf_name(name, prefixed)
    tensors[key] = np.ascontiguousarray(value.T if transpose else value)
  meta = {"format": "pt"}
  meta.update(metadata or {})
  save_file(tensors, os.path.join(folder, SAFETENSORS), metadata=meta)
