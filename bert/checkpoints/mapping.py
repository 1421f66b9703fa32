"""The canonical weight names: google-research TF1 BERT variable names.

Every format converts to and from a flat dict {TF1 name: numpy array}; this
module maps that dict onto our objects and back. One table (`weight_specs`)
serves both directions, so reading and writing cannot drift apart. A format
of other names builds the dict in a `RenamedArrays`, which refuses two
variables under one name.

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
  cls/discriminator_predictions/dense/{kernel,bias}         (ELECTRA)
  cls/discriminator_predictions/dense_1/{kernel,bias}
Kernels are [in, out]; `cls/seq_relationship/output_weights` is [2, hidden].
ELECTRA's discriminator head (google-research ELECTRA names it
`discriminator_predictions/dense` and `.../dense_1`) sits under `cls/` with
the other heads, so every format keeps all heads in one namespace.

The BERT family uses the same names (`BertConfig.family`): a model without a
token-type table or pooler has no such names, and when layers share blocks
(ALBERT) `layer_i` names block i, not layer i.
"""

import dataclasses
import math
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.config import BertConfig

HEAD_PREFIX = "cls/"
DISCRIMINATOR_PREFIX = HEAD_PREFIX + "discriminator_predictions/"
# The weights of another network kept in the same file (a google-research
# ELECTRA checkpoint holds the generator beside the discriminator), under
# their own names: not this model's, reported as ignored.
OTHER_NETWORK_PREFIX = "other_network/"

# Source names that carry no model weights: optimizer state and counters,
# and another network's weights kept in the same file.
_IGNORABLE = re.compile(
    r"(^|/)(global_step|bad_steps|good_steps|loss_scale|current_loss_scale)$"
    r"|/adam_[mv]$|/Momentum$|/LAMB(_1)?$|^_CHECKPOINTABLE_OBJECT_GRAPH$"
    r"|^save_counter|^optimizer/|/\.OPTIMIZER_SLOT/|^" +
    re.escape(OTHER_NETWORK_PREFIX))


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


def weight_specs(encoder, masked_lm=None, next_sentence=None,
                 discriminator=None) -> List[WeightSpec]:
  """The TF1 name of every weight of `encoder` and the optional heads
  (`discriminator`: ELECTRA's `DiscriminatorHead`)."""
  hidden = encoder.config.hidden_size
  emb = encoder.embedding_layer
  specs = [WeightSpec("bert/embeddings/word_embeddings", emb.word_embeddings)]
  if emb.type_embeddings is not None:
    specs.append(WeightSpec("bert/embeddings/token_type_embeddings",
                            emb.type_embeddings))
  specs += [
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
  if encoder.pooler_layer is not None:
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
  if discriminator is not None:
    specs += _dense(DISCRIMINATOR_PREFIX + "dense", discriminator.dense)
    specs += _dense(DISCRIMINATOR_PREFIX + "dense_1", discriminator.prediction)
  return specs


def _dense(prefix, layer):
  return [WeightSpec(prefix + "/kernel", layer.kernel),
          WeightSpec(prefix + "/bias", layer.bias)]


def _norm(prefix, layer):
  return [WeightSpec(prefix + "/gamma", layer.gamma),
          WeightSpec(prefix + "/beta", layer.beta)]


def to_tf1(encoder, masked_lm=None, next_sentence=None,
           discriminator=None) -> Dict[str, np.ndarray]:
  """Our weights as {TF1 name: array}."""
  return {s.name: s.read()
          for s in weight_specs(encoder, masked_lm, next_sentence,
                                discriminator)}


Shape = Tuple[int, ...]


def expected_shapes(config: BertConfig, masked_lm: bool = False,
                    next_sentence: bool = False,
                    discriminator: bool = False) -> Dict[str, Shape]:
  """{TF1 name: shape} of every weight of a model of `config` (with the
  heads asked for), computed from the config alone: what `weight_specs`
  gives for the built model (a test keeps the two equal), known before a
  single variable is allocated."""
  h, w, i = (config.hidden_size, config.embedding_width,
             config.intermediate_size)
  shapes = {
      "bert/embeddings/word_embeddings": (config.vocab_size, w),
      "bert/embeddings/position_embeddings": (config.max_position_embeddings,
                                              w),
      "bert/embeddings/LayerNorm/gamma": (w,),
      "bert/embeddings/LayerNorm/beta": (w,),
  }
  if config.type_vocab_size:
    shapes["bert/embeddings/token_type_embeddings"] = (config.type_vocab_size,
                                                       w)
  if w != h:
    shapes.update(_dense_shapes("bert/encoder/embedding_hidden_mapping_in",
                                w, h))
  for layer in range(config.num_blocks):
    p = f"bert/encoder/layer_{layer}/"
    for part in ("query", "key", "value"):
      shapes.update(_dense_shapes(p + f"attention/self/{part}", h, h))
    shapes.update(_dense_shapes(p + "attention/output/dense", h, h))
    shapes.update(_norm_shapes(p + "attention/output/LayerNorm", h))
    shapes.update(_dense_shapes(p + "intermediate/dense", h, i))
    shapes.update(_dense_shapes(p + "output/dense", i, h))
    shapes.update(_norm_shapes(p + "output/LayerNorm", h))
  if config.use_pooler:
    shapes.update(_dense_shapes("bert/pooler/dense", h, h))
  if masked_lm:
    shapes.update(_dense_shapes("cls/predictions/transform/dense", h, w))
    shapes.update(_norm_shapes("cls/predictions/transform/LayerNorm", w))
    shapes["cls/predictions/output_bias"] = (config.vocab_size,)
  if next_sentence:
    shapes["cls/seq_relationship/output_weights"] = (2, h)
    shapes["cls/seq_relationship/output_bias"] = (2,)
  if discriminator:
    shapes.update(_dense_shapes(DISCRIMINATOR_PREFIX + "dense", h, h))
    shapes.update(_dense_shapes(DISCRIMINATOR_PREFIX + "dense_1", h, 1))
  return shapes


def _dense_shapes(prefix, n_in, n_out):
  return {prefix + "/kernel": (n_in, n_out), prefix + "/bias": (n_out,)}


def _norm_shapes(prefix, width):
  return {prefix + "/gamma": (width,), prefix + "/beta": (width,)}


def value_problem(name: str, value, shape: Shape) -> Optional[str]:
  """Why `value` cannot be the weight `name` of `shape`, or None.

  The one check of a stored tensor against what the model expects, for
  every format: the shape, and floating-point values (any width: float16,
  bfloat16 and float64 are cast to the variable's float32; integers,
  booleans and strings are never weights)."""
  found = tuple(getattr(value, "shape", ()))
  if found != tuple(shape):
    return f"{name}: expected shape {list(shape)}, found {list(found)}"
  dtype = getattr(value, "dtype", None)
  if dtype is None or not (dtype.kind == "f" or dtype.name == "bfloat16"):
    return (f"{name}: expected floating-point values, found "
            f"{getattr(dtype, 'name', type(value).__name__)}")
  return None


def check_arrays(expected: Dict[str, Shape], arrays: Dict[str, np.ndarray],
                 source: str, ignore_heads: bool = False,
                 config_file: Optional[str] = None) -> List[str]:
  """Checks {TF1 name: array} against {TF1 name: shape}, strictly.

  Every weight must be found exactly once with its shape and a floating
  dtype (`value_problem`), and every source array must be used, be
  optimizer/bookkeeping state, or (with `ignore_heads`) belong to the
  pre-training heads. Returns the sorted names that are ignored; raises
  CheckpointMismatchError at `source` naming every problem (and
  `config_file`, when the shapes expected are that file's).
  """
  problems = []
  missing = [n for n in expected if n not in arrays]
  if missing:
    problems.append(f"missing variable(s): {_listing(missing)}")
  wrong = [value_problem(n, arrays[n], shape) for n, shape in expected.items()
           if n in arrays]
  problems += [p for p in wrong if p]
  ignored, unexpected = [], []
  for name in sorted(arrays):
    if name in expected:
      continue
    if is_ignorable(name) or (ignore_heads and name.startswith(HEAD_PREFIX)):
      ignored.append(name)
    else:
      unexpected.append(name)
  if unexpected:
    problems.append(f"unexpected variable(s): {_listing(unexpected)}")
  if problems:
    against = f" (against {config_file})" if config_file else ""
    raise CheckpointMismatchError(f"{source}{against}: " + "; ".join(problems))
  return ignored


def check_size(config: BertConfig, stored: int, source: str,
               config_file: str) -> None:
  """Before an encoder of `config` is built: a CheckpointMismatchError when
  its weights need more values than the checkpoint holds (`stored`), as a
  config saying `max_position_embeddings=1e12` does; strict loading could
  never fill them, and building would try to allocate them first. For the
  formats whose names are not TF1's (ours, a `bert-export` SavedModel)."""
  needed = sum(math.prod(s) for s in expected_shapes(config).values())
  if needed > stored:
    raise CheckpointMismatchError(
        f"{source}: does not match {config_file}, which describes an encoder "
        f"of {needed:,} weights; the checkpoint holds {stored:,} values")


def assign_from_tf1(arrays: Dict[str, np.ndarray], encoder, masked_lm=None,
                    next_sentence=None, source: str = "checkpoint",
                    ignore_heads: bool = False,
                    discriminator=None) -> List[str]:
  """Assigns {TF1 name: array} to our weights, strictly (`check_arrays`
  against the built model's own shapes). Returns the sorted names that were
  ignored. Raises CheckpointMismatchError naming every problem.
  """
  specs = weight_specs(encoder, masked_lm, next_sentence, discriminator)
  ignored = check_arrays({s.name: s.expected_shape() for s in specs}, arrays,
                         source, ignore_heads)

  # Group column blocks of fused variables, then assign each variable once.
  by_variable: Dict[int, list] = {}
  for s in specs:
    by_variable.setdefault(id(s.variable), []).append(s)
  for group in by_variable.values():
    variable = group[0].variable
    dtype = variable.dtype.as_numpy_dtype
    if group[0].index is None:
      value = arrays[group[0].name].astype(dtype)
      variable.assign(value.T if group[0].transpose else value)
      continue
    full = np.empty(variable.shape, dtype=dtype)
    for s in group:
      full[..., s.index] = arrays[s.name]
    variable.assign(full)
  return ignored


class RenamedArrays(dict):
  """{our name: array} of a checkpoint whose names are being translated,
  where a second variable under one name (a file holding both spellings of
  a weight) is an error naming both."""

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


def num_layer_blocks(arrays) -> int:
  """How many `bert/encoder/layer_i` blocks the names hold (at least 1)."""
  return len({n.split("/")[2] for n in arrays
              if n.startswith("bert/encoder/layer_")}) or 1


def _listing(names, limit=12):
  shown = ", ".join(names[:limit])
  more = len(names) - limit
  return shown + (f" (and {more} more)" if more > 0 else "")
