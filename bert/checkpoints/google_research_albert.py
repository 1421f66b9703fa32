"""google-research ALBERT TF1 checkpoints: their variable names <-> ours
(google-research BERT's, `mapping.py`), and their albert_config.json.

Names are those of github.com/google-research/albert's `modeling.py` and
`run_pretraining.py`; the TF1 TF Hub ALBERT modules hold the same names,
some under `module/` (`google_research` takes that off first). Layer i uses
group `int(i / num_hidden_layers * num_hidden_groups)`; `inner_group_0` is
the one attention + feed-forward block of a group:
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
Its `modeling.py` computes "gelu" in the tanh form, our "gelu".
"""

import re
from typing import Dict

import numpy as np

from bert.checkpoints.errors import CheckpointError
from bert.checkpoints.mapping import RenamedArrays
from bert.config import BertConfig
from bert.untrusted import read_json
from bert.validation import ConfigError

ALBERT_CONFIG = "albert_config.json"

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


def albert_to_canonical(arrays: Dict[str, np.ndarray], source: str
                        ) -> Dict[str, np.ndarray]:
  """{our TF1 name: array} of ALBERT's; names of no rule are kept."""
  out = RenamedArrays(source)
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


def albert_from_canonical(arrays: Dict[str, np.ndarray]
                          ) -> Dict[str, np.ndarray]:
  """{our TF1 name: array} in ALBERT's names (block i as group i)."""
  out = {}
  for name, value in arrays.items():
    m = _OUR_BLOCK.fullmatch(name)
    out[(f"bert/encoder/transformer/group_{m.group('layer')}/inner_group_0/"
         f"{_OURS_TO_ALBERT[m.group('sub')]}/{m.group('rest')}") if m
        else name] = value
  return out


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
