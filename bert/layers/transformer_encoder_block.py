"""`TransformerEncoderBlock`: one BERT layer (self-attention + feed-forward)."""

import tensorflow as tf
import tf_keras

from bert.layers.dropout import Dropout
from bert.layers._util import build_sublayer, initializer

from bert.layers import activations
from bert.layers.fused_self_attention import FusedSelfAttention
from bert.layers.layer_norm import LayerNormalization


@tf_keras.utils.register_keras_serializable(package="bert")
class TransformerEncoderBlock(tf_keras.layers.Layer):
  """Self-attention and a GELU feed-forward, each with a residual and LayerNorm.

  Post-LN (BERT, `norm_first=False`):
    a = LN(x + Dropout(Attention(x)))
    y = LN(a + Dropout(W2 act(W1 a)))
  Pre-LN (`norm_first=True`):
    a = x + Dropout(Attention(LN(x)))
    y = a + Dropout(W2 act(W1 LN(a)))

  Inputs: x [batch, seq, hidden], attention_mask 0/1 broadcastable to
  [batch, seq, seq] (see `SelfAttentionMask`). Output: [batch, seq, hidden],
  plus attention probabilities [batch, heads, seq, seq] when
  `return_attention_probs=True`. With `output_positions` int [batch, k] only
  those rows are computed (every row still serves as key and value), and the
  output is [batch, k, hidden]: what a last layer needs when only the [CLS]
  vector is used (sentence classification), about a sixth of the work.
  LayerNorms compute in float32 under mixed precision (in bf16 inference, one
  oneDNN kernel that keeps float32 statistics: `LayerNormalization`); the
  residual stream stays in the compute dtype.
  """

  def __init__(self,
               num_attention_heads: int,
               intermediate_size: int,
               intermediate_activation: str = "gelu",
               hidden_dropout_rate: float = 0.1,
               attention_dropout_rate: float = 0.1,
               norm_first: bool = False,
               layer_norm_epsilon: float = 1e-12,
               initializer_range: float = 0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.intermediate_activation = intermediate_activation
    self.hidden_dropout_rate = hidden_dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.norm_first = norm_first
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_range = initializer_range
    self._activation = activations.get_activation(intermediate_activation)
    self._training_activation = activations.get_activation(
        intermediate_activation, training=True)
    self._training_step = False   # set by `call` for the Dense's activation

  def build(self, input_shape):
    hidden = int(input_shape[-1])
    self.attention = FusedSelfAttention(
        self.num_attention_heads, dropout_rate=self.attention_dropout_rate,
        initializer_range=self.initializer_range, name="attention")
    build_sublayer(self.attention, [None, None, hidden])
    self.attention_layer_norm = LayerNormalization(
        epsilon=self.layer_norm_epsilon, dtype="float32",
        name="attention_layer_norm")
    build_sublayer(self.attention_layer_norm, [None, hidden])   # on rows
    # The activation inside the Dense, on 2-D inputs (see `call`): oneDNN
    # fuses matmul, bias add and GELU into one kernel for inference (not
    # with the GELU applied after the layer: grappler then no longer matches
    # the pattern).
    self.intermediate_dense = tf_keras.layers.Dense(
        self.intermediate_size, activation=self._intermediate_activation,
        kernel_initializer=initializer(self.initializer_range),
        name="intermediate")
    build_sublayer(self.intermediate_dense, [None, hidden])
    self.output_dense = tf_keras.layers.Dense(
        hidden, kernel_initializer=initializer(self.initializer_range), name="output")
    build_sublayer(self.output_dense, [None, self.intermediate_size])
    self.output_layer_norm = LayerNormalization(
        epsilon=self.layer_norm_epsilon, dtype="float32",
        name="output_layer_norm")
    build_sublayer(self.output_layer_norm, [None, hidden])
    self.hidden_dropout = Dropout(self.hidden_dropout_rate)
    super().build(input_shape)

  def _intermediate_activation(self, x):
    # Training takes the GELU whose gradient is hand-written (no fusion is
    # possible there: the backward pass needs the activation's input).
    if self._training_step:
      return self._training_activation(x)
    return self._activation(x)

  def _norm(self, layer_norm, x):
    return tf.cast(layer_norm(x), self.compute_dtype)

  def call(self, x, attention_mask=None, training=None,
           return_attention_probs=False, output_positions=None):
    # The residual stream runs as rows, [batch * seq, hidden]: each residual
    # add then takes the output of a projection's bias add directly, with
    # the same (symbolic) shape, and TensorFlow's oneDNN remapper folds the
    # add into that matmul kernel (a sum post-op) for inference.
    hidden = x.shape[-1]
    # --- self-attention sub-layer
    attention_input = x
    if self.norm_first:
      attention_input = tf.reshape(self._norm(
          self.attention_layer_norm, tf.reshape(x, [-1, hidden])), tf.shape(x))
    if output_positions is not None:
      if attention_mask is not None:
        attention_mask = tf.convert_to_tensor(attention_mask)
        if attention_mask.shape[1] != 1:
          # A per-query mask [batch, seq, seq]: keep the rows of the outputs.
          attention_mask = tf.gather(attention_mask, output_positions,
                                     batch_dims=1)
      x = tf.gather(x, output_positions, batch_dims=1)      # [batch, k, hidden]
    shape = tf.shape(x)                                     # [batch, seq or k, hidden]
    rows = tf.reshape(x, [-1, hidden])                      # [batch * seq, hidden]
    context = self.attention.attend(
        attention_input, attention_mask=attention_mask, training=training,
        return_attention_probs=return_attention_probs,
        query_positions=output_positions)
    if return_attention_probs:
      context, probs = context
    attention_output = self.hidden_dropout(
        self.attention.output_dense(context), training=training)
    if self.norm_first:
      rows = rows + attention_output
    else:
      rows = self._norm(self.attention_layer_norm, rows + attention_output)

    # --- feed-forward sub-layer: [batch * seq, intermediate] -> [.., hidden]
    ffn_input = (self._norm(self.output_layer_norm, rows) if self.norm_first
                 else rows)
    self._training_step = training is True
    try:
      inner = self.intermediate_dense(ffn_input)
    finally:
      self._training_step = False
    ffn_output = self.hidden_dropout(self.output_dense(inner), training=training)
    if self.norm_first:
      rows = rows + ffn_output
    else:
      rows = self._norm(self.output_layer_norm, rows + ffn_output)
    output = tf.reshape(rows, shape)                        # [batch, seq, hidden]
    if return_attention_probs:
      return output, probs
    return output

  def get_config(self):
    config = super().get_config()
    config.update(
        num_attention_heads=self.num_attention_heads,
        intermediate_size=self.intermediate_size,
        intermediate_activation=self.intermediate_activation,
        hidden_dropout_rate=self.hidden_dropout_rate,
        attention_dropout_rate=self.attention_dropout_rate,
        norm_first=self.norm_first,
        layer_norm_epsilon=self.layer_norm_epsilon,
        initializer_range=self.initializer_range)
    return config
