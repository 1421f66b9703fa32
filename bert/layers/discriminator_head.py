"""`DiscriminatorHead`: ELECTRA's replaced-token detection logit per token."""

import tensorflow as tf
import tf_keras

from bert.layers._util import build_sublayer, initializer

from bert.layers import activations


@tf_keras.utils.register_keras_serializable(package="bert")
class DiscriminatorHead(tf_keras.layers.Layer):
  """ELECTRA's discriminator head: dense(hidden) + activation + dense(1).

  logit = act(x W1 + b1) w2 + b2, for every token: the score that the token
  was replaced by the generator (positive: replaced). The same function as
  transformers' `ElectraDiscriminatorPredictions` and google-research
  ELECTRA's `_get_discriminator_output` (its two dense layers are
  "discriminator_predictions/dense" and ".../dense_1" in TF1 names).

  Input: sequence_output [batch, seq, hidden]. Output: float32 logits
  [batch, seq] (every position; which are real tokens is the loss's concern).

  Args:
    activation: the encoder config's `hidden_act` (ELECTRA uses the
      encoder's activation here too).
    initializer_range: stddev of the dense layers' initial kernels.
  """

  def __init__(self, activation: str = "gelu",
               initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.activation = activation
    self.initializer_range = initializer_range
    self._activation = activations.get_activation(activation)
    # Created in `build`, when the hidden width is known.
    self.dense = None
    self.prediction = tf_keras.layers.Dense(
        1, kernel_initializer=initializer(initializer_range),
        name="dense_prediction")

  def build(self, input_shape):
    hidden = int(input_shape[-1])
    self.dense = tf_keras.layers.Dense(
        hidden, kernel_initializer=initializer(self.initializer_range),
        name="dense")
    build_sublayer(self.dense, [None, None, hidden])
    build_sublayer(self.prediction, [None, None, hidden])
    super().build(input_shape)

  def call(self, sequence_output):
    x = self._activation(self.dense(sequence_output))        # [b, s, hidden]
    logits = self.prediction(x)                              # [b, s, 1]
    # float32 so the sigmoid cross-entropy is never computed from bf16.
    return tf.cast(tf.squeeze(logits, -1), tf.float32)       # [b, s]

  def get_config(self):
    config = super().get_config()
    config.update(activation=self.activation,
                  initializer_range=self.initializer_range)
    return config
