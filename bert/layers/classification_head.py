"""`ClassificationHead`: logits for sentence-level classes."""

import tensorflow as tf
import tf_keras

from bert.layers.dropout import Dropout
from bert.layers._util import build_sublayer, initializer

from bert.layers import activations


@tf_keras.utils.register_keras_serializable(package="bert")
class ClassificationHead(tf_keras.layers.Layer):
  """Dropout + dense on a per-example vector (BERT's `pooled_output`).

  With `inner_dim > 0`, a dense + activation + dropout layer comes first (the
  RoBERTa/ELECTRA style head). Regression is `num_classes=1`.

  Input: [batch, hidden] (e.g. `pooled_output`) or [batch, seq, hidden], in
  which case the first ([CLS]) token is used. Output: logits
  [batch, num_classes], always float32 so losses are computed in full precision.
  """

  def __init__(self,
               num_classes: int,
               inner_dim: int = 0,
               activation: str = "tanh",
               dropout_rate: float = 0.1,
               initializer_range: float = 0.02,
               **kwargs):
    super().__init__(**kwargs)
    if num_classes < 1:
      raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    self.num_classes = num_classes
    self.inner_dim = inner_dim
    self.activation = activation
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.dropout = Dropout(dropout_rate)
    self.inner = None
    if inner_dim:
      self.inner = tf_keras.layers.Dense(
          inner_dim, activation=activations.get_activation(activation),
          kernel_initializer=initializer(initializer_range), name="inner")
    self.out = tf_keras.layers.Dense(
        num_classes, kernel_initializer=initializer(initializer_range),
        name="logits")

  def build(self, input_shape):
    width = int(input_shape[-1])
    if self.inner is not None:
      build_sublayer(self.inner, [None, width])
      width = self.inner_dim
    build_sublayer(self.out, [None, width])
    super().build(input_shape)

  def call(self, features, training=None):
    if features.shape.rank == 3:
      features = features[:, 0, :]
    x = self.dropout(features, training=training)
    if self.inner is not None:
      x = self.dropout(self.inner(x), training=training)
    return tf.cast(self.out(x), tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, inner_dim=self.inner_dim,
                  activation=self.activation, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config
