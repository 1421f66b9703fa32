"""`EncoderScaffold`: an embedding network, N transformer blocks and a pooler."""

import inspect
from typing import Any, Dict, Optional, Union

import tensorflow as tf
import tf_keras

from bert.layers.self_attention_mask import SelfAttentionMask

_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
# Keys that select the packed-sequence path (see `EncoderScaffold.call`).
PACKED_KEYS = ("input_positions", "attention_mask", "cls_positions")


def _resolve(cls_or_name):
  if isinstance(cls_or_name, str):
    cls = tf_keras.utils.get_registered_object(cls_or_name)
    if cls is None:
      raise ValueError(f"No registered Keras layer called {cls_or_name!r}")
    return cls
  return cls_or_name


def _registered_name(cls):
  return tf_keras.utils.get_registered_name(cls)


class PackedInputsModel(tf_keras.Model):
  """A functional model whose `call` also takes packed batches, which carry
  keys outside the functional inputs: Keras' input-spec check against those
  inputs is off, and `call` does the checking itself."""

  @property
  def input_spec(self):
    return None

  @input_spec.setter
  def input_spec(self, value):
    del value


@tf_keras.utils.register_keras_serializable(package="bert")
class EncoderScaffold(PackedInputsModel):
  """A transformer encoder with pluggable embedding and block classes.

  A tf_keras functional model:
    inputs  {input_word_ids, input_mask, input_type_ids}: int32 [batch, seq]
    outputs {sequence_output [batch, seq, hidden],
             pooled_output [batch, hidden] (dense + tanh on the first token),
             encoder_outputs: list of [batch, seq, hidden], one per block,
             attention_probs: list of [batch, heads, seq, seq] (only with
               return_attention_probs=True)}
  Sequence length is dynamic.

  Packed sequences (several examples per row, see `bert.data.packing`):
  calling the model with a dict that also holds `input_positions`
  [batch, seq] (each example's positions restart at 0) runs the same layers
  with those position ids; `input_mask` then holds each token's 1-based
  example index within its row (0 = padding) and attention is block-diagonal,
  so examples never see each other. A full 0/1 `attention_mask`
  [batch, seq, seq] may be given instead. With `cls_positions` [batch, k]
  (each example's first token), `pooled_output` is per example:
  [batch, k, hidden].

  `pooled(inputs)` returns only `pooled_output`, the same values, computing
  the last block for the pooled tokens alone (see
  `TransformerEncoderBlock`'s `output_positions`); sentence-level models
  (classification, multiple choice) call it.

  Args:
    embedding_cls: layer class (or registered name) called as
      `embedding(input_word_ids, input_type_ids, input_positions, training)`
      and returning [batch, seq, hidden].
    embedding_cfg: keyword arguments of `embedding_cls`.
    block_cls: layer class (or registered name) called as
      `block(x, attention_mask=..., training=..., return_attention_probs=...)`.
    block_cfg: keyword arguments of `block_cls`.
    num_layers: number of blocks.
    initializer_range: stddev of the pooler's initializer.
    return_attention_probs: also output every block's attention probabilities.
  """

  def __init__(self,
               embedding_cls: Union[str, type],
               embedding_cfg: Dict[str, Any],
               block_cls: Union[str, type],
               block_cfg: Dict[str, Any],
               num_layers: int,
               initializer_range: float = 0.02,
               return_attention_probs: bool = False,
               **kwargs):
    embedding_cls = _resolve(embedding_cls)
    block_cls = _resolve(block_cls)
    embedding_layer = embedding_cls(**embedding_cfg, name="embeddings")
    mask_layer = SelfAttentionMask(name="self_attention_mask")
    blocks = [block_cls(**block_cfg, name=f"transformer/layer_{i}")
              for i in range(num_layers)]
    # The pooler is built on first call, when the hidden width is known.
    pooler = _LazyPooler(initializer_range)
    layers = _Layers(embedding_layer, mask_layer, blocks, pooler)

    inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k)
              for k in _INPUT_KEYS}
    outputs = _encode(layers, inputs, None, return_attention_probs)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    self._layers_bundle = layers
    self._scaffold_config = dict(
        embedding_cls=_registered_name(embedding_cls),
        embedding_cfg=dict(embedding_cfg),
        block_cls=_registered_name(block_cls),
        block_cfg=dict(block_cfg),
        num_layers=num_layers,
        initializer_range=initializer_range,
        return_attention_probs=return_attention_probs)

  # ------------------------------------------------------------------ call
  def call(self, inputs, training=None, mask=None):
    if self._check_inputs(inputs):
      return _encode(self._layers_bundle, inputs, training,
                     self._scaffold_config["return_attention_probs"])
    return super().call(inputs, training=training, mask=mask)

  def pooled(self, inputs, training=None):
    """{"pooled_output": [batch, hidden] (or [batch, k, hidden] for packed
    rows)}, as `self(inputs)` gives it, with the last block run for the
    pooled tokens only."""
    self._check_inputs(inputs)
    return _encode(self._layers_bundle, inputs, training, False,
                   pooled_only=True)

  def _check_inputs(self, inputs) -> bool:
    """Raises unless `inputs` is a dict of the encoder's inputs; True for
    packed inputs."""
    if isinstance(inputs, dict) and any(k in inputs for k in PACKED_KEYS):
      return True
    if not isinstance(inputs, dict) or any(k not in inputs for k in _INPUT_KEYS):
      got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
      raise ValueError(f"{self.name} expects a dict with keys "
                       f"{list(_INPUT_KEYS)} (or the packed keys "
                       f"{list(PACKED_KEYS)} in place of input_mask); got {got}")
    return False

  # --------------------------------------------------------------- access
  @property
  def embedding_layer(self):
    return self._layers_bundle.embedding

  @property
  def transformer_layers(self):
    return list(self._layers_bundle.blocks)

  @property
  def pooler_layer(self):
    return self._layers_bundle.pooler.dense

  def get_embedding_table(self):
    """The word-embedding table [vocab, width], to tie output layers to."""
    return self.embedding_layer.word_embeddings

  # -------------------------------------------------------- serialisation
  def get_config(self):
    config = dict(self._scaffold_config)
    config["name"] = self.name
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**config)


class _Layers:
  """The layers one forward pass uses, shared by the functional graph and
  the packed-input path so both run the very same code."""

  def __init__(self, embedding, mask, blocks, pooler):
    self.embedding = embedding
    self.mask = mask
    self.blocks = blocks
    self.pooler = pooler


class _LazyPooler:
  """Dense + tanh on the first token, sized from the first input it sees."""

  def __init__(self, initializer_range):
    self.initializer_range = initializer_range
    self.dense: Optional[tf_keras.layers.Dense] = None

  def __call__(self, first_token):
    if self.dense is None:
      self.dense = tf_keras.layers.Dense(
          first_token.shape[-1], activation="tanh",
          kernel_initializer=tf_keras.initializers.TruncatedNormal(
              stddev=self.initializer_range),
          name="pooler")
    return self.dense(first_token)


def _takes_output_positions(block) -> bool:
  return "output_positions" in inspect.signature(block.call).parameters


def _encode(layers: _Layers, inputs, training, return_attention_probs,
            pooled_only=False):
  """The forward pass: embeddings -> blocks -> pooler. `pooled_only`: just
  {"pooled_output"}, with the last block computing the pooled rows alone
  (when its class supports `output_positions`)."""
  if not isinstance(inputs, dict) or "input_word_ids" not in inputs:
    raise ValueError("encoder inputs must be a dict with at least "
                     "'input_word_ids'; got "
                     f"{sorted(inputs) if isinstance(inputs, dict) else type(inputs)}")
  word_ids = inputs["input_word_ids"]
  mask = layers.mask(input_mask=inputs.get("input_mask"),
                     attention_mask=inputs.get("attention_mask"),
                     packed="input_positions" in inputs)
  x = layers.embedding(word_ids, input_type_ids=inputs.get("input_type_ids"),
                       input_positions=inputs.get("input_positions"),
                       training=training)
  packed_cls = inputs.get("cls_positions")
  blocks = list(layers.blocks)
  if pooled_only and _takes_output_positions(blocks[-1]):
    # [batch, k]: every example's first token (k = 1 unless packed).
    positions = (packed_cls if packed_cls is not None
                 else tf.zeros([tf.shape(word_ids)[0], 1], tf.int32))
    for block in blocks[:-1]:
      x = block(x, attention_mask=mask, training=training)
    first = blocks[-1](x, attention_mask=mask, training=training,
                       output_positions=positions)          # [batch, k, hidden]
    if packed_cls is None:
      first = first[:, 0, :]
    return dict(pooled_output=layers.pooler(first))
  encoder_outputs, attention_probs = [], []
  for block in blocks:
    if return_attention_probs:
      x, probs = block(x, attention_mask=mask, training=training,
                       return_attention_probs=True)
      attention_probs.append(probs)
    else:
      x = block(x, attention_mask=mask, training=training)
    encoder_outputs.append(x)
  if packed_cls is not None:
    # Every packed example's first token: [batch, k, hidden].
    first = tf.gather(x, packed_cls, batch_dims=1)
  else:
    first = x[:, 0, :]                                    # [batch, hidden]
  if pooled_only:
    return dict(pooled_output=layers.pooler(first))
  pooled_output = layers.pooler(first)
  outputs = dict(sequence_output=x, pooled_output=pooled_output,
                 encoder_outputs=encoder_outputs)
  if return_attention_probs:
    outputs["attention_probs"] = attention_probs
  return outputs
