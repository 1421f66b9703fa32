"""google-research ALBERT and ELECTRA TF1 checkpoints: their variable names
<-> ours (google-research BERT's, `mapping.py`), and their config files.

Both repositories build the BERT encoder with other variable scopes; the
weights are BERT's. Names below are those of their `modeling.py` and
`run_pretraining.py` (github.com/google-research/albert, .../electra); the
TF1 TF Hub ALBERT modules hold the same names, some under `module/`.

ALBERT (layer i uses group `int(i / num_hidden_layers * num_hidden_groups)`;
`inner_group_0` is the one attention + feed-forward block of a group):
  bert/embeddings/..., bert/encoder/embedding_hidden_mapping_in/...,
  bert/pooler/dense/..., cls/predictions/..., cls/seq_relationship/...
      as BERT's
  bert/encoder/transformer/group_G/inner_group_0/
    attention_1/self/{query,key,value}/{kernel,bias}  attention/self/...
    attention_1/output/dense/{kernel,bias}            attention/output/dense
    LayerNorm/{gamma,beta}                            attention/output/LayerNorm
    ffn_1/intermediate/dense/{kernel,bias}            intermediate/dense
    ffn_1/intermediate/output/dense/{kernel,bias}     output/dense
    LayerNorm_1/{gamma,beta}                          output/LayerNorm
  (ours: bert/encoder/layer_G/..., `layer_G` naming block G).
  Kernels are 2-D, [in, out], as BERT's.

ELECTRA (`run_pretraining.py`: one checkpoint holds both networks):
  electra/embeddings/...              the word, position and type tables and
                                      their LayerNorm (the generator shares
                                      them unless its embeddings are untied:
                                      generator/embeddings/...)
  electra/embeddings_project/...      bert/encoder/embedding_hidden_mapping_in
                                      (only when embedding_size != hidden)
  electra/encoder/layer_i/...         bert/encoder/layer_i/... (BERT's block)
  discriminator_predictions/dense/... and .../dense_1/...
                                      cls/discriminator_predictions/...
  generator/embeddings_project/..., generator/encoder/layer_i/...
                                      the generator, a smaller encoder
  generator_predictions/{dense,LayerNorm}/..., .../output_bias
                                      its masked-LM head: cls/predictions/
                                      transform/..., cls/predictions/output_bias
The discriminator is read when the file has one, else the generator (and
the generator also when the folder's config file describes its width, not
the discriminator's); the other network's weights are kept under
`mapping.OTHER_NETWORK_PREFIX`, so strict loading reports them as ignored. ELECTRA's `modeling.py` computes
"gelu" exactly (erf), which is our "gelu_exact"; ALBERT's is the tanh form,
our "gelu".
"""

import dataclasses
import os
import re
from typing import Dict, Optional, Tuple

import numpy as np
from absl import logging

from bert.checkpoints import mapping
from bert.checkpoints.errors import CheckpointError
from bert.config import BertConfig
from bert.io import present
from bert.untrusted import read_json
from bert.validation import ConfigError

ALBERT_CONFIG = "albert_config.json"

# TF1 TF Hub modules scope their variables under the module's name.
_MODULE_PREFIX = "module/"

_ALBERT_BLOCK = {
    "attention_1/self/query": "attention/self/query",
    "attention_1/self/key": "attention/self/key",
    "attention_1/self/value": "attention/self/value",
    "attention_1/output/dense": "attention/output/dense",
    "LayerNorm": "attention/output/LayerNorm",
    "ffn_1/intermediate/dense": "intermediate/dense",
    "ffn_1/intermediate/output/dense": "output/dense",
    "LayerNorm_1": "output/LayerNorm",
}
_ALBERT_NAME = re.compile(
    r"bert/encoder/transformer/group_(?P<group>\d+)/inner_group_(?P<inner>\d+)/"
    r"(?P<sub>" + "|".join(re.escape(k) for k in sorted(
        _ALBERT_BLOCK, key=len, reverse=True)) + r")/(?P<rest>.+)")
_OUR_BLOCK = re.compile(r"bert/encoder/layer_(?P<layer>\d+)/(?P<sub>" + "|".join(
    re.escape(v) for v in sorted(_ALBERT_BLOCK.values(), key=len,
                                 reverse=True)) + r")/(?P<rest>.+)")
_ALBERT_TO_OURS = dict(_ALBERT_BLOCK)
_OURS_TO_ALBERT = {v: k for k, v in _ALBERT_BLOCK.items()}

# (their prefix, ours), first match wins; a name keeps what follows the
# prefix (so an optimizer slot, `.../kernel/adam_m`, follows its weight).
_DISCRIMINATOR = (
    ("electra/embeddings/", "bert/embeddings/"),
    ("electra/embeddings_project/",
     "bert/encoder/embedding_hidden_mapping_in/"),
    ("electra/encoder/", "bert/encoder/"),
    ("discriminator_predictions/", mapping.DISCRIMINATOR_PREFIX),
)
_GENERATOR = (
    ("generator/embeddings/", "bert/embeddings/"),   # untied embeddings
    ("electra/embeddings/", "bert/embeddings/"),     # shared with the
                                                     # discriminator
    ("generator/embeddings_project/",
     "bert/encoder/embedding_hidden_mapping_in/"),
    ("generator/encoder/", "bert/encoder/"),
    ("generator_predictions/dense/", "cls/predictions/transform/dense/"),
    ("generator_predictions/LayerNorm/",
     "cls/predictions/transform/LayerNorm/"),
    ("generator_predictions/output_bias", "cls/predictions/output_bias"),
)
_ELECTRA_SCOPES = ("electra/", "generator/", "discriminator_predictions/",
                   "generator_predictions/")


def names_family(names) -> Optional[str]:
  """"albert" or "electra" when the names are that repository's, else None
  (google-research BERT's own names, or ours)."""
  names = [n[len(_MODULE_PREFIX):] if n.startswith(_MODULE_PREFIX) else n
           for n in names]
  if any(n.startswith("bert/encoder/transformer/group_") for n in names):
    return "albert"
  if any(n.startswith(("electra/encoder/", "generator/encoder/"))
         for n in names):
    return "electra"
  return None


def is_google_research(names) -> bool:
  """Whether a name-based checkpoint holds google-research BERT, ALBERT or
  ELECTRA names."""
  return any(n.startswith(("bert/", _MODULE_PREFIX + "bert/") +
                          _ELECTRA_SCOPES) for n in names)


def to_canonical(arrays: Dict[str, np.ndarray], source: str,
                 hidden_size: Optional[int] = None
                 ) -> Tuple[Dict[str, np.ndarray], Optional[str]]:
  """({our TF1 name: array}, the family the names say or None) of a
  google-research checkpoint's arrays. Names of no rule are kept, so the
  strict assignment names them. `hidden_size`, the width the folder's
  config file describes, picks ELECTRA's generator from a file holding both
  networks when it is the generator's width and not the discriminator's."""
  arrays = {n[len(_MODULE_PREFIX):] if n.startswith(_MODULE_PREFIX) else n: v
            for n, v in arrays.items()}
  family = names_family(arrays)
  if family == "albert":
    return _albert_to_canonical(arrays, source), family
  if family == "electra":
    widths = {scope: np.shape(arrays.get(
        f"{scope}/encoder/layer_0/attention/self/query/kernel", ()))[-1:]
              for scope in ("electra", "generator")}
    generator = (hidden_size is not None
                 and widths["generator"] == (hidden_size,)
                 and widths["electra"] != (hidden_size,))
    return _electra_to_canonical(arrays, source, generator), family
  return arrays, family


class _Names(dict):
  """{our name: array}, where a second variable under one name (a file
  holding both spellings of a weight) is an error naming both."""

  def __init__(self, source):
    super().__init__()
    self._source = source
    self._origin = {}

  def put(self, name, value, origin):
    if name in self:
      raise CheckpointError(f"{self._source}: {origin} and "
                            f"{self._origin[name]} are both {name}")
    self[name] = value
    self._origin[name] = origin


def _albert_to_canonical(arrays, source):
  out = _Names(source)
  for name, value in arrays.items():
    m = _ALBERT_NAME.fullmatch(name)
    if m is None:
      out.put(name, value, name)
      continue
    if m.group("inner") != "0":
      # inner_group_num > 1 repeats several blocks inside each layer; every
      # released ALBERT has one, and so does our encoder.
      raise CheckpointError(
          f"{source}: {name}: inner_group_num > 1 (several blocks per ALBERT "
          "layer) is not supported; every released ALBERT has one")
    out.put(f"bert/encoder/layer_{m.group('group')}/"
            f"{_ALBERT_TO_OURS[m.group('sub')]}/{m.group('rest')}", value, name)
  return dict(out)


def _electra_to_canonical(arrays, source, generator=False):
  discriminator = not generator and any(n.startswith("electra/encoder/")
                                        for n in arrays)
  rules = _DISCRIMINATOR if discriminator else _GENERATOR
  untied = any(n.startswith("generator/embeddings/") for n in arrays)
  out = _Names(source)
  for name, value in arrays.items():
    target = None
    for theirs, ours in rules:
      if name.startswith(theirs):
        if not discriminator and untied and theirs == "electra/embeddings/":
          break           # the discriminator's own tables: not the generator's
        target = ours + name[len(theirs):]
        break
    if target is not None:
      out.put(target, value, name)
    elif name.startswith(_ELECTRA_SCOPES):
      # The other network of the pair (and its head): not this model's.
      out.put(mapping.OTHER_NETWORK_PREFIX + name, value, name)
    else:
      out.put(name, value, name)
  return dict(out)


def from_canonical(arrays: Dict[str, np.ndarray], family: str
                   ) -> Dict[str, np.ndarray]:
  """{our TF1 name: array} in the names of `family`'s google-research
  repository (ALBERT, ELECTRA); BERT's and the other families' as they are.

  An ELECTRA encoder is written as google-research's discriminator (with
  its head when it has one), or, with a masked-LM head, as its generator;
  names of neither (a pooler) keep BERT's."""
  if family == "albert":
    out = {}
    for name, value in arrays.items():
      m = _OUR_BLOCK.fullmatch(name)
      out[(f"bert/encoder/transformer/group_{m.group('layer')}/inner_group_0/"
           f"{_OURS_TO_ALBERT[m.group('sub')]}/{m.group('rest')}") if m
          else name] = value
    return out
  if family != "electra":
    return arrays
  generator = any(n.startswith("cls/predictions/") for n in arrays)
  if generator and any(n.startswith(mapping.DISCRIMINATOR_PREFIX)
                       for n in arrays):
    raise CheckpointError(
        "save: google-research ELECTRA keeps the masked-LM head on the "
        "generator, a network of its own; a TF1 checkpoint holds an encoder "
        "with the discriminator head or with the masked-LM head, not both")
  rules = [r for r in (_GENERATOR if generator else _DISCRIMINATOR)
           if r[0] != "generator/embeddings/"]
  out = {}
  for name, value in arrays.items():
    theirs = next((t + name[len(o):] for t, o in rules if name.startswith(o)),
                  name)
    out[theirs] = value
  return out


# ------------------------------------------------------------------ config
def folder_config(folder: str, google_config: str, arrays,
                  family: Optional[str], source: str
                  ) -> Tuple[BertConfig, Optional[str]]:
  """(config, the file it was read from; None when inferred) of a
  google-research or Model Garden checkpoint folder whose names say
  `family` (`names_family`; None: BERT's names).

  `google_config` (bert_config.json) is read first, then ALBERT's
  albert_config.json; an ELECTRA checkpoint without either (as released)
  gets ELECTRA's own defaults for what the weights do not show."""
  path = os.path.join(folder, google_config)
  albert_path = os.path.join(folder, ALBERT_CONFIG)
  if present(path):
    config = BertConfig.from_json_file(path, format="google")
    raw = read_json(path, CheckpointError)
    return _with_family(config, raw, family, arrays, path), path
  if present(albert_path):
    return albert_config(albert_path), albert_path
  if family == "electra":
    return electra_config(arrays, source), None
  raise CheckpointError(f"{path}: config file not found" + (
      f" (nor {ALBERT_CONFIG})" if family == "albert" else ""))


def _with_family(config, raw, family, arrays, path):
  """A bert_config.json of a checkpoint with ALBERT or ELECTRA names: its
  family is theirs. A file without `family` is google-research style, where
  ELECTRA's "gelu" is the exact form."""
  if family is None or config.family == family:
    return config
  if "family" in raw:
    raise CheckpointError(f"{path}: family={config.family!r}, but the "
                          f"checkpoint's variable names are {family}'s")
  changes = dict(family=family)
  if family == "electra":
    changes["use_pooler"] = "bert/pooler/dense/kernel" in arrays
    if config.hidden_act == "gelu":
      changes["hidden_act"] = "gelu_exact"
  else:
    changes["num_hidden_groups"] = config.num_hidden_groups or _groups(arrays)
  try:
    return dataclasses.replace(config, **changes)
  except ConfigError as e:
    raise CheckpointError(f"{path}: {e}") from None


def _groups(arrays) -> int:
  return len({n.split("/")[2] for n in arrays
              if n.startswith("bert/encoder/layer_")}) or 1


# google-research AlbertConfig fields that change the model, and the only
# value read here (every released ALBERT's).
_ALBERT_FIXED = dict(inner_group_num=1, down_scale_factor=1,
                     net_structure_type=0, gap_size=0, num_memory_blocks=0)


def albert_config(path: str) -> BertConfig:
  """A google-research albert_config.json (its "gelu" is the tanh form, as
  ours)."""
  raw = read_json(path, CheckpointError)
  for field, value in _ALBERT_FIXED.items():
    if raw.get(field, value) != value:
      raise CheckpointError(f"{path}: {field}={raw[field]!r} is not supported "
                            f"(only {value}, as in every released ALBERT)")
  d = dict(raw)
  d.setdefault("embedding_size", 128)         # AlbertConfig's default
  d.setdefault("num_hidden_groups", 1)
  d["family"] = "albert"
  try:
    config = BertConfig.from_google_dict(d)
  except (ConfigError, TypeError, ValueError) as e:
    raise CheckpointError(f"{path}: {e}") from None
  return config


def albert_config_dict(config: BertConfig) -> dict:
  """`config` as google-research ALBERT's albert_config.json."""
  d = {k: v for k, v in config.to_google_dict().items()
       if k in _ALBERT_FIELDS}
  d.update(embedding_size=config.embedding_width,
           num_hidden_groups=config.num_hidden_groups or config.num_hidden_layers,
           **_ALBERT_FIXED)
  return d


# google-research AlbertConfig's other fields (BERT's).
_ALBERT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                  "num_attention_heads", "intermediate_size", "hidden_act",
                  "hidden_dropout_prob", "attention_probs_dropout_prob",
                  "max_position_embeddings", "type_vocab_size",
                  "initializer_range")


def electra_config(arrays, source: str) -> BertConfig:
  """The config of a released ELECTRA checkpoint (no config file): shapes
  from the weights, the rest as ELECTRA's `get_bert_config` sets them:
  `num_attention_heads = max(1, hidden_size // 64)`, exact GELU, dropout
  0.1, no pooler."""
  def shape(name):
    if name not in arrays or np.ndim(arrays[name]) == 0:
      raise CheckpointError(f"{source}: no variable {name}; cannot infer the "
                            "ELECTRA config (add a bert_config.json)")
    return arrays[name].shape

  vocab_size, width = shape("bert/embeddings/word_embeddings")
  hidden = shape("bert/encoder/layer_0/attention/self/query/kernel")[-1]
  layers = _groups(arrays)
  config = dict(
      family="electra", vocab_size=vocab_size, hidden_size=hidden,
      num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64),
      intermediate_size=shape(
          "bert/encoder/layer_0/intermediate/dense/kernel")[-1],
      hidden_act="gelu_exact",
      max_position_embeddings=shape("bert/embeddings/position_embeddings")[0],
      type_vocab_size=shape("bert/embeddings/token_type_embeddings")[0],
      embedding_size=width if width != hidden else None,
      use_pooler="bert/pooler/dense/kernel" in arrays)
  logging.info("%s: no config file; ELECTRA config inferred: %s", source,
               config)
  try:
    return BertConfig(**config)
  except ConfigError as e:
    raise CheckpointError(f"{source}: the variables' shapes make no ELECTRA "
                          f"config ({e})") from None
