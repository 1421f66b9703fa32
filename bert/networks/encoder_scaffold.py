"""`EncoderScaffold`: an embedding network, N transformer blocks (their
weights shared by groups of layers, or not) and a pooler (or none)."""

from typing import Any, Dict, Optional, Union

import tensorflow as tf
import tf_keras

from bert.io import AtomicSave
from bert.features import ENCODER_INPUTS, PACKED_ENCODER_INPUTS
from bert.layers._util import build_sublayer, initializer
from bert.layers.self_attention_mask import SelfAttentionMask



def _resolve(cls_or_name):
  if isinstance(cls_or_name, str):
    cls = tf_keras.utils.get_registered_object(cls_or_name)
    if cls is None:
      raise ValueError(f"No registered Keras layer called {cls_or_name!r}")
    return cls
  return cls_or_name


def _registered_name(cls):
  return tf_keras.utils.get_registered_name(cls)


def encoder_inputs(inputs: Dict[str, Any], where: str) -> Dict[str, tf.Tensor]:
  """The encoder's entries of a model input dict, as int32 tensors.

  Plain rows need all of `ENCODER_INPUTS`; packed rows (with `input_positions`,
  `attention_mask` or `cls_positions`) need `input_word_ids` and
  `input_mask` or `attention_mask`. Raises a ValueError naming `where` and
  the missing keys otherwise.
  """
  if not isinstance(inputs, dict):
    raise ValueError(f"{where} expects a dict with keys {list(ENCODER_INPUTS)}; "
                     f"got {type(inputs).__name__}")
  packed = any(k in inputs for k in PACKED_ENCODER_INPUTS)
  if packed:
    missing = [k for k in ("input_word_ids",) if k not in inputs]
    if "input_mask" not in inputs and "attention_mask" not in inputs:
      missing.append("input_mask (or attention_mask)")
  else:
    missing = [k for k in ENCODER_INPUTS if k not in inputs]
  if missing:
    raise ValueError(
        f"{where} expects a dict with keys {list(ENCODER_INPUTS)} (packed rows: "
        f"{list(PACKED_ENCODER_INPUTS)} too); missing {missing}, got {sorted(inputs)}")
  # Full attention masks keep their dtype; the ids become int32.
  return {k: (v if k == "attention_mask" else tf.cast(v, tf.int32))
          for k, v in inputs.items() if k in ENCODER_INPUTS + PACKED_ENCODER_INPUTS}


@tf_keras.utils.register_keras_serializable(package="bert")
class EncoderScaffold(AtomicSave, tf_keras.Model):
  """A transformer encoder with pluggable embedding and block classes.

  `call(inputs, training=None, pooled_only=False)`:
    inputs  {input_word_ids, input_mask, input_type_ids}: int32 [batch, seq]
    outputs {sequence_output [batch, seq, hidden],
             pooled_output [batch, hidden] (dense + tanh on the first token;
               without a pooler, the first token's sequence output),
             encoder_outputs: list of [batch, seq, hidden], one per block,
             attention_probs: list of [batch, heads, seq, seq] (only with
               return_attention_probs=True)}
  Sequence length is dynamic.

  Optional inputs, all on the same forward pass:
    input_positions [batch, seq]: packed rows (several examples per row, see
      `bert.data.packing`), each example's positions restarting at 0;
      `input_mask` then holds each token's 1-based example index within its
      row (0 = padding) and attention is block-diagonal, so examples never
      see each other.
    attention_mask [batch, seq, seq]: a full 0/1 mask in place of the one
      made from `input_mask`.
    cls_positions [batch, k]: each packed example's first token; the pooled
      output is then per example, [batch, k, hidden].

  `pooled_only=True` returns only {"pooled_output"}, the same values, with
  the last block computing the pooled tokens alone (its `output_positions`):
  sentence-level models (classification, multiple choice) need no more.
  `return_attention_probs` in the call overrides the constructor's for that
  call (distillation reads a student's and a teacher's attention).

  Args:
    embedding_cls: layer class (or registered name) called as
      `embedding(input_word_ids, input_type_ids, input_positions, training)`
      and returning [batch, seq, hidden].
    embedding_cfg: keyword arguments of `embedding_cls`.
    block_cls: layer class (or registered name) called as
      `block(x, attention_mask=..., training=..., return_attention_probs=...,
      output_positions=...)`; with `output_positions` [batch, k] it returns
      those rows only, [batch, k, hidden].
    block_cfg: keyword arguments of `block_cls`.
    num_layers: number of layers (block applications).
    num_block_groups: None: every layer its own block; G: G blocks, layer
      i applying block `i * G // num_layers` (ALBERT's cross-layer sharing:
      G=1, one block for every layer). `transformer_layers` holds the
      blocks, `layer_blocks` the block of each layer.
    use_pooler: False builds no pooler; `pooled_output` is then the first
      token's sequence output (RoBERTa, DistilBERT, ELECTRA).
    hidden_size: the width of the blocks' outputs; default
      `embedding_cfg["hidden_size"]`.
    initializer_range: stddev of the pooler's initializer.
    return_attention_probs: also output every block's attention probabilities.
  """

  def __init__(self,
               embedding_cls: Union[str, type],
               embedding_cfg: Dict[str, Any],
               block_cls: Union[str, type],
               block_cfg: Dict[str, Any],
               num_layers: int,
               hidden_size: Optional[int] = None,
               initializer_range: float = 0.02,
               return_attention_probs: bool = False,
               num_block_groups: Optional[int] = None,
               use_pooler: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    hidden_size = hidden_size or embedding_cfg.get("hidden_size")
    if not hidden_size:
      raise ValueError("EncoderScaffold: set hidden_size (embedding_cfg has "
                       "no 'hidden_size')")
    embedding_cls = _resolve(embedding_cls)
    block_cls = _resolve(block_cls)
    self.embedding_layer = embedding_cls(**embedding_cfg, name="embeddings")
    self.mask_layer = SelfAttentionMask(name="self_attention_mask")
    if num_block_groups is None:
      self.transformer_layers = [
          block_cls(**block_cfg, name=f"transformer/layer_{i}")
          for i in range(num_layers)]
      layer_blocks = list(range(num_layers))
    else:
      self.transformer_layers = [
          block_cls(**block_cfg, name=f"transformer/group_{g}")
          for g in range(num_block_groups)]
      layer_blocks = [i * num_block_groups // num_layers
                      for i in range(num_layers)]
    # Not tracked (a list of ints): the block each layer applies.
    object.__setattr__(self, "layer_blocks", tuple(layer_blocks))
    self.pooler_layer = None
    if use_pooler:
      self.pooler_layer = tf_keras.layers.Dense(
          hidden_size, activation="tanh",
          kernel_initializer=initializer(initializer_range), name="pooler")
    self.hidden_size = hidden_size
    self.return_attention_probs = return_attention_probs
    # Not tracked by Keras (which would wrap the dicts in its own types):
    # get_config returns plain, JSON-serialisable values.
    object.__setattr__(self, "_scaffold_config", dict(
        embedding_cls=_registered_name(embedding_cls),
        embedding_cfg=dict(embedding_cfg),
        block_cls=_registered_name(block_cls),
        block_cfg=dict(block_cfg),
        num_layers=num_layers,
        hidden_size=hidden_size,
        initializer_range=initializer_range,
        return_attention_probs=return_attention_probs,
        num_block_groups=num_block_groups,
        use_pooler=use_pooler))
    # Every weight exists from construction on (checkpoints load into a
    # fresh encoder), and a SavedModel traces the plain TF Hub inputs.
    build_sublayer(self.embedding_layer, None)
    for block in self.transformer_layers:
      build_sublayer(block, [None, None, hidden_size])
    if self.pooler_layer is not None:
      build_sublayer(self.pooler_layer, [None, hidden_size])
    self.built = True
    self._set_save_spec({k: tf.TensorSpec([None, None], tf.int32, name=k)
                         for k in ENCODER_INPUTS})

  def call(self, inputs, training=None, pooled_only=False,
           return_attention_probs=None):
    if return_attention_probs is None:
      return_attention_probs = self.return_attention_probs
    with_probs = return_attention_probs and not pooled_only
    inputs = encoder_inputs(inputs, self.name)
    word_ids = inputs["input_word_ids"]                      # [batch, seq]
    mask = self.mask_layer(input_mask=inputs.get("input_mask"),
                           attention_mask=inputs.get("attention_mask"),
                           packed="input_positions" in inputs)
    x = self.embedding_layer(word_ids,
                             input_type_ids=inputs.get("input_type_ids"),
                             input_positions=inputs.get("input_positions"),
                             training=training)              # [batch, seq, hidden]
    cls_positions = inputs.get("cls_positions")              # [batch, k] or None
    if cls_positions is None:
      cls_positions = tf.zeros([tf.shape(word_ids)[0], 1], tf.int32)
    encoder_outputs, attention_probs = [], []
    for i, b in enumerate(self.layer_blocks):
      block = self.transformer_layers[b]
      last = i == len(self.layer_blocks) - 1
      x = block(x, attention_mask=mask, training=training,
                return_attention_probs=with_probs,
                # Only the pooled rows of the last block, when only they are used.
                output_positions=cls_positions if last and pooled_only else None)
      if with_probs:
        x, probs = x
        attention_probs.append(probs)
      encoder_outputs.append(x)
    # Every example's first token: [batch, k, hidden].
    first = x if pooled_only else tf.gather(x, cls_positions, batch_dims=1)
    if "cls_positions" not in inputs:
      first = first[:, 0, :]                                  # [batch, hidden]
    pooled_output = (first if self.pooler_layer is None
                     else self.pooler_layer(first))
    if pooled_only:
      return dict(pooled_output=pooled_output)
    outputs = dict(sequence_output=x, pooled_output=pooled_output,
                   encoder_outputs=encoder_outputs)
    if with_probs:
      outputs["attention_probs"] = attention_probs
    return outputs

  def get_embedding_table(self):
    """The word-embedding table [vocab, width], to tie output layers to."""
    return self.embedding_layer.word_embeddings

  def get_config(self):
    config = dict(self._scaffold_config)
    config.update(name=self.name, trainable=self.trainable)
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**config)
