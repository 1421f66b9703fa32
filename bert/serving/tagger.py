"""Tagger serving: `text` -> whitespace-split `words` and a tag per word.

Words become rows as `bert.data.ner_data.encode_sentences` makes them for
training and `predict`: each word its pieces ([UNK] for none, at most
seq_length - 2), a sentence longer than a row cut at word boundaries into
several rows; a word's tag is the model's at its first piece.
"""

from typing import Sequence

import tensorflow as tf

from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.serving.stages import ServingModule, cut_to_bucket


def word_rows(lengths: tf.RaggedTensor, budget: int):
  """Each word's row, as `ner_data.encode_sentences` cuts sentences: a new
  row when the next word's pieces would pass `budget`.

  Args:
    lengths: int32 ragged [b, (w)], each word's pieces (1 to `budget`).
    budget: the pieces of a row (seq_length - 2: [CLS] and [SEP] aside).

  Returns:
    (row, position, num_rows): int32 ragged [b, (w)], the row of each word
    (sentences in order, each one row at least, an empty one too) and the
    row position of its first piece; the number of rows.
  """
  n = tf.cast(lengths.row_lengths(), tf.int32)                         # [b]
  dense = lengths.to_tensor(0)                                         # [b, W]
  cum = tf.math.cumsum(dense, axis=1)               # pieces up to each word
  before = cum - dense                              # pieces before it
  width = tf.shape(dense)[1]
  word = tf.range(width)[tf.newaxis, :]

  def cut(start, first):
    # One more row of every sentence not done: from word `start` to the
    # last word whose pieces fit.
    active = start < n
    first |= active[:, tf.newaxis] & tf.equal(word, start[:, tf.newaxis])
    base = tf.gather(before, tf.minimum(start, width - 1), batch_dims=1)
    end = tf.searchsorted(cum, (base + budget)[:, tf.newaxis], side="right")
    return tf.where(active, tf.minimum(end[:, 0], n), start), first

  # A loop over the rows of the longest sentence (most need one).
  _, first = tf.while_loop(lambda start, _: tf.reduce_any(start < n), cut,
                           (tf.zeros_like(n), tf.zeros_like(dense, tf.bool)))
  local = tf.math.cumsum(tf.cast(first, tf.int32), axis=1) - 1         # [b, W]
  rows = tf.maximum(tf.reduce_sum(tf.cast(first, tf.int32), 1), 1)    # [b]
  row = tf.math.cumsum(rows, exclusive=True)[:, tf.newaxis] + local
  row_start = tf.ragged.boolean_mask(before, first).to_tensor(0)       # [b, R]
  position = 1 + before - tf.gather(row_start, tf.maximum(local, 0),
                                    batch_dims=1)
  ragged = lambda t: tf.RaggedTensor.from_tensor(t, lengths.row_lengths())
  return ragged(row), ragged(position), tf.reduce_sum(rows)


class TaggerServing(ServingModule):
  """Text -> words and the tag of each word's first piece, every word
  tagged (long sentences over several rows); both [batch, max words],
  padded with ""."""

  string_inputs = ("text",)

  def __init__(self, model, vocab, lower_case: bool, seq_length: int,
               labels: Sequence[str], buckets: Sequence[int]):
    self.tokenizer, self.packer = tokenizer_and_packer(vocab, lower_case,
                                                       seq_length)
    self.unk = self.tokenizer.get_special_tokens_dict()["unknown_id"]
    self.budget = seq_length - 2
    self.labels = tf.constant(list(labels), tf.string)
    super().__init__(model, buckets, name="tagger_serving")

  def _word_pieces(self, words):
    """int ragged [n, (p)]: each word's pieces, [UNK] for a word without
    any (e.g. only a zero-width character), at most a row's worth; each
    word tokenized as inside a sentence (`word_prefix`)."""
    if self.tokenizer.word_prefix:
      words = tf.strings.join([self.tokenizer.word_prefix, words])
    pieces = self.tokenizer(words)
    pieces = tf.concat([pieces, tf.RaggedTensor.from_tensor(
        tf.fill([pieces.nrows(), 1], self.unk))], axis=1)
    keep = tf.minimum(tf.maximum(pieces.row_lengths() - 1, 1), self.budget)
    return tf.ragged.boolean_mask(
        pieces, tf.ragged.range(pieces.row_lengths()) < keep[:, None])

  def _preprocess(self, strings):
    words = tf.strings.split(strings["text"])                        # [b, (w)]
    pieces = self._word_pieces(words.flat_values)                    # [n, (p)]
    lengths = tf.RaggedTensor.from_row_lengths(
        tf.cast(pieces.row_lengths(), tf.int32), words.row_lengths())
    row, position, num_rows = word_rows(lengths, self.budget)
    rows = tf.RaggedTensor.from_value_rowids(
        pieces, tf.cast(row.flat_values, tf.int64), tf.cast(num_rows, tf.int64))
    inputs = cut_to_bucket(self.packer([rows]), self.buckets)        # [r, L]
    inputs["word_row"] = row.to_tensor(-1)                           # [b, w]
    inputs["word_position"] = position.to_tensor(-1)
    return inputs

  def _postprocess(self, strings, features, outputs):
    predicted = tf.argmax(outputs["logits"], -1, output_type=tf.int32)  # [r, L]
    row, position = features["word_row"], features["word_position"]  # [b, w]
    ids = tf.gather_nd(predicted, tf.stack(
        [tf.maximum(row, 0), tf.maximum(position, 0)], -1))
    tags = tf.where(row >= 0, tf.gather(self.labels, ids), "")
    words = tf.strings.split(strings["text"]).to_tensor("")
    return dict(words=words, tags=tags)
