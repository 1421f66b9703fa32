"""`FusedSelfAttention`: multi-head self-attention with one QKV projection."""

import math

import tensorflow as tf
import tf_keras

from bert import precision as precision_lib
from bert.layers.dropout import Dropout
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

  `query_positions` int [batch, k] restricts the queries to those rows of x
  (keys and values still come from every row): the output is then
  [batch, k, hidden], equal to those rows of the full output, and
  attention_mask must broadcast to [batch, k, seq]. A last layer whose only
  consumer is the [CLS] vector needs nothing else, so it skips the query,
  output and feed-forward work of every other token.
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
    self.attention_dropout = Dropout(dropout_rate)

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

  def _split_heads(self, x, parts, batch, seq):
    """[batch * seq (or batch, seq), parts * hidden] ->
    [parts, batch, heads, seq, head_size]."""
    x = tf.reshape(x, [batch, seq, parts, self.num_heads, self.head_size])
    return tf.transpose(x, [2, 0, 3, 1, 4])

  def _queried_qkv(self, x, query_positions):
    """Query from the rows at `query_positions` only, key and value from
    every row: two matmuls on column slices of the fused kernel."""
    kernel = tf.cast(self.qkv.kernel, self.compute_dtype)
    bias = tf.cast(self.qkv.bias, self.compute_dtype)
    h = self.hidden_size
    # tf.split, not slicing: its gradient is one concat, where a slice's
    # (StridedSliceGrad) zero-fills the whole kernel once per slice.
    q_kernel, kv_kernel = tf.split(kernel, [h, 2 * h], axis=1)
    q_bias, kv_bias = tf.split(bias, [h, 2 * h], axis=0)
    shape = tf.shape(x)
    k = tf.shape(query_positions)[1]
    rows = tf.gather(x, query_positions, batch_dims=1)        # [batch, k, hidden]
    rows = tf.reshape(rows, [-1, h])                           # [batch * k, hidden]
    query = tf.nn.bias_add(tf.matmul(rows, q_kernel), q_bias)  # [batch * k, hidden]
    kv = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, h]), kv_kernel),
                        kv_bias)                               # [batch * seq, 2 hidden]
    key, value = tf.unstack(self._split_heads(kv, 2, shape[0], shape[1]), num=2)
    return tf.squeeze(self._split_heads(query, 1, shape[0], k), 0), key, value

  def call(self, x, attention_mask=None, training=None,
           return_attention_probs=False, query_positions=None):
    context = self.attend(x, attention_mask, training=training,
                          return_attention_probs=return_attention_probs,
                          query_positions=query_positions)
    if return_attention_probs:
      context, probs = context
    queries = (tf.shape(x) if query_positions is None
               else tf.shape(query_positions))
    output = tf.reshape(self.output_dense(context),
                        [queries[0], queries[1], self.hidden_size])
    if return_attention_probs:
      return output, probs
    return output

  def attend(self, x, attention_mask=None, training=None,
             return_attention_probs=False, query_positions=None):
    """Every head's output, concatenated: [batch * seq(query), hidden], the
    input of `output_dense` (and the probabilities with
    `return_attention_probs=True`).

    Without `query_positions` its shape is `tf.shape(tf.reshape(x, [-1,
    hidden]))`: grappler then knows the projection's output has the rows of
    the layer's own input, so an encoder block that adds its residual to
    `output_dense(attend(x))` in 2-D gets the add inside the matmul kernel
    (oneDNN's sum post-op) instead of a separate pass.
    """
    if query_positions is None:
      # [batch, seq, 3 * hidden] -> 3 x [batch, heads, seq, head_size].
      # Unstacked: the gradient is one stack, where indexing's gradients
      # (StridedSliceGrad) would zero-fill and add three full-size tensors
      # (a large share of a bf16 train step: bench/PERFORMANCE.md).
      # The projection runs on [batch * seq, hidden]: a 2-D matmul, which
      # oneDNN fuses with its bias add (a 3-D Dense is reshape, matmul,
      # reshape, bias add, unfused).
      shape = tf.shape(x)
      rows = tf.reshape(x, [-1, self.hidden_size])          # [batch * seq, hidden]
      qkv = self.qkv(rows)
      query, key, value = tf.unstack(
          self._split_heads(qkv, 3, shape[0], shape[1]), num=3)
      rows_shape = tf.shape(rows)
    else:
      query, key, value = self._queried_qkv(x, query_positions)
      rows_shape = [-1, self.hidden_size]
    # Scaling the query ([.., seq, head_size]) is cheaper than scaling the
    # logits ([.., seq, seq]).
    query = query * tf.cast(1.0 / math.sqrt(self.head_size), query.dtype)
    # [batch, heads, seq(query), seq(key)]
    logits = tf.matmul(query, key, transpose_b=True)
    # Softmax in float32 (its gradient too), except in bf16 inference on
    # oneDNN: there the logits are already rounded to bf16 by the matmul,
    # the mask's 0 or -1e9 adds nothing else, oneDNN's bf16 softmax sums in
    # float32, and the probabilities are rounded to bf16 either way; the two
    # casts around a float32 softmax would only add their time.
    softmax_dtype = (tf.bfloat16 if logits.dtype == tf.bfloat16
                     and not training and precision_lib.onednn_enabled()
                     else tf.float32)
    logits = tf.cast(logits, softmax_dtype)
    if attention_mask is not None:
      mask = tf.expand_dims(tf.cast(attention_mask, softmax_dtype), 1)
      logits += (1.0 - mask) * large_negative(softmax_dtype)
    probs = tf.cast(tf.nn.softmax(logits, axis=-1), self.compute_dtype)
    dropped = self.attention_dropout(probs, training=training)
    # [batch, heads, seq(query), head_size] -> [batch * seq(query), hidden]
    context = tf.transpose(tf.matmul(dropped, value), [0, 2, 1, 3])
    context = tf.reshape(context, rows_shape)
    if return_attention_probs:
      return context, probs
    return context

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config
