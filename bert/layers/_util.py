"""Small helpers shared by the layers."""

import tensorflow as tf
import tf_keras


def initializer(stddev: float):
  """A fresh truncated-normal initializer.

  One instance per weight: tf_keras returns identical values each time an
  unseeded initializer instance is called, so sharing one would make weights
  equal to each other.
  """
  return tf_keras.initializers.TruncatedNormal(stddev=stddev)


def build_sublayer(layer, input_shape):
  """Builds `layer` under its own name scope so its weights get readable,
  unique names ("attention/qkv/kernel" rather than "kernel")."""
  with tf.name_scope(layer.name):
    layer.build(input_shape)
