"""`Dropout`: Keras dropout with masks drawn from 16 random bits each.

Keras draws one float32 uniform per element (a Philox counter per four
elements, then an int-to-float conversion) and applies the mask with a
multiply and a select, forward and backward. On a CPU that is a large share
of a small model's training step: the attention-probability dropout alone
touches [batch, heads, seq, seq] elements per layer, more than any
activation (profiles: bench/PERFORMANCE.md).

Here each element takes 16 bits of a uint32 draw (half the Philox work),
the mask is `bits >= round(rate * 2^16)` (a drop probability within 2^-17
of `rate`), scaled by the exact inverse of the keep probability so the
expected output equals the input, and applied with one multiply forward
and one backward. The masks come from the layer's own
`tf.random.Generator`, as in Keras, so seeding, `dropout_generators` and
checkpointed generator state work unchanged.
"""

import numbers

import tensorflow as tf
import tf_keras
from tf_keras.src.utils import control_flow_util

_LEVELS = 1 << 16

# Dropout layers draw from a tf.random.Generator (and unseeded initializers
# from seeds) that `tf_keras.utils.set_random_seed` seeds: a run's masks are
# then a function of its seed, whether it trains with `fit` or `bert-train`,
# and the generators' states can be checkpointed, so a resumed run draws the
# masks the interrupted one would have. This switch is process-wide in
# tf_keras; it is made when the library's layers are first imported (stated
# on the README's first screen). Layers created before keep the legacy ops.
tf_keras.backend.experimental.enable_tf_random_generator()


def keep_threshold(rate: float) -> int:
  """Elements whose 16 random bits are >= this are kept."""
  return int(round(rate * _LEVELS))


@tf_keras.utils.register_keras_serializable(package="bert")
class Dropout(tf_keras.layers.Dropout):
  """`tf_keras.layers.Dropout` with cheaper masks (see the module doc).

  Same arguments and behaviour; with `noise_shape`, a non-numeric rate or
  Keras' legacy/stateless random ops it defers to the Keras layer.
  """

  def build(self, input_shape):
    # Keras makes the generator (a variable) here, on the layer's first
    # call, which for the blocks' dropouts is inside the first tf.function
    # to run the model. A tf.function that creates a variable traces its
    # Python twice (once more without creating it), so every first predict
    # and serving export traced the whole model twice. The generator is
    # made on the first call that drops (or by `dropout_generators`).
    tf_keras.layers.Layer.build(self, input_shape)   # pylint: disable=bad-super-call

  def call(self, inputs, training=None):
    if training is None:
      training = tf_keras.backend.learning_phase()
    known = control_flow_util.constant_value(training)
    if known is not None and not known:       # inference, known when traced
      return tf.identity(inputs)
    rng = self._random_generator
    rng._maybe_init()   # pylint: disable=protected-access
    if (self.noise_shape is not None or not isinstance(self.rate, numbers.Real)
        or rng._rng_type != rng.RNG_STATEFUL):   # pylint: disable=protected-access
      return super().call(inputs, training=training)
    if self.rate == 0:
      return tf.identity(inputs)
    return control_flow_util.smart_cond(
        training, lambda: self._dropped(inputs, rng._generator),   # pylint: disable=protected-access
        lambda: tf.identity(inputs))

  def _dropped(self, x, generator):
    threshold = keep_threshold(self.rate)
    if threshold >= _LEVELS:
      return x * tf.zeros([], x.dtype)
    size = tf.size(x)
    # [ceil(size / 2)] uint32 -> [ceil(size / 2), 2] uint16 -> x's shape.
    bits = generator.uniform_full_int([(size + 1) // 2], dtype=tf.uint32)
    halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:size]
    keep = tf.reshape(halves, tf.shape(x)) >= threshold
    scale = tf.where(keep, tf.constant(_LEVELS / (_LEVELS - threshold), x.dtype),
                     tf.zeros([], x.dtype))
    return x * scale
