"""Hugging Face BERT-family weights: `model.safetensors` names <-> TF1 names.

Read with the `safetensors` package (NumPy, no PyTorch). `pytorch_model.bin`
is a pickle and is never opened.

HF keys are the TF1 names spelled with dots: "layer.3" for "layer_3",
Linear "weight" [out, in] for a TF1 "kernel" [in, out] (transposed),
LayerNorm "weight"/"bias" for "gamma"/"beta". Encoder keys carry a "bert."
prefix when the file also holds the pre-training heads (BertForPreTraining).

The other families (RoBERTa, ALBERT, DistilBERT, ELECTRA) name the same
weights differently; `_FAMILY_NAMES` renames their keys to BERT's and back,
so one set of rules serves every family. Their prefix is the family's
(`roberta.`, ...), and their heads map onto BERT's `cls/` names (ELECTRA's
discriminator head onto `cls/discriminator_predictions/...`).
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


# Each family's key (without its prefix) <-> BERT's, "{n}" a number. Keys
# that match none are named as BERT's already.
_FAMILY_NAMES = dict(
    bert=(),
    roberta=(
        ("lm_head.dense.", "cls.predictions.transform.dense."),
        ("lm_head.layer_norm.", "cls.predictions.transform.LayerNorm."),
        ("lm_head.decoder.", "cls.predictions.decoder."),
        ("lm_head.bias", "cls.predictions.bias"),
    ),
    albert=tuple(
        (f"encoder.albert_layer_groups.{{n}}.albert_layers.0.{theirs}",
         f"encoder.layer.{{n}}.{ours}") for theirs, ours in (
             ("attention.query.", "attention.self.query."),
             ("attention.key.", "attention.self.key."),
             ("attention.value.", "attention.self.value."),
             ("attention.dense.", "attention.output.dense."),
             ("attention.LayerNorm.", "attention.output.LayerNorm."),
             ("ffn.", "intermediate.dense."),
             ("ffn_output.", "output.dense."),
             ("full_layer_layer_norm.", "output.LayerNorm."))) + (
        ("pooler.", "pooler.dense."),
        ("predictions.dense.", "cls.predictions.transform.dense."),
        ("predictions.LayerNorm.", "cls.predictions.transform.LayerNorm."),
        ("predictions.decoder.", "cls.predictions.decoder."),
        ("predictions.bias", "cls.predictions.bias"),
        ("sop_classifier.classifier.", "cls.seq_relationship."),
    ),
    distilbert=tuple(
        (f"transformer.layer.{{n}}.{theirs}", f"encoder.layer.{{n}}.{ours}")
        for theirs, ours in (
            ("attention.q_lin.", "attention.self.query."),
            ("attention.k_lin.", "attention.self.key."),
            ("attention.v_lin.", "attention.self.value."),
            ("attention.out_lin.", "attention.output.dense."),
            ("sa_layer_norm.", "attention.output.LayerNorm."),
            ("ffn.lin1.", "intermediate.dense."),
            ("ffn.lin2.", "output.dense."),
            ("output_layer_norm.", "output.LayerNorm."))) + (
        ("vocab_transform.", "cls.predictions.transform.dense."),
        ("vocab_layer_norm.", "cls.predictions.transform.LayerNorm."),
        ("vocab_projector.weight", "cls.predictions.decoder.weight"),
        ("vocab_projector.bias", "cls.predictions.bias"),
    ),
    electra=(
        ("embeddings_project.", "encoder.embedding_hidden_mapping_in."),
        ("generator_predictions.dense.", "cls.predictions.transform.dense."),
        ("generator_predictions.LayerNorm.",
         "cls.predictions.transform.LayerNorm."),
        ("generator_lm_head.weight", "cls.predictions.decoder.weight"),
        ("generator_lm_head.bias", "cls.predictions.bias"),
        ("discriminator_predictions.dense_prediction.",
         "cls.discriminator_predictions.dense_1."),
        ("discriminator_predictions.dense.",
         "cls.discriminator_predictions.dense."),
    ),
)


def _pattern(template: str) -> "re.Pattern":
  return re.compile(re.escape(template).replace(r"\{n\}", r"(\d+)"))


def _rename(key: str, rules, forward: bool) -> str:
  """`key` with the first rule whose one side starts it replaced by the
  other side (family -> BERT when `forward`)."""
  for theirs, ours in rules:
    src, dst = (theirs, ours) if forward else (ours, theirs)
    m = _pattern(src).match(key)
    if m:
      out = dst
      for group in m.groups():
        out = out.replace("{n}", group, 1)
      return out + key[m.end():]
  return key


def to_bert_key(key: str, family: str = "bert") -> str:
  """A family's HF key as BERT's (its prefix becomes "bert.")."""
  if family == "bert":
    return key
  prefix = family + "."
  body = key[len(prefix):] if key.startswith(prefix) else key
  renamed = _rename(body, _FAMILY_NAMES[family], True)
  prefixed = key.startswith(prefix) and not renamed.startswith("cls.")
  return ("bert." if prefixed else "") + renamed


def from_bert_key(key: str, family: str = "bert") -> str:
  """BERT's HF key as the family's (inverse of `to_bert_key`)."""
  if family == "bert":
    return key
  prefixed = key.startswith("bert.")
  body = key[len("bert."):] if prefixed else key
  renamed = _rename(body, _FAMILY_NAMES[family], False)
  return (family + "." if prefixed else "") + renamed


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


def read_tf1_arrays(folder: str, family: str = "bert") -> Dict[str, np.ndarray]:
  """All tensors of the folder's safetensors file(s), keyed by TF1 name;
  `family` is the model's (`BertConfig.family`), which names them."""
  raw = _read_shards(folder)
  arrays: Dict[str, np.ndarray] = {}
  tied = {}
  for key, value in raw.items():
    if _HF_BUFFERS.search(key):
      continue
    bert_key = to_bert_key(key, family)
    if bert_key in _TIED_DECODER:
      tied[key] = value
      continue
    name, transpose = hf_to_tf1_name(bert_key)
    if name in arrays:
      raise CheckpointMismatchError(f"{folder}: {key} maps to {name}, which "
                                    "another tensor already provided")
    if np.issubdtype(value.dtype, np.floating):
      value = value.astype(np.float32)
    arrays[name] = value.T if transpose else value
  # A decoder copy must equal what it is tied to; otherwise it is a real,
  # untied weight that the tied masked-LM head cannot hold.
  for key, value in tied.items():
    tied_to = _TIED_DECODER[to_bert_key(key, family)]
    target = arrays.get(tied_to)
    if target is None or target.shape != value.shape or not np.array_equal(
        target, value.astype(target.dtype)):
      raise CheckpointMismatchError(
          f"{folder}: {key} is not a copy of {tied_to}; untied "
          "masked-LM output weights are not supported")
  return arrays


def write(arrays: Dict[str, np.ndarray], folder: str,
          metadata: Optional[Dict[str, str]] = None,
          family: str = "bert") -> None:
  """Writes {TF1 name: array} as `model.safetensors` in the HF naming of
  `family`."""
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  prefixed = any(n.startswith("cls/") for n in arrays)
  tensors = {}
  for name, value in arrays.items():
    if family == "bert" and name.startswith(
        "bert/encoder/embedding_hidden_mapping_in"):
      raise CheckpointError("factorised embeddings (embedding_size != "
                            "hidden_size) have no Hugging Face BertModel "
                            "equivalent")
    key, transpose = tf1_to_hf_name(name, prefixed)
    key = from_bert_key(key, family)
    tensors[key] = np.ascontiguousarray(value.T if transpose else value)
  meta = {"format": "pt"}
  meta.update(metadata or {})
  save_file(tensors, os.path.join(folder, SAFETENSORS), metadata=meta)
