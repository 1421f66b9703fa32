"""`MaskedLMHead`: masked-token logits, computed only at the masked positions."""

from typing import Optional

import tensorflow as tf
import tf_keras

from bert.layers._util import build_sublayer, initializer
from bert.layers.layer_norm import LayerNormalization

from bert.layers import activations


def gather_positions(sequence, positions):
  """[batch, seq, width] gathered at int positions [batch, P] -> [batch, P, width]."""
  return tf.gather(sequence, tf.cast(positions, tf.int32), batch_dims=1)


@tf_keras.utils.register_keras_serializable(package="bert")
class MaskedLMHead(tf_keras.layers.Layer):
  """BERT's masked-LM head: dense + activation + LayerNorm + tied output.

  logits = LN(act(gather(x, positions) W + b)) E^T + output_bias

  `E` is the word-embedding table [vocab, width] shared with the encoder
  (pass `embedding_table=encoder.get_embedding_table()`), so the head owns
  only the transform and the output bias. Without a table it creates its own
  output matrix (untied). Gathering first means the [.., vocab] projection,
  by far the largest matmul, runs on ~15% of the tokens instead of all.

  Inputs: sequence_output [batch, seq, hidden], masked_lm_positions int
  [batch, P]. Output: float32 logits [batch, P, vocab].

  `get_config` leaves the table out: whoever ties the head (the pre-training
  model) passes it again when rebuilding.
  """

  def __init__(self,
               vocab_size: int,
               activation: str = "gelu",
               initializer_range: float = 0.02,
               layer_norm_epsilon: float = 1e-12,
               embedding_table: Optional[tf.Variable] = None,
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.activation = activation
    self.initializer_range = initializer_range
    self.layer_norm_epsilon = layer_norm_epsilon
    # Not tracked as this layer's weight: the encoder owns the table, so the
    # head's weights are only its own (transform, LayerNorm, bias).
    self._setattr_tracking = False
    self.embedding_table = embedding_table
    self._setattr_tracking = True
    self._activation = activations.get_activation(activation)
    if embedding_table is not None and int(embedding_table.shape[0]) != vocab_size:
      raise ValueError(f"embedding_table has {embedding_table.shape[0]} rows but "
                       f"vocab_size={vocab_size}")

  def build(self, input_shape):
    hidden = int(input_shape[-1])
    width = (int(self.embedding_table.shape[-1])
             if self.embedding_table is not None else hidden)
    # The transform maps hidden -> embedding width, so factorised embeddings
    # (width < hidden) can still be tied.
    self.dense = tf_keras.layers.Dense(
        width, kernel_initializer=initializer(self.initializer_range),
        name="transform")
    build_sublayer(self.dense, [None, None, hidden])
    self.layer_norm = LayerNormalization(
        epsilon=self.layer_norm_epsilon, dtype="float32",
        name="transform_layer_norm")
    build_sublayer(self.layer_norm, [None, None, width])
    if self.embedding_table is None:
      self.output_weights = self.add_weight(
          "output_weights", shape=[self.vocab_size, width],
          initializer=initializer(self.initializer_range))
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.vocab_size], initializer="zeros")
    super().build(input_shape)

  def call(self, sequence_output, masked_lm_positions):
    x = gather_positions(sequence_output, masked_lm_positions)  # [b, P, hidden]
    x = self._activation(self.dense(x))
    x = tf.cast(self.layer_norm(x), self.compute_dtype)          # [b, P, width]
    table = (self.embedding_table if self.embedding_table is not None
             else self.output_weights)
    # The vocab projection runs in float32 (it is small: masked positions
    # only) so the softmax over 30k ids is not computed from bf16 logits.
    logits = tf.einsum("bpw,vw->bpv", tf.cast(x, tf.float32),
                       tf.cast(table, tf.float32))              # [b, P, vocab]
    return logits + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, activation=self.activation,
                  initializer_range=self.initializer_range,
                  layer_norm_epsilon=self.layer_norm_epsilon)
    return config
