"""Model Garden TF2 checkpoints: `tf.train.Checkpoint(encoder=tfm BertEncoder)`.

Object-based keys are translated to TF1 names (no Model Garden import). Two
layouts exist:
  - functional `BertEncoder` (the released TF2 checkpoints):
      {root}/layer_with_weights-K/...  with K = 0 word, 1 position, 2 type
      embeddings, 3 embedding LayerNorm, [4 embedding projection], then one
      per transformer block, then the pooler;
  - layer-based `BertEncoderV2`:
      {root}/_embedding_layer/..., {root}/_transformer_layers/I/..., ...
Attention kernels are [hidden, heads, head_size] there and are reshaped to
the TF1 [hidden, hidden].
"""

import re
from typing import Dict

import numpy as np

from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError

_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"

_BLOCK = {
    "_attention_layer/_query_dense": "attention/self/query",
    "_attention_layer/_key_dense": "attention/self/key",
    "_attention_layer/_value_dense": "attention/self/value",
    "_attention_layer/_output_dense": "attention/output/dense",
    "_attention_layer_norm": "attention/output/LayerNorm",
    "_intermediate_dense": "intermediate/dense",
    "_output_dense": "output/dense",
    "_output_layer_norm": "output/LayerNorm",
}
_V2_EMBEDDINGS = {
    "_embedding_layer/embeddings": "bert/embeddings/word_embeddings",
    "_position_embedding_layer/_position_embeddings":
        "bert/embeddings/position_embeddings",
    "_position_embedding_layer/embeddings": "bert/embeddings/position_embeddings",
    "_type_embedding_layer/embeddings": "bert/embeddings/token_type_embeddings",
    "_embedding_norm_layer/gamma": "bert/embeddings/LayerNorm/gamma",
    "_embedding_norm_layer/beta": "bert/embeddings/LayerNorm/beta",
    "_embedding_projection/kernel": "bert/encoder/embedding_hidden_mapping_in/kernel",
    "_embedding_projection/bias": "bert/encoder/embedding_hidden_mapping_in/bias",
    "_pooler_layer/kernel": "bert/pooler/dense/kernel",
    "_pooler_layer/bias": "bert/pooler/dense/bias",
}


def is_model_garden(keys) -> bool:
  return any(k.endswith(_SUFFIX) and (
      "/layer_with_weights-" in k or "/_transformer_layers/" in k) for k in keys)


def _flatten(name, value):
  """Model Garden's [hidden, heads, size] / [heads, size] / [heads, size,
  hidden] attention weights -> TF1 2-D / 1-D."""
  if "attention/output/dense/kernel" in name and value.ndim == 3:
    return value.reshape(-1, value.shape[-1])
  if "attention/self/" in name:
    if name.endswith("/kernel") and value.ndim == 3:
      return value.reshape(value.shape[0], -1)
    if name.endswith("/bias") and value.ndim == 2:
      return value.reshape(-1)
  return value


def to_tf1(arrays: Dict[str, np.ndarray], source: str) -> Dict[str, np.ndarray]:
  """{object key: array} -> {TF1 name: array}.

  Keys that fit neither layout, and optimizer slots, are passed through under
  their own name, so the strict assignment reports or ignores them by name.
  """
  roots = {k.split("/", 1)[0] for k in arrays if k.endswith(_SUFFIX)
           and ("/layer_with_weights-" in k or "/_transformer_layers/" in k)}
  if len(roots) != 1:
    raise CheckpointError(f"{source}: expected one encoder root object, found "
                          f"{sorted(roots) or 'none'}")
  root = roots.pop()
  out: Dict[str, np.ndarray] = {}
  functional: Dict[int, Dict[str, np.ndarray]] = {}
  for key, value in arrays.items():
    if (not key.startswith(root + "/") or not key.endswith(_SUFFIX)
        or "/.OPTIMIZER_SLOT/" in key):
      out[key] = value
      continue
    path = key[len(root) + 1:-len(_SUFFIX)]
    m = re.fullmatch(r"layer_with_weights-(\d+)/(.+)", path)
    if m:
      functional.setdefault(int(m.group(1)), {})[m.group(2)] = value
      continue
    m = re.fullmatch(r"_transformer_layers/(\d+)/(.+)/(kernel|bias|gamma|beta)", path)
    if m and m.group(2) in _BLOCK:
      name = f"bert/encoder/layer_{m.group(1)}/{_BLOCK[m.group(2)]}/{m.group(3)}"
      out[name] = _flatten(name, value)
    elif path in _V2_EMBEDDINGS:
      out[_V2_EMBEDDINGS[path]] = value
    else:
      out[key] = value
  if functional:
    out.update(_functional_to_tf1(functional, f"{root}/", source))
  return out


def _take(layers, index, names, source):
  """Removes and returns the first of `names` present in layer `index`."""
  for name in names:
    if name in layers[index]:
      return layers[index].pop(name)
  raise CheckpointMismatchError(
      f"{source}: missing variable layer_with_weights-{index}/{names[0]}")


def _functional_to_tf1(layers: Dict[int, Dict[str, np.ndarray]], root: str,
                       source: str):
  """Functional layout: layers in creation order (see module docstring).
  Sub-keys that no rule consumes are returned under their own key."""
  order = sorted(layers)
  if order != list(range(len(order))) or len(order) < 6:
    raise CheckpointError(f"{source}: unexpected Model Garden layout "
                          f"(layer_with_weights indices {order})")
  out = {
      "bert/embeddings/word_embeddings": _take(layers, 0, ["embeddings"], source),
      "bert/embeddings/position_embeddings": _take(
          layers, 1, ["_position_embeddings", "embeddings"], source),
      "bert/embeddings/token_type_embeddings": _take(
          layers, 2, ["embeddings"], source),
      "bert/embeddings/LayerNorm/gamma": _take(layers, 3, ["gamma"], source),
      "bert/embeddings/LayerNorm/beta": _take(layers, 3, ["beta"], source),
  }
  rest = order[4:]
  if not any(k.startswith("_attention_layer") for k in layers[rest[0]]):
    out["bert/encoder/embedding_hidden_mapping_in/kernel"] = _take(
        layers, rest[0], ["kernel"], source)
    out["bert/encoder/embedding_hidden_mapping_in/bias"] = _take(
        layers, rest[0], ["bias"], source)
    rest = rest[1:]
  *blocks, pooler = rest
  for i, index in enumerate(blocks):
    for path in list(layers[index]):
      sub, _, leaf = path.rpartition("/")
      if sub in _BLOCK:
        name = f"bert/encoder/layer_{i}/{_BLOCK[sub]}/{leaf}"
        out[name] = _flatten(name, layers[index].pop(path))
  out["bert/pooler/dense/kernel"] = _take(layers, pooler, ["kernel"], source)
  out["bert/pooler/dense/bias"] = _take(layers, pooler, ["bias"], source)
  for index, left in layers.items():
    for path, value in left.items():
      out[f"{root}layer_with_weights-{index}/{path}{_SUFFIX}"] = value
  return out
