"""Model Garden TF2 checkpoints: `tf.train.Checkpoint(encoder=tfm BertEncoder)`.

Read and written without importing Model Garden. Reading translates object
paths to TF1 names. A Model Garden encoder reaches each weight by several
paths (`object_graph`), in two spellings:
  - attribute paths, shared by the functional `BertEncoder` and the
    layer-based `BertEncoderV2`:
      {root}/_embedding_layer/..., {root}/_transformer_layers/I/..., ...
  - the functional model's layer list (older checkpoints have only these):
      {root}/layer_with_weights-K/...  with K = 0 word, 1 position, 2 type
      embeddings, 3 embedding LayerNorm, [4 embedding projection], then one
      per transformer block, then the pooler.
{root} is `encoder`, or `model/encoder_network` in a `BertPretrainerV2`
checkpoint. Its masked-LM head (`masked_lm/...`) maps to google-research's
`cls/predictions`; Model Garden's other heads (`next_sentence.pooler_dense`,
`classification_heads`) have no TF1 counterpart and come back under
`cls/model_garden/` (ignored unless the heads are asked for).
Model Garden's ALBERT, `AlbertEncoder`, is a functional model whose one
block every layer shares; only its embedding tables have attribute paths, so
its layer list is read (the block as `layer_0`). In an `ElectraPretrainer`
training checkpoint (`model/discriminator_network`, `model/generator_
network`, ...) the discriminator is the encoder read and its head
(`discriminator_projection`, `discriminator_head`) ELECTRA's
`cls/discriminator_predictions/dense{,_1}`; the generator's weights are kept
under `mapping.OTHER_NETWORK_PREFIX` (ignored). Its exported checkpoint
(`checkpoint_items`: `encoder=` the discriminator) is a plain `BertEncoder`
checkpoint.
Attention kernels are [hidden, heads, head_size] there and are reshaped to
the TF1 [hidden, hidden].

Writing produces the functional layout, which `tfm.nlp.networks.BertEncoder`
(and Model Garden's `EncoderConfig(type="bert")`) restores with
`tf.train.Checkpoint(encoder=encoder).read(path)`; for ALBERT with one group,
the same layout is `tfm.nlp.networks.AlbertEncoder`'s.
"""

from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from bert.checkpoints import mapping
from bert.checkpoints import object_graph
from bert.checkpoints import tf1
from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.checkpoints.model_garden_names import (BLOCK, ELECTRA_HEAD,
                                                 ELECTRA_ROOT, FUNCTIONAL_PATH,
                                                 MASKED_LM, MASKED_LM_PATH,
                                                 OTHER_HEADS,
                                                 OTHER_HEADS_PREFIX,
                                                 attribute_name, flatten)

__all__ = ["OTHER_HEADS_PREFIX", "check_writable", "flatten", "from_tf1",
           "is_model_garden", "read", "to_tf1", "write"]

_SUFFIX = object_graph.VALUE_SUFFIX


def is_model_garden(keys) -> bool:
  return any(k.endswith(_SUFFIX) and (
      "/layer_with_weights-" in k or "/_transformer_layers/" in k) for k in keys)


def read(prefix: str) -> Dict[str, np.ndarray]:
  """A Model Garden checkpoint as {TF1 name: array}."""
  arrays = tf1.read_arrays(prefix)
  with tf1.reading(prefix):
    paths = object_graph.paths_by_key(tf.train.load_checkpoint(prefix))
  return to_tf1(arrays, paths, prefix)


def to_tf1(arrays: Dict[str, np.ndarray], paths: Optional[Dict[str, List[str]]],
           source: str) -> Dict[str, np.ndarray]:
  """{checkpoint key: array} -> {TF1 name: array}.

  `paths` lists every object path of each key (`object_graph.paths_by_key`;
  None: the keys only). Keys that fit no rule, and optimizer slots, are
  passed through under their own name, so the strict assignment reports or
  ignores them by name.
  """
  out: Dict[str, np.ndarray] = {}
  electra = next((m.group("root") for key in arrays
                  for m in map(ELECTRA_ROOT.fullmatch,
                               (paths or {}).get(key, [key])) if m), None)
  # Each encoder weight by attribute path and, where the layer list reaches
  # it, by position: {key: ((root, TF1 name) or None, value)} and
  # {layer index: {(sub-path, key): value}}.
  attribute: Dict[str, tuple] = {}
  functional: Dict[int, Dict[tuple, np.ndarray]] = {}
  functional_root = None
  for key, value in arrays.items():
    if not key.endswith(_SUFFIX) or "/.OPTIMIZER_SLOT/" in key:
      out[key] = value
      continue
    candidates = [p[:-len(_SUFFIX)] for p in (paths or {}).get(key, [key])]
    if electra is not None:
      head = next((ELECTRA_HEAD[p[len(electra):]] for p in candidates
                   if p.startswith(electra)
                   and p[len(electra):] in ELECTRA_HEAD), None)
      if head:
        out[mapping.DISCRIMINATOR_PREFIX + head] = value
        continue
      candidates = [p for p in candidates
                    if p.startswith(electra + "discriminator_network/")]
      if not candidates:
        out[mapping.OTHER_NETWORK_PREFIX + key] = value
        continue
    named = next((n for n in map(attribute_name, candidates) if n), None)
    m = next((m for m in map(FUNCTIONAL_PATH.fullmatch, candidates) if m), None)
    if m:
      functional_root = m.group("root")
      functional.setdefault(int(m.group("index")), {})[(m.group("sub"), key)] = value
    if named:
      attribute[key] = (named, value)
      continue
    if m:
      continue
    m = next((m for m in map(MASKED_LM_PATH.fullmatch, candidates) if m), None)
    if m:
      out[MASKED_LM[m.group("sub")]] = value
    elif any(OTHER_HEADS.fullmatch(p) for p in candidates):
      out[OTHER_HEADS_PREFIX + candidates[0]] = value
    else:
      out[key] = value
  # Attribute paths name the blocks of `BertEncoder` and `BertEncoderV2`;
  # `AlbertEncoder` keeps attributes for its embedding tables only, and its
  # one shared block is reached by the layer list alone.
  by_attribute = any(name.startswith("bert/encoder/layer_")
                     for (_, name), _ in attribute.values())
  roots = set()
  if functional and not by_attribute:
    # The layer list names the weights: read them by position.
    roots.add(functional_root)
    listed = {key for layer in functional.values() for (_, key) in layer}
    for key, ((root, name), value) in attribute.items():
      if key not in listed:
        roots.add(root)
        out[name] = flatten(name, value)
    out.update(_functional_to_tf1(
        {i: {sub: v for (sub, _), v in layer.items()}
         for i, layer in functional.items()},
        f"{functional_root}/" if functional_root else "", source))
  else:
    for (root, name), value in attribute.values():
      roots.add(root)
      out[name] = flatten(name, value)
    # What only the layer list reaches is not one of the encoder's weights,
    # and is reported under its own key.
    out.update({key: v for layer in functional.values()
                for (_, key), v in layer.items() if key not in attribute})
  if len(roots) != 1:
    raise CheckpointError(f"{source}: expected one encoder root object, found "
                          f"{sorted(r or '(top level)' for r in roots) or 'none'}")
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
      if sub in BLOCK:
        name = f"bert/encoder/layer_{i}/{BLOCK[sub]}/{leaf}"
        out[name] = flatten(name, layers[index].pop(path))
  out["bert/pooler/dense/kernel"] = _take(layers, pooler, ["kernel"], source)
  out["bert/pooler/dense/bias"] = _take(layers, pooler, ["bias"], source)
  for index, left in layers.items():
    for path, value in left.items():
      out[f"{root}layer_with_weights-{index}/{path}{_SUFFIX}"] = value
  return out


# ------------------------------------------------------------------- write
def check_writable(config) -> None:
  """A CheckpointError unless a Model Garden encoder holds a model of
  `config`: `BertEncoder` (BERT), or `AlbertEncoder`, whose one block every
  layer shares (ALBERT with num_hidden_groups=1), both post-LN with a pooler
  and a token-type table."""
  family = config.family
  if family == "albert" and (config.num_hidden_groups or 1) != 1:
    raise CheckpointError(
        f"save: Model Garden's AlbertEncoder shares one block among all "
        f"layers; this ALBERT has num_hidden_groups={config.num_hidden_groups}")
  if family not in ("bert", "albert"):
    raise CheckpointError(f"save: Model Garden's BertEncoder cannot hold a "
                          f"{family} encoder; write \"tf2\" or \"hf\"")


def from_tf1(arrays: Dict[str, np.ndarray], num_heads: int) -> Dict[str, np.ndarray]:
  """{TF1 name: array} (encoder only) -> {functional-layout object path under
  `encoder`: array}, attention weights in Model Garden's 3-D shapes."""
  hidden = arrays["bert/embeddings/word_embeddings"].shape[-1]
  factorised = "bert/encoder/embedding_hidden_mapping_in/kernel" in arrays
  num_layers = len({n.split("/")[2] for n in arrays
                    if n.startswith("bert/encoder/layer_")})
  out = {
      "layer_with_weights-0/embeddings": arrays["bert/embeddings/word_embeddings"],
      "layer_with_weights-1/embeddings": arrays["bert/embeddings/position_embeddings"],
      "layer_with_weights-2/embeddings": arrays["bert/embeddings/token_type_embeddings"],
      "layer_with_weights-3/gamma": arrays["bert/embeddings/LayerNorm/gamma"],
      "layer_with_weights-3/beta": arrays["bert/embeddings/LayerNorm/beta"],
  }
  index = 4
  if factorised:
    hidden = arrays["bert/encoder/embedding_hidden_mapping_in/kernel"].shape[-1]
    for leaf in ("kernel", "bias"):
      out[f"layer_with_weights-4/{leaf}"] = arrays[
          f"bert/encoder/embedding_hidden_mapping_in/{leaf}"]
    index = 5
  head_size = hidden // num_heads
  for i in range(num_layers):
    for sub, tf1_sub in BLOCK.items():
      for leaf in (("gamma", "beta") if "norm" in sub else ("kernel", "bias")):
        value = arrays[f"bert/encoder/layer_{i}/{tf1_sub}/{leaf}"]
        if tf1_sub.startswith("attention/self/"):
          value = value.reshape(value.shape[:-1] + (num_heads, head_size))
        elif tf1_sub == "attention/output/dense" and leaf == "kernel":
          value = value.reshape(num_heads, head_size, value.shape[-1])
        out[f"layer_with_weights-{index + i}/{sub}/{leaf}"] = value
  pooler = index + num_layers
  out[f"layer_with_weights-{pooler}/kernel"] = arrays["bert/pooler/dense/kernel"]
  out[f"layer_with_weights-{pooler}/bias"] = arrays["bert/pooler/dense/bias"]
  return out


def write(arrays: Dict[str, np.ndarray], num_heads: int, prefix: str) -> None:
  """Writes `tf.train.Checkpoint(encoder=...)` with the functional layout.

  The encoder's object tree is built from plain `tf.Module`s named as Model
  Garden's layers are, so the checkpoint's object graph (which TF2 restores
  by) matches `tfm.nlp.networks.BertEncoder` without building one.
  """
  root = tf.Module()
  for path, value in from_tf1(arrays, num_heads).items():
    *parents, leaf = path.split("/")
    node = root
    for name in parents:
      child = getattr(node, name, None)
      if child is None:
        child = tf.Module()
        setattr(node, name, child)
      node = child
    setattr(node, leaf, tf.Variable(value, name=leaf))
  tf.train.Checkpoint(encoder=root).write(prefix)
