"""`SentencePooling`: one vector per text from the encoder's token vectors."""

from typing import Sequence

import tensorflow as tf
import tf_keras

from bert.validation import ConfigError

# The modes in the order their vectors are concatenated (sentence-
# transformers' `Pooling` order, so a folder with several modes gives the
# same vector layout).
MODES = ("cls", "max", "mean", "mean_sqrt_len", "weighted_mean", "last")


def check_modes(owner: str, modes) -> tuple:
  """`modes` as a tuple in MODES order; a ConfigError naming `owner`."""
  if isinstance(modes, str):
    modes = (modes,)
  modes = tuple(modes or ())
  unknown = [m for m in modes if m not in MODES]
  if not modes or unknown or len(set(modes)) != len(modes):
    raise ConfigError(f"{owner}: pooling={list(modes)!r} must be one or more "
                      f"distinct modes of {list(MODES)}")
  return tuple(m for m in MODES if m in modes)


@tf_keras.utils.register_keras_serializable(package="bert")
class SentencePooling(tf_keras.layers.Layer):
  """Pools `sequence_output` [batch, seq, hidden] over the real tokens of
  `input_mask` [batch, seq] into [batch, hidden * len(modes)], float32.

  Modes (sentence-transformers' `Pooling`): "cls" the first token; "mean"
  over real tokens; "max" over real tokens; "mean_sqrt_len" the sum divided
  by sqrt(tokens); "weighted_mean" weights position i (1-based) by i;
  "last" the last real token. Sums run in float32 whatever the compute
  dtype, so a bf16 encoder's mean loses no precision to the accumulation.
  """

  def __init__(self, modes: Sequence[str] = ("mean",), **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.modes = check_modes("SentencePooling", modes)

  def call(self, sequence_output, input_mask):
    x = tf.cast(sequence_output, tf.float32)                  # [b, s, h]
    # expand_dims, not [..., tf.newaxis]: TFLite (the int8 export) has no
    # kernel for a new-axis strided slice of a dynamic shape.
    mask = tf.expand_dims(tf.cast(input_mask, tf.float32), -1)  # [b, s, 1]
    # A row without tokens divides by this floor, not by zero.
    count = tf.maximum(tf.reduce_sum(mask, 1), 1e-9)          # [b, 1]
    total = tf.reduce_sum(x * mask, 1)                        # [b, h]
    out = []
    for mode in self.modes:
      if mode == "cls":
        out.append(x[:, 0])
      elif mode == "max":
        out.append(tf.reduce_max(x + (1.0 - mask) * -1e9, 1))
      elif mode == "mean":
        out.append(total / count)
      elif mode == "mean_sqrt_len":
        out.append(total / tf.sqrt(count))
      elif mode == "weighted_mean":
        positions = tf.cast(tf.range(1, tf.shape(x)[1] + 1), tf.float32)
        weights = mask * tf.reshape(positions, [1, -1, 1])    # [b, s, 1]
        out.append(tf.reduce_sum(x * weights, 1)
                   / tf.maximum(tf.reduce_sum(weights, 1), 1e-9))
      else:   # last: rows are padded on the right
        last = tf.maximum(tf.cast(tf.reduce_sum(mask[:, :, 0], 1), tf.int32)
                          - 1, 0)
        out.append(tf.gather(x, last, axis=1, batch_dims=1))
    return out[0] if len(out) == 1 else tf.concat(out, -1)

  def get_config(self):
    return dict(super().get_config(), modes=list(self.modes))
