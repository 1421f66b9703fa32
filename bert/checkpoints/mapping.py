"""The canonical weight names: google-research TF1 BERT variable names.

Every format converts to and from a flat dict {TF1 name: numpy array}; this
module maps that dict onto our objects and back. One table (`weight_specs`)
serves both directions, so reading and writing cannot drift apart.

Names, for layer i (google-research `modeling.py` / `run_pretraining.py`):
  bert/embeddings/{word_embeddings,token_type_embeddings,position_embeddings}
  bert/embeddings/LayerNorm/{gamma,beta}
  bert/encoder/embedding_hidden_mapping_in/{kernel,bias}   (factorised only)
  bert/encoder/layer_i/attention/self/{query,key,value}/{kernel,bias}
  bert/encoder/layer_i/attention/output/dense/{kernel,bias}
  bert/encoder/layer_i/attention/output/LayerNorm/{gamma,beta}
  bert/encoder/layer_i/intermediate/dense/{kernel,bias}
  bert/encoder/layer_i/output/dense/{kernel,bias}
  bert/encoder/layer_i/output/LayerNorm/{gamma,beta}
  bert/pooler/dense/{kernel,bias}
  cls/predictions/transform/dense/{kernel,bias}
  cls/predictions/transform/LayerNorm/{gamma,beta}
  cls/predictions/output_bias
  cls/seq_relationship/{output_weights,output_bias}
Kernels are [in, out]; `cls/seq_relationship/output_weights` is [2, hidden].
"""

import dataclasses
import re
from typing import Dict, List, Optional

import numpy as np

from bert.checkpoints.errors import CheckpointMismatchError

HEAD_PREFIX = "cls/"

# Source names that carry no model weights: optimizer state and counters.
_IGNORABLE = re.compile(
    r"(^|/)(global_step|bad_steps|good_steps|loss_scale|current_loss_scale)$"
    r"|/adam_[mv]$|/Momentum$|/LAMB(_1)?$|^_CHECKPOINTABLE_OBJECT_GRAPH$"
    r"|^save_counter|^optimizer/|/\.OPTIMIZER_SLOT/")


def is_ignorable(name: str) -> bool:
  return bool(_IGNORABLE.search(name))


@dataclasses.dataclass
class WeightSpec:
  """One TF1 name and where it lives in our model.

  `index` selects a column block of a fused variable (the QKV projection);
  `transpose` marks names stored transposed relative to our variable.
  """
  name: str
  variable: object
  index: Optional[slice] = None
  transpose: bool = False

  def expected_shape(self):
    shape = list(self.variable.shape)
    if self.index is not None:
      start, stop, _ = self.index.indices(shape[-1])
      shape[-1] = stop - start
    return tuple(reversed(shape)) if self.transpose else tuple(shape)

  def read(self) -> np.ndarray:
    value = self.variable.numpy()
    if self.index is not None:
      value = value[..., self.index]
    return value.T if self.transpose else value


def weight_specs(encoder, masked_lm=None, next_sentence=None) -> List[WeightSpec]:
  """The TF1 name of every weight of `encoder` and the optional heads."""
  hidden = encoder.config.hidden_size
  emb = encoder.embedding_layer
  specs = [
      WeightSpec("bert/embeddings/word_embeddings", emb.word_embeddings),
      WeightSpec("bert/embeddings/token_type_embeddings", emb.type_embeddings),
      WeightSpec("bert/embeddings/position_embeddings", emb.position_embeddings),
      WeightSpec("bert/embeddings/LayerNorm/gamma", emb.layer_norm.gamma),
      WeightSpec("bert/embeddings/LayerNorm/beta", emb.layer_norm.beta),
  ]
  if emb.projection is not None:
    specs += [
        WeightSpec("bert/encoder/embedding_hidden_mapping_in/kernel",
                   emb.projection.kernel),
        WeightSpec("bert/encoder/embedding_hidden_mapping_in/bias",
                   emb.projection.bias),
    ]
  for i, block in enumerate(encoder.transformer_layers):
    p = f"bert/encoder/layer_{i}/"
    qkv = block.attention.qkv
    for j, part in enumerate(("query", "key", "value")):
      cols = slice(j * hidden, (j + 1) * hidden)
      specs.append(WeightSpec(p + f"attention/self/{part}/kernel", qkv.kernel, cols))
      specs.append(WeightSpec(p + f"attention/self/{part}/bias", qkv.bias, cols))
    specs += _dense(p + "attention/output/dense", block.attention.output_dense)
    specs += _norm(p + "attention/output/LayerNorm", block.attention_layer_norm)
    specs += _dense(p + "intermediate/dense", block.intermediate_dense)
    specs += _dense(p + "output/dense", block.output_dense)
    specs += _norm(p + "output/LayerNorm", block.output_layer_norm)
  specs += _dense("bert/pooler/dense", encoder.pooler_layer)
  if masked_lm is not None:
    specs += _dense("cls/predictions/transform/dense", masked_lm.dense)
    specs += _norm("cls/predictions/transform/LayerNorm", masked_lm.layer_norm)
    specs.append(WeightSpec("cls/predictions/output_bias", masked_lm.output_bias))
  if next_sentence is not None:
    specs += [
        WeightSpec("cls/seq_relationship/output_weights",
                   next_sentence.out.kernel, transpose=True),
        WeightSpec("cls/seq_relationship/output_bias", next_sentence.out.bias),
    ]
  return specs


def _dense(prefix, layer):
  return [WeightSpec(prefix + "/kernel", layer.kernel),
          WeightSpec(prefix + "/bias", layer.bias)]


def _norm(prefix, layer):
  return [WeightSpec(prefix + "/gamma", layer.gamma),
          WeightSpec(prefix + "/beta", layer.beta)]


def to_tf1(encoder, masked_lm=None, next_sentence=None) -> Dict[str, np.ndarray]:
  """Our weights as {TF1 name: array}."""
  return {s.name: s.read()
          for s in weight_specs(encoder, masked_lm, next_sentence)}


def assign_from_tf1(arrays: Dict[str, np.ndarray], encoder, masked_lm=None,
                    next_sentence=None, source: str = "checkpoint",
                    ignore_heads: bool = False) -> List[str]:
  """Assigns {TF1 name: array} to our weights, strictly.

  Every weight must be found exactly once with the right shape, and every
  source array must be used, be optimizer/bookkeeping state, or (with
  `ignore_heads`) belong to the pre-training heads. Returns the sorted names
  that were ignored. Raises CheckpointMismatchError naming every problem.
  """
  specs = weight_specs(encoder, masked_lm, next_sentence)
  problems = []
  missing = [s.name for s in specs if s.name not in arrays]
  if missing:
    problems.append(f"missing variable(s): {_listing(missing)}")
  for s in specs:
    if s.name in arrays and tuple(arrays[s.name].shape) != s.expected_shape():
      problems.append(f"{s.name}: expected shape {list(s.expected_shape())}, "
                      f"found {list(arrays[s.name].shape)}")
  used = {s.name for s in specs}
  ignored, unexpected = [], []
  for name in sorted(arrays):
    if name in used:
      continue
    if is_ignorable(name) or (ignore_heads and name.startswith(HEAD_PREFIX)):
      ignored.append(name)
    else:
      unexpected.append(name)
  if unexpected:
    problems.append(f"unexpected variable(s): {_listing(unexpected)}")
  if problems:
    raise CheckpointMismatchError(f"{source}: " + "; ".join(problems))

  # Group column blocks of fused variables, then assign each variable once.
  by_variable: Dict[int, list] = {}
  for s in specs:
    by_variable.setdefault(id(s.variable), []).append(s)
  for group in by_variable.values():
    variable = group[0].variable
    if group[0].index is None:
      value = arrays[group[0].name]
      variable.assign(value.T if group[0].transpose else value)
      continue
    full = np.empty(variable.shape, dtype=variable.dtype.as_numpy_dtype)
    for s in group:
      full[..., s.index] = arrays[s.name]
    variable.assign(full)
  return ignored


def _listing(names, limit=12):
  shown = ", ".join(names[:limit])
  more = len(names) - limit
  return shown + (f" (and {more} more)" if more > 0 else "")
