"""`BertEmbedding`: word + position + token-type embeddings, LayerNorm, dropout."""

from typing import Optional

import tensorflow as tf
import tf_keras

from bert.layers.dropout import Dropout
from bert.layers.layer_norm import LayerNormalization
from bert.layers._util import build_sublayer, initializer


@tf_keras.utils.register_keras_serializable(package="bert")
class BertEmbedding(tf_keras.layers.Layer):
  """Sums the three BERT embeddings, normalises, drops out and projects.

  Inputs (to `call`):
    input_word_ids: int32 [batch, seq].
    input_type_ids: int32 [batch, seq]; None means all zeros (segment A).
    input_positions: optional int32 [batch, seq] position ids, for sequence
      packing where every packed example restarts at 0; None means 0..seq-1.

  Output: [batch, seq, hidden_size].

  With `embedding_size != hidden_size` (factorised embeddings) the tables are
  `embedding_size` wide and a dense projection maps the normalised sum to
  `hidden_size`, as in Model Garden's BertEncoder.

  `type_vocab_size=0` builds no token-type table (DistilBERT); the type ids
  are then ignored. `position_offset` is the row of the position table the
  first token reads (RoBERTa: 2, the rows before belong to padding), so
  inputs may be `max_position_embeddings - position_offset` long.
  """

  def __init__(self,
               vocab_size: int,
               hidden_size: int,
               max_position_embeddings: int = 512,
               type_vocab_size: int = 2,
               embedding_size: Optional[int] = None,
               dropout_rate: float = 0.1,
               initializer_range: float = 0.02,
               layer_norm_epsilon: float = 1e-12,
               position_offset: int = 0,
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.embedding_size = embedding_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.layer_norm_epsilon = layer_norm_epsilon
    self.position_offset = position_offset
    self.embedding_width = embedding_size or hidden_size

    self.layer_norm = LayerNormalization(
        axis=-1, epsilon=layer_norm_epsilon, dtype="float32", name="layer_norm")
    self.dropout = Dropout(dropout_rate)
    self.projection = None
    if self.embedding_width != hidden_size:
      self.projection = tf_keras.layers.Dense(
          hidden_size, kernel_initializer=initializer(self.initializer_range),
          name="embedding_projection")

  def build(self, input_shape=None):
    width = self.embedding_width
    # Not an AutoCastVariable: `call` reads it whole in float32 (see
    # `_lookup`), and a tied masked-LM head multiplies by it in float32.
    self.word_embeddings = self.add_weight(
        "word_embeddings", shape=[self.vocab_size, width],
        initializer=initializer(self.initializer_range), autocast=False)
    self.position_embeddings = self.add_weight(
        "position_embeddings", shape=[self.max_position_embeddings, width],
        initializer=initializer(self.initializer_range))
    self.type_embeddings = None
    if self.type_vocab_size:
      self.type_embeddings = self.add_weight(
          "type_embeddings", shape=[self.type_vocab_size, width],
          initializer=initializer(self.initializer_range))
    build_sublayer(self.layer_norm, [None, None, width])
    if self.projection is not None:
      build_sublayer(self.projection, [None, None, width])
    super().build(input_shape)

  def call(self, input_word_ids, input_type_ids=None, input_positions=None,
           training=None):
    embeddings = self.embed(input_word_ids, input_type_ids, input_positions)
    embeddings = self.dropout(embeddings, training=training)
    if self.projection is not None:
      embeddings = self.projection(embeddings)   # [batch, seq, hidden]
    return embeddings

  def embed(self, input_word_ids, input_type_ids=None, input_positions=None):
    """The LayerNorm of word + position (+ type) embeddings, [batch, seq,
    width] in the compute dtype: what `call` gives before dropout and the
    projection. ELECTRA's generator reads these tables with a projection of
    its own (`bert.networks.electra_generator.SharedEmbedding`)."""
    # [batch, seq, width]
    embeddings = self._lookup(self.word_embeddings, input_word_ids)
    # A family without token types (DistilBERT) has no type table.
    if self.type_embeddings is not None and input_type_ids is not None:
      embeddings += tf.gather(self.type_embeddings, input_type_ids)
    elif self.type_embeddings is not None:
      embeddings += self.type_embeddings[0]
    offset = self.position_offset
    if input_positions is not None:
      embeddings += tf.gather(self.position_embeddings,
                              input_positions + offset)
    else:
      seq_length = _checked_seq_length(
          input_word_ids, self.max_position_embeddings, offset)
      # [seq, width], broadcast over the batch.
      embeddings += self.position_embeddings[offset:offset + seq_length]
    return tf.cast(self.layer_norm(embeddings), self.compute_dtype)

  def _lookup(self, table, ids):
    """Rows `ids` of `table` in the compute dtype, gathered from a dense
    read of the variable.

    `tf.gather` on the variable itself is a sparse read (ResourceGather),
    which puts the variable into copy-on-read mode for good: every later
    dense read copies the whole table, among them the optimiser's weight
    decay each step and a tied masked-LM head's projection
    (bench/PERFORMANCE.md)."""
    return tf.cast(tf.gather(table.value(), ids), self.compute_dtype)

  def get_config(self):
    config = super().get_config()
    config.update(
        vocab_size=self.vocab_size,
        hidden_size=self.hidden_size,
        max_position_embeddings=self.max_position_embeddings,
        type_vocab_size=self.type_vocab_size,
        embedding_size=self.embedding_size,
        dropout_rate=self.dropout_rate,
        initializer_range=self.initializer_range,
        layer_norm_epsilon=self.layer_norm_epsilon,
        position_offset=self.position_offset)
    return config


def _checked_seq_length(input_word_ids, max_position_embeddings, offset=0):
  """Sequence length of `input_word_ids`, checked against the rows of the
  position table past `offset`."""
  limit = max_position_embeddings - offset
  what = f"max_position_embeddings={max_position_embeddings}" + (
      f" past position_offset={offset} ({limit} positions)" if offset else "")
  static = input_word_ids.shape[1]
  if static is not None:
    if static > limit:
      raise ValueError(f"input_word_ids has sequence length {static}, longer "
                       f"than {what}")
    return static
  seq_length = tf.shape(input_word_ids)[1]
  with tf.control_dependencies([
      tf.debugging.assert_less_equal(
          seq_length, limit,
          message=f"input_word_ids has a sequence length longer than {what}")
  ]):
    return tf.identity(seq_length)
