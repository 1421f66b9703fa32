"""KerasHub BERT presets: `config.json` (BertBackbone), `model.weights.h5`,
`tokenizer.json` + `assets/tokenizer/vocabulary.txt`. Read with h5py; Keras 3
is never imported.

In the h5 file each layer is a group named after its class
(`layers/transformer_encoder_3`), holding `vars/0`, `vars/1` (kernel, bias or
gamma, beta) and a `vars` attribute `name` with the layer's own name
(`transformer_layer_3`); the layer names are what this reader goes by:
  token_embedding, position_embedding, segment_embedding,
  embeddings_layer_norm, transformer_layer_i (sub-layers `query`, `key`,
  `value`, `attention_output`, `self_attention_layer_norm`,
  `feedforward_intermediate_dense`, `feedforward_output_dense`,
  `feedforward_layer_norm`), pooled_dense.
Attention kernels are [hidden, heads, head_size] as in Model Garden.
KerasHub's BERT uses the tanh form of GELU and LayerNorm epsilon 1e-12.
"""

import os
import re
from typing import Dict, Optional, Tuple

import numpy as np

from bert.checkpoints import model_garden
from bert.checkpoints.errors import CheckpointError
from bert.config import BertConfig
from bert.untrusted import first_line, kind, named_path, read_json
from bert.validation import ConfigError

CONFIG = "config.json"
WEIGHTS = "model.weights.h5"
TOKENIZER = "tokenizer.json"
_BACKBONE = "BertBackbone"

_TOP = {
    "token_embedding": ("bert/embeddings/word_embeddings",),
    "position_embedding": ("bert/embeddings/position_embeddings",),
    "segment_embedding": ("bert/embeddings/token_type_embeddings",),
    "embeddings_layer_norm": ("bert/embeddings/LayerNorm/gamma",
                              "bert/embeddings/LayerNorm/beta"),
    "pooled_dense": ("bert/pooler/dense/kernel", "bert/pooler/dense/bias"),
}
_BLOCK = {
    "query": "attention/self/query",
    "key": "attention/self/key",
    "value": "attention/self/value",
    "attention_output": "attention/output/dense",
    "self_attention_layer_norm": "attention/output/LayerNorm",
    "feedforward_intermediate_dense": "intermediate/dense",
    "feedforward_output_dense": "output/dense",
    "feedforward_layer_norm": "output/LayerNorm",
}
_LAYER = re.compile(r"transformer_layer_(\d+)")


# What h5py raises for a damaged file (it maps HDF5's errors onto these).
_H5_ERRORS = (OSError, KeyError, ValueError, RuntimeError, TypeError)


def is_preset(folder: str) -> bool:
  path = os.path.join(folder, CONFIG)
  if not os.path.exists(path):
    return False
  d = read_json(path, CheckpointError, expect=object)
  return isinstance(d, dict) and d.get("class_name") == _BACKBONE


def read_config(folder: str) -> BertConfig:
  path = os.path.join(folder, CONFIG)
  c = read_json(path, CheckpointError).get("config")
  if not isinstance(c, dict):
    raise CheckpointError(f"{path}: no \"config\" object")
  try:
    return BertConfig(
        vocab_size=c["vocabulary_size"], hidden_size=c["hidden_dim"],
        num_hidden_layers=c["num_layers"], num_attention_heads=c["num_heads"],
        intermediate_size=c["intermediate_dim"], hidden_act="gelu",
        hidden_dropout_prob=c.get("dropout", 0.1),
        attention_probs_dropout_prob=c.get("dropout", 0.1),
        max_position_embeddings=c["max_sequence_length"],
        type_vocab_size=c.get("num_segments", 2))
  except KeyError as e:
    raise CheckpointError(f"{path}: missing field config.{e.args[0]}") from None
  except ConfigError as e:
    raise CheckpointError(f"{path}: {e}") from None


def read(folder: str) -> Dict[str, np.ndarray]:
  """{TF1 name: array} from `model.weights.h5`. Datasets that fit no rule
  keep their h5 path (prefixed `keras_hub/`), so strict loading names them."""
  import h5py  # pylint: disable=g-import-not-at-top  (TensorFlow's dependency)
  path = os.path.join(folder, WEIGHTS)
  if not os.path.exists(path):
    raise CheckpointError(f"{path}: weights file not found")
  out: Dict[str, np.ndarray] = {}
  size = os.path.getsize(path)
  try:
    with h5py.File(path, "r") as f:
      datasets = []
      f.visititems(lambda name, obj: datasets.append(name)
                   if isinstance(obj, h5py.Dataset) else None)
      for name in sorted(datasets):
        dataset = f[name]
        # A damaged header can declare any shape; what the file cannot hold
        # is never allocated (Keras writes weights uncompressed).
        if dataset.compression is None and dataset.nbytes > size:
          raise CheckpointError(
              f"{path}: dataset {name} declares {list(dataset.shape)} "
              f"{dataset.dtype}, more than the file's {size:,} bytes")
        value = np.asarray(dataset)
        tf1_name = _tf1_name(f, name)
        if tf1_name is None:
          out["keras_hub/" + name] = value
        else:
          out[tf1_name] = model_garden.flatten(tf1_name, value)
  except CheckpointError:
    raise
  except _H5_ERRORS as e:
    raise CheckpointError(f"{path}: unreadable h5 file ({type(e).__name__}: "
                          f"{first_line(e)})") from e
  return out


def _layer_name(f, group: str) -> Optional[str]:
  """The `name` attribute of the h5 group `group`; None where the layout
  has no such group or name (the dataset then keeps its h5 path, and strict
  loading names it)."""
  node = f.get(group)
  name = None if node is None else node.attrs.get("name")
  if isinstance(name, bytes):
    name = name.decode("utf-8", "replace")
  return name if isinstance(name, str) else None


def _tf1_name(f, dataset: str) -> Optional[str]:
  """The TF1 name of an h5 dataset `.../vars/N`, from the layer names."""
  parts = dataset.split("/")
  if len(parts) < 4 or parts[0] != "layers" or parts[-2] != "vars":
    return None
  index = int(parts[-1]) if parts[-1].isdigit() else -1
  layer = _layer_name(f, "/".join(parts[:2] + ["vars"]))
  if len(parts) == 4 and layer in _TOP:
    names = _TOP[layer]
    return names[index] if 0 <= index < len(names) else None
  m = _LAYER.fullmatch(str(layer))
  if m and len(parts) >= 5:
    sub = _layer_name(f, "/".join(parts[:-1]))
    if sub in _BLOCK and index in (0, 1):
      leaf = (("gamma", "beta") if sub.endswith("layer_norm")
              else ("kernel", "bias"))[index]
      return f"bert/encoder/layer_{m.group(1)}/{_BLOCK[sub]}/{leaf}"
  return None


def tokenizer(folder: str) -> Tuple[Optional[str], Optional[bool]]:
  """(vocab file, lowercase) from the preset's tokenizer, when it has one."""
  path = os.path.join(folder, TOKENIZER)
  if not os.path.exists(path):
    return None, None
  config = read_json(path, CheckpointError).get("config", {})
  if not isinstance(config, dict):
    raise CheckpointError(f"{path}: \"config\" must be an object, found "
                          f"{kind(config)}")
  # KerasHub keeps the vocabulary in assets/<config_file's stem>/.
  config_file = config.get("config_file") or TOKENIZER
  if not isinstance(config_file, str):
    raise CheckpointError(f"{path}: config.config_file must be a file name, "
                          f"found {kind(config_file)}")
  stem = os.path.splitext(config_file)[0]
  vocab = named_path(folder, os.path.join("assets", stem, "vocabulary.txt"),
                     CheckpointError, path)
  if not os.path.exists(vocab):
    raise CheckpointError(f"{vocab}: the tokenizer's vocabulary file is missing")
  lowercase = config.get("lowercase", False)
  if not isinstance(lowercase, bool):
    raise CheckpointError(f"{path}: config.lowercase must be true or false, "
                          f"found {lowercase!r}")
  return vocab, lowercase
