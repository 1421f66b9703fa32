"""TF Hub BERT SavedModels (Model Garden's `export_tfhub`): read by name.

The encoder SavedModels of TF Hub / Kaggle Models (`bert_en_uncased_L-12_H-768_A-12`,
`small_bert/...`) are Keras models saved with their vocab as an asset and
`do_lower_case` as a variable. Their `variables/variables` checkpoint keys
are positions (`variables/17/.ATTRIBUTES/VARIABLE_VALUE`); each variable's
Keras name (`transformer/layer_0/self_attention/query/kernel`) is recorded
beside it in the checkpoint's object graph (`full_name`), so the weights and
the config are read without loading or running the SavedModel's graph. The
one thing the weights do not say, the feed-forward activation, is read from
the op types the graph's functions use (`tfhub_graph`).

Names, layer i (functional `BertEncoder`; `EncoderScaffold` numbers blocks
`transformer/`, `transformer_1/`, ... and calls the pooler `cls_transform`;
the 2020 TF Hub releases say `bert_model/encoder/layer_i/...`):
  word_embeddings/embeddings, position_embedding/embeddings,
  type_embeddings/embeddings, embeddings/layer_norm/{gamma,beta},
  embedding_projection/{kernel,bias} (factorised),
  transformer/layer_i/self_attention/{query,key,value,attention_output}/...,
  transformer/layer_i/{self_attention_layer_norm,intermediate,output,
  output_layer_norm}/..., pooler_transform/{kernel,bias}
and with `mlm` (the masked-LM sub-model): .../cls/predictions/{output_bias/
bias, transform/dense/..., transform/LayerNorm/...}.

TF Hub's ALBERT encoders (`albert_en_base`, ...) are Model Garden's
`AlbertEncoder`: the same names, one block `transformer/...` that every layer
runs, and a SentencePiece model as their asset. How many layers run it is in
no weight; it is read from the AlbertEncoder's Keras config (`tfhub_graph`).
"""

import os
import re
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from bert.checkpoints import mapping
from bert.checkpoints import model_garden
from bert.checkpoints import object_graph
from bert.checkpoints import tf1
from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.checkpoints.tfhub_graph import (KERAS_METADATA, SAVED_MODEL,
                                          activation, albert_layers, graph_ops)
from bert.config import BertConfig
from bert.networks.bert_encoder import BertEncoder
from bert.networks.pretraining_heads import build_pretraining_heads
from bert.validation import ConfigError

__all__ = ["DO_LOWER_CASE_KEY", "KERAS_METADATA", "OWN_CONFIG", "SAVED_MODEL",
           "TF1_HUB_MODULE", "VARIABLES", "activation", "albert_layers",
           "assets", "graph_ops", "infer_config", "is_saved_model", "read"]

TF1_HUB_MODULE = "tfhub_module.pb"
VARIABLES = os.path.join("variables", "variables")

_EMBEDDINGS = {
    "word_embeddings/embeddings": "bert/embeddings/word_embeddings",
    "position_embedding/embeddings": "bert/embeddings/position_embeddings",
    "type_embeddings/embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings/layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
    "embeddings/layer_norm/beta": "bert/embeddings/LayerNorm/beta",
    "embedding_projection/kernel": "bert/encoder/embedding_hidden_mapping_in/kernel",
    "embedding_projection/bias": "bert/encoder/embedding_hidden_mapping_in/bias",
    "pooler_transform/kernel": "bert/pooler/dense/kernel",
    "pooler_transform/bias": "bert/pooler/dense/bias",
    "cls_transform/kernel": "bert/pooler/dense/kernel",
    "cls_transform/bias": "bert/pooler/dense/bias",
}
_BLOCK = {
    "self_attention/query": "attention/self/query",
    "self_attention/key": "attention/self/key",
    "self_attention/value": "attention/self/value",
    "self_attention/attention_output": "attention/output/dense",
    "self_attention_layer_norm": "attention/output/LayerNorm",
    "intermediate": "intermediate/dense",
    "output": "output/dense",
    "output_layer_norm": "output/LayerNorm",
}
_BLOCK_NAME = re.compile(
    r"(?:.+/)?(?:(?:transformer|encoder)/layer_(?P<layer>\d+)|"
    r"transformer(?:_(?P<scaffold>\d+))?)/(?P<sub>" +
    "|".join(re.escape(k) for k in sorted(_BLOCK, key=len, reverse=True)) +
    r")/(?P<leaf>kernel|bias|gamma|beta)")
_MLM_NAME = re.compile(r"(?:.+/)?cls/predictions/(?P<sub>output_bias/bias|"
                       r"transform/dense/kernel|transform/dense/bias|"
                       r"transform/LayerNorm/gamma|transform/LayerNorm/beta)")
_MLM = {"output_bias/bias": "cls/predictions/output_bias"}
DO_LOWER_CASE_KEY = "do_lower_case" + object_graph.VALUE_SUFFIX
OWN_CONFIG = "bert_config.json"        # in the assets of `bert-export` encoders
_RNG_STATE = re.compile(r"(^|/)StateVar$")


def is_saved_model(folder: str) -> bool:
  return (os.path.exists(os.path.join(folder, SAVED_MODEL)) and
          os.path.exists(os.path.join(folder, VARIABLES + ".index")))


def _tf1_name(full_name: str) -> Optional[str]:
  """A TF Hub BERT variable name -> its TF1 name, or None."""
  for suffix, name in _EMBEDDINGS.items():
    if full_name == suffix or full_name.endswith("/" + suffix):
      return name
  m = _BLOCK_NAME.fullmatch(full_name)
  if m:
    layer = m.group("layer") or m.group("scaffold") or "0"
    return f"bert/encoder/layer_{layer}/{_BLOCK[m.group('sub')]}/{m.group('leaf')}"
  m = _MLM_NAME.fullmatch(full_name)
  if m:
    return _MLM.get(m.group("sub"), "cls/predictions/" + m.group("sub"))
  return None


def read(folder: str) -> Tuple[Dict[str, np.ndarray], Optional[bool],
                               Optional[int], Optional[BertConfig]]:
  """({TF1 name: array}, lower_case, attention heads, config) from an
  encoder SavedModel (the heads from the [hidden, heads, head_size] query
  kernel). The config is None unless the SavedModel carries its own
  (`bert-export` writes `assets/bert_config.json`).

  Variables whose names fit no rule keep their name (prefixed `tfhub/`), so
  strict loading names them.
  """
  prefix = os.path.join(folder, VARIABLES)
  if os.path.exists(os.path.join(folder, TF1_HUB_MODULE)):
    # TF1 Hub format (hub.Module): a name-based checkpoint and a TF1 graph,
    # with no config and no object graph to read the layout from.
    raise CheckpointError(
        f"{folder}: a TF1 Hub module ({TF1_HUB_MODULE}), not a TF2 SavedModel; "
        f"its {VARIABLES}.* beside the model's bert_config.json (ALBERT: "
        "albert_config.json) read as a google-research TF1 checkpoint")
  with tf1.reading(prefix):
    reader = tf.train.load_checkpoint(prefix)
    keys = reader.get_variable_to_shape_map()
    graph = object_graph.read_graph(reader)
    if graph is None:
      raise ValueError("no object graph")
    names = {a.checkpoint_key: a.full_name for node in graph.nodes
             for a in node.attributes if a.name == "VARIABLE_VALUE"}
    lower_case = heads = None
    values: Dict[str, np.ndarray] = {}
    for key in keys:
      if key == object_graph.GRAPH_KEY:
        continue
      if key == DO_LOWER_CASE_KEY:
        lower_case = _flag(reader.get_tensor(key), prefix)
        continue
      full_name = names.get(key, key)
      if _RNG_STATE.search(full_name):
        continue          # a dropout layer's random-generator state
      values[full_name] = reader.get_tensor(key)
  own_config = os.path.join(folder, "assets", OWN_CONFIG)
  if os.path.exists(own_config):
    config = BertConfig.from_json_file(own_config)
    return (_from_own_names(values, config, prefix), lower_case,
            config.num_attention_heads, config)
  out: Dict[str, np.ndarray] = {}
  for full_name, value in values.items():
    name = _tf1_name(full_name)
    if name is None:
      out["tfhub/" + full_name] = value
    elif name in out:
      raise CheckpointError(f"{prefix}: two variables map to {name} "
                            f"(the second is {full_name!r}); not one BERT encoder")
    else:
      if name == "bert/encoder/layer_0/attention/self/query/kernel" and value.ndim == 3:
        heads = value.shape[1]
      out[name] = model_garden.flatten(name, value)
  return out, lower_case, heads, None


def _flag(value, source) -> bool:
  value = np.asarray(value)
  if value.size != 1 or value.dtype.kind not in "biu":
    raise CheckpointError(f"{source}: {DO_LOWER_CASE_KEY} is not one boolean "
                          f"({value.dtype.name} {list(value.shape)})")
  return bool(value.reshape(()))


def _from_own_names(values: Dict[str, np.ndarray], config: BertConfig,
                    source: str) -> Dict[str, np.ndarray]:
  """A `bert-export` encoder: its variables carry this library's own names,
  so they go into a `BertEncoder` (+ masked-LM head) of its config by name,
  strictly, and come out as TF1 arrays like every other format."""
  mapping.check_size(config, sum(v.size for n, v in values.items()
                                 if not n.startswith("masked_lm/")),
                     source, os.path.join("assets", OWN_CONFIG))
  encoder = BertEncoder(config)
  masked_lm = None
  if any(n.startswith("masked_lm/") for n in values):
    masked_lm, _ = build_pretraining_heads(encoder)
  targets = {w.name[:-len(":0")]: w for w in encoder.weights +
             (masked_lm.weights if masked_lm is not None else [])}
  missing = sorted(set(targets) - set(values))
  unexpected = sorted(set(values) - set(targets))
  wrong = [mapping.value_problem(n, values[n], tuple(targets[n].shape))
           for n in sorted(set(targets) & set(values))]
  wrong = [p for p in wrong if p]
  problems = ([f"missing variable(s): {', '.join(missing)}"] if missing else []) + \
      ([f"unexpected variable(s): {', '.join(unexpected)}"] if unexpected else []) + wrong
  if problems:
    raise CheckpointMismatchError(f"{source}: " + "; ".join(problems))
  for name, variable in targets.items():
    variable.assign(values[name].astype(variable.dtype.as_numpy_dtype))
  return mapping.to_tf1(encoder, masked_lm)


def assets(folder: str, preprocessing: Optional[str] = None,
           required: bool = True):
  """(vocab file, lower_case or None) from the SavedModel's assets, or
  from a preprocessing SavedModel (`bert_*_preprocess`), whose casing is its
  graph: lower-casing models fold case (`CaseFoldUTF8`). Without
  `required`, a SavedModel with no vocab gives (None, None)."""
  source = preprocessing or folder
  asset_dir = os.path.join(source, "assets")
  files = os.listdir(asset_dir) if os.path.isdir(asset_dir) else []
  texts = sorted(f for f in files if f.endswith(".txt"))
  if not texts:
    # ALBERT's encoders carry a SentencePiece model (30k-clean.model).
    texts = sorted(f for f in files if f.endswith(".model"))
  if not texts and not required and not preprocessing:
    return None, None
  if len(texts) != 1:
    raise CheckpointError(
        f"{asset_dir}: expected one vocab .txt (or SentencePiece .model) "
        f"asset, found {', '.join(texts) or 'none'}" + ("" if preprocessing else
        " (give the matching bert_*_preprocess SavedModel as preprocessing)"))
  lower_case = None
  if preprocessing:
    lower_case = "CaseFoldUTF8" in graph_ops(preprocessing)
  return os.path.join(asset_dir, texts[0]), lower_case


def infer_config(arrays: Dict[str, np.ndarray], num_heads: Optional[int],
                 hidden_act: str, source: str) -> BertConfig:
  """The encoder's config from its variables' shapes."""
  def shape(name):
    if name not in arrays:
      raise CheckpointError(f"{source}: no variable {name} (not a BERT encoder "
                            "in the TF Hub interface)")
    if arrays[name].ndim != 2 or 0 in arrays[name].shape:
      raise CheckpointError(f"{source}: {name} has shape "
                            f"{list(arrays[name].shape)}; a BERT encoder's "
                            "is a non-empty matrix")
    return arrays[name].shape

  vocab_size, width = shape("bert/embeddings/word_embeddings")
  hidden = width
  embedding_size = None
  if "bert/encoder/embedding_hidden_mapping_in/kernel" in arrays:
    embedding_size = width
    hidden = shape("bert/encoder/embedding_hidden_mapping_in/kernel")[-1]
  layers = sorted({int(n.split("/")[2][len("layer_"):]) for n in arrays
                   if n.startswith("bert/encoder/layer_")})
  if not layers or layers != list(range(len(layers))):
    raise CheckpointError(f"{source}: transformer layers {layers or 'none'} "
                          "found; not a BERT encoder in the TF Hub interface")
  if not num_heads:
    raise CheckpointError(f"{source}: no [hidden, heads, head_size] attention "
                          "kernel; cannot tell the number of attention heads")
  try:
    return BertConfig(
        vocab_size=vocab_size, hidden_size=hidden,
        num_hidden_layers=len(layers), num_attention_heads=num_heads,
        intermediate_size=shape(
            "bert/encoder/layer_0/intermediate/dense/kernel")[-1],
        hidden_act=hidden_act,
        max_position_embeddings=shape("bert/embeddings/position_embeddings")[0],
        type_vocab_size=shape("bert/embeddings/token_type_embeddings")[0],
        embedding_size=embedding_size)
  except ConfigError as e:
    raise CheckpointError(f"{source}: the variables' shapes make no BERT "
                          f"config ({e})") from None

