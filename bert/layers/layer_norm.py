"""`LayerNormalization`: Keras' layer, and one oneDNN kernel for bf16
inference."""

import tensorflow as tf
import tf_keras

from bert import precision as precision_lib


@tf_keras.utils.register_keras_serializable(package="bert")
class LayerNormalization(tf_keras.layers.LayerNormalization):
  """Keras' LayerNormalization over the last axis (the same weights, config
  and float32 result), which in bf16 inference takes bf16 in and gives bf16
  out through one kernel.

  Under `mixed_bfloat16`, Keras computes a LayerNorm in float32: a cast up,
  five element-wise ops (moments, normalise, scale, shift) and the caller's
  cast back down. For a bf16 input of unknown batch and length outside
  training, with TensorFlow's oneDNN kernels on, this layer writes the graph
  that TensorFlow's grappler remapper replaces by its `_MklLayerNorm` kernel:
  FusedBatchNormV3 (training statistics) over the rows reshaped to
  [1, rows, hidden, 1], then gamma and beta in bf16. The kernel reads bf16
  and accumulates the mean and variance in float32, so the result is the
  float32 LayerNorm rounded to bf16 (up to the bf16 rounding of gamma and
  beta). Its epsilon travels in the FusedBatchNormV3 node, so it holds in a
  frozen bf16 serving network too, where TensorFlow's own fusion of Keras'
  graph (which fires once gamma and beta are constants) uses 1e-3 whatever
  the layer's. Float32 keeps Keras' graph, the one other runtimes convert
  (OpenVINO and TFLite take a float32 network; OpenVINO turns a training-mode
  FusedBatchNormV3 into slow element-wise ops). Training, float32 inputs and
  TensorFlow without oneDNN take Keras' path.
  """

  def __init__(self, **kwargs):
    # The inputs arrive in their own dtype: a bf16 input stays bf16 for the
    # fused path (Keras' path casts it to float32 itself).
    kwargs.setdefault("autocast", False)
    super().__init__(**kwargs)

  def build(self, input_shape):
    super().build(input_shape)
    rank = len(input_shape)
    self._fusable = (list(self.axis) == [rank - 1] and self.scale
                     and self.center and precision_lib.onednn_enabled())

  def call(self, inputs, training=None):
    # A fully known shape lets grappler fold the graph's shape arithmetic
    # into constants, after which the remapper no longer recognises the
    # pattern (and the unfused FusedBatchNormV3 is slower than Keras' path);
    # served models and `predict` see unknown batch and length.
    if (inputs.dtype == tf.bfloat16 and not training and self._fusable
        and not isinstance(inputs, tf.RaggedTensor)
        and not inputs.shape.is_fully_defined()):
      return self._one_kernel(inputs)
    return super().call(inputs)

  def _one_kernel(self, x):
    shape = tf.shape(x)                              # [..., hidden]
    hidden = shape[-1]
    rows = tf.size(x) // hidden
    # Each row a "channel" of FusedBatchNormV3: its batch statistics are the
    # row's mean and variance. The op's epsilon is taken as given (the
    # Python wrapper would raise it to 1.001e-5; BERT's is 1e-12).
    y = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(x, tf.stack([1, rows, hidden, 1])),
        scale=tf.ones(tf.reshape(rows, [1]), tf.float32),
        offset=tf.zeros(tf.reshape(rows, [1]), tf.float32),
        mean=tf.constant([], tf.float32), variance=tf.constant([], tf.float32),
        epsilon=self.epsilon, data_format="NCHW", is_training=True)[0]
    y = tf.reshape(y, shape)
    return y * tf.cast(self.gamma, x.dtype) + tf.cast(self.beta, x.dtype)
