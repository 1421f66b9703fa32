"""`SpanHead`: start and end logits for extractive question answering."""

import tensorflow as tf
import tf_keras

from bert.layers._util import build_sublayer, initializer


@tf_keras.utils.register_keras_serializable(package="bert")
class SpanHead(tf_keras.layers.Layer):
  """One dense layer to two logits per token (answer start, answer end).

  Input: sequence_output [batch, seq, hidden]. Output: (start_logits,
  end_logits), each float32 [batch, seq]. Which positions may hold an answer
  (context tokens only) is decided by the task's post-processing.
  """

  def __init__(self, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.initializer_range = initializer_range
    self.dense = tf_keras.layers.Dense(
        2, kernel_initializer=initializer(initializer_range), name="span_logits")

  def build(self, input_shape):
    build_sublayer(self.dense, [None, None, int(input_shape[-1])])
    super().build(input_shape)

  def call(self, sequence_output):
    logits = tf.cast(self.dense(sequence_output), tf.float32)  # [b, seq, 2]
    start_logits, end_logits = tf.unstack(logits, num=2, axis=-1)
    return start_logits, end_logits

  def get_config(self):
    config = super().get_config()
    config.update(initializer_range=self.initializer_range)
    return config
