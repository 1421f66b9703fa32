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


def elementwise_region(fn):
  """`fn` compiled by XLA into one loop over its inputs.

  For chains of element-wise ops in training steps (GELU and its gradient:
  `bert.layers.activations`). Run one TensorFlow kernel at a time, each op
  reads and writes its whole tensor; on a CPU such chains are memory-bound,
  and for BERT's feed-forward GELU ([batch * seq, 4 * hidden]) they cost
  more than the matmul before them. XLA fuses the chain into one pass.
  Measured and left out (bench/PERFORMANCE.md): work with row reductions
  (LayerNorm, the attention softmax), where XLA's CPU code is no faster or
  slower than TensorFlow's kernels, and matmuls, where oneDNN is faster.
  Inference keeps plain ops, which oneDNN fuses into the matmul and which
  TFLite and OpenVINO convert.
  """
  return tf.function(fn, jit_compile=True, autograph=False,
                     reduce_retracing=True)
