"""`FusedSelfAttention`: multi-head self-attention with one QKV projection."""

import math

import tensorflow as tf
import tf_keras

from bert.layers._util import build_sublayer, initializer


def large_negative(dtype):
  """A large negative number representable in `dtype` (added to masked logits)."""
  return -65500.0 if tf.as_dtype(dtype) == tf.float16 else -1e9


@tf_keras.utils.register_keras_serializable(package="bert")
class FusedSelfAttention(tf_keras.layers.Layer):
  """Multi-head scaled dot-product self-attention.

  Query, key and value come from a single [hidden, 3 * hidden] projection (one
  matmul instead of three), whose columns are laid out as [3, heads, head_size]:
  Q for every head, then K, then V. Attention runs in [batch, heads, seq,
  head_size] layout, which maps onto batched matmuls.

  Inputs: x [batch, seq, hidden]; attention_mask 0/1 broadcastable to
  [batch, seq(query), seq(key)] (e.g. [batch, 1, seq]) or None.
  Output: [batch, seq, hidden], and the attention probabilities
  [batch, heads, seq, seq] with `return_attention_probs=True`.
  """

  def __init__(self,
               num_heads: int,
               dropout_rate: float = 0.1,
               initializer_range: float = 0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.num_heads = num_heads
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.attention_dropout = tf_keras.layers.Dropout(dropout_rate)

  def build(self, input_shape):
    hidden = int(input_shape[-1])
    if hidden % self.num_heads:
      raise ValueError(f"hidden size {hidden} is not divisible by "
                       f"num_heads={self.num_heads}")
    self.hidden_size = hidden
    self.head_size = hidden // self.num_heads
    self.qkv = tf_keras.layers.Dense(
        3 * hidden, kernel_initializer=initializer(self.initializer_range),
        name="qkv")
    build_sublayer(self.qkv, [None, None, hidden])
    self.output_dense = tf_keras.layers.Dense(
        hidden, kernel_initializer=initializer(self.initializer_range),
        name="output")
    build_sublayer(self.output_dense, [None, None, hidden])
    super().build(input_shape)

  def call(self, x, attention_mask=None, training=None,
           return_attention_probs=False):
    batch = tf.shape(x)[0]
    seq = tf.shape(x)[1]
    # [batch, seq, 3 * hidden] -> [3, batch, heads, seq, head_size]
    qkv = self.qkv(x)
    qkv = tf.reshape(qkv, [batch, seq, 3, self.num_heads, self.head_size])
    qkv = tf.transpose(qkv, [2, 0, 3, 1, 4])
    query, key, value = qkv[0], qkv[1], qkv[2]
    # Scaling the query ([.., seq, head_size]) is cheaper than scaling the
    # logits ([.., seq, seq]).
    query = query * tf.cast(1.0 / math.sqrt(self.head_size), query.dtype)
    # [batch, heads, seq(query), seq(key)]
    logits = tf.matmul(query, key, transpose_b=True)
    # Softmax in float32: bf16/fp16 logits lose the small differences that
    # decide the attention pattern.
    logits = tf.cast(logits, tf.float32)
    if attention_mask is not None:
      mask = tf.cast(attention_mask, tf.float32)[:, tf.newaxis, :, :]
      logits += (1.0 - mask) * large_negative(tf.float32)
    probs = tf.cast(tf.nn.softmax(logits, axis=-1), self.compute_dtype)
    dropped = self.attention_dropout(probs, training=training)
    # [batch, heads, seq, head_size] -> [batch, seq, hidden]
    context = tf.matmul(dropped, value)
    context = tf.transpose(context, [0, 2, 1, 3])
    context = tf.reshape(context, [batch, seq, self.hidden_size])
    output = self.output_dense(context)
    if return_attention_probs:
      return output, probs
    return output

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config
