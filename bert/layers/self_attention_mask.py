"""`SelfAttentionMask`: which keys each query may attend to."""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="bert")
class SelfAttentionMask(tf_keras.layers.Layer):
  """Turns a padding mask or a full attention mask into a 3-D 0/1 mask.

  `input_mask` int [batch, seq] (1 = real token) becomes [batch, 1, seq]: the
  same key mask for every query, broadcast inside attention, so the padded
  case never materialises a [seq, seq] matrix. A full `attention_mask`
  [batch, seq, seq] (e.g. block-diagonal for packed sequences, where examples
  must not see each other) passes through unchanged. Either way the output is
  in the layer's compute dtype, ready for `FusedSelfAttention`.

  Packed rows (`packed=True`): `input_mask` holds, per token, the 1-based
  index of the example it belongs to within its row (0 = padding); a query
  attends to the keys of its own example only: the block-diagonal
  [batch, seq, seq] mask (m[q] == m[k]) & (m[k] > 0).
  """

  def call(self, input_mask=None, attention_mask=None, packed=False):
    if attention_mask is not None:
      if attention_mask.shape.rank != 3:
        raise ValueError("attention_mask must be [batch, seq, seq], got shape "
                         f"{attention_mask.shape}")
      return tf.cast(attention_mask, self.compute_dtype)
    if input_mask is None:
      return None
    if input_mask.shape.rank != 2:
      raise ValueError(f"input_mask must be [batch, seq], got shape "
                       f"{input_mask.shape}")
    if packed:
      # [batch, seq(query), seq(key)]
      same = tf.equal(tf.expand_dims(input_mask, 2), tf.expand_dims(input_mask, 1))
      keep = same & tf.expand_dims(input_mask > 0, 1)
      return tf.cast(keep, self.compute_dtype)
    # [batch, 1, seq]. expand_dims rather than a new-axis slice: TFLite's
    # STRIDED_SLICE has no new-axis mask, and serving converts this graph.
    return tf.expand_dims(tf.cast(input_mask, self.compute_dtype), 1)
