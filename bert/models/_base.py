"""What the models that wrap one encoder and a head share: the functional
graph, the packed-sequence path and serialisation."""

from typing import Callable, Dict, Sequence

import tensorflow as tf
import tf_keras

from bert.networks.encoder_scaffold import PACKED_KEYS, PackedInputsModel

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")

# heads(encoder_outputs, inputs, training) -> the model's output dict.
Heads = Callable[[Dict[str, tf.Tensor], Dict[str, tf.Tensor], object],
                 Dict[str, tf.Tensor]]


def per_example(layer, pooled, training=None):
  """`layer` on pooled vectors [batch, hidden], or on packed rows' per-example
  vectors [batch, k, hidden] (flattened to [batch * k, hidden] and back, so
  the layer sees plain vectors either way)."""
  if pooled.shape.rank != 3:
    return layer(pooled, training=training)
  shape = tf.shape(pooled)
  out = layer(tf.reshape(pooled, [-1, pooled.shape[-1]]), training=training)
  return tf.reshape(out, tf.concat([shape[:2], tf.shape(out)[1:]], 0))


class EncoderModel(tf_keras.Model):
  """A model of one encoder (`self.encoder`) and heads whose keyword
  arguments `_head_config` lists; `get_config` serialises the encoder with
  them, and `from_config` rebuilds the encoder first, so heads tied to its
  weights (the masked-LM head) are tied again."""

  _head_config = ()

  def get_config(self):
    config = dict(encoder=tf_keras.layers.serialize(self.encoder), name=self.name)
    config.update({k: getattr(self, k) for k in self._head_config})
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    encoder = tf_keras.layers.deserialize(config.pop("encoder"),
                                          custom_objects=custom_objects)
    return cls(encoder, **config)


class EncoderHeadModel(EncoderModel, PackedInputsModel):
  """A functional model of an encoder and a task head.

  Subclasses create their head layers, then call
  `super().__init__(encoder, heads, extra_inputs=...)` with a function
  `heads(encoder_outputs, inputs, training)` that maps the encoder's outputs
  (and the model inputs, e.g. `masked_lm_positions`) to the output dict; it
  builds the functional graph and also serves packed batches (inputs with
  `input_positions` / `cls_positions`, see `bert.data.packing`), which run
  the same layers outside the fixed functional signature.

  `pooled_only=True` says the heads read `pooled_output` alone; calls then
  go through the encoder's `pooled` (when it has one), whose last block
  computes the [CLS] rows only. Same values, less work.
  """

  def __init__(self, encoder, heads: Heads, extra_inputs: Sequence[str] = (),
               pooled_only: bool = False, **kwargs):
    inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k)
              for k in ENCODER_KEYS + tuple(extra_inputs)}
    outputs = heads(encoder({k: inputs[k] for k in ENCODER_KEYS}), inputs, None)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.encoder = encoder
    self._heads = heads
    self._extra_inputs = tuple(extra_inputs)
    self._pooled = (getattr(encoder, "pooled", None) if pooled_only else None)

  def call(self, inputs, training=None, mask=None):
    packed = isinstance(inputs, dict) and any(k in inputs for k in PACKED_KEYS)
    if packed:
      missing = [k for k in ("input_word_ids",) + self._extra_inputs
                 if k not in inputs]
      if missing:
        raise ValueError(f"{self.name}: packed inputs lack {missing}")
    if not packed and (self._pooled is None or not isinstance(inputs, dict)
                       or any(k not in inputs for k in ENCODER_KEYS)):
      # The functional graph (which also reports malformed inputs).
      return super().call(inputs, training=training, mask=mask)
    encoder_inputs = {k: tf.cast(v, tf.int32) for k, v in inputs.items()
                      if k in ENCODER_KEYS + PACKED_KEYS}
    encode = self._pooled or self.encoder
    return self._heads(encode(encoder_inputs, training=training), inputs,
                       training)
