"""Tagger serving: `text` -> whitespace-split `words` and a tag per word."""

from typing import Sequence

import tensorflow as tf

from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.serving.stages import ServingModule, cut_to_bucket


class TaggerServing(ServingModule):
  """Text -> words and the tag of each word's first piece; words past the
  sequence length get ""; both [batch, max words], padded with ""."""

  string_inputs = ("text",)

  def __init__(self, model, vocab, lower_case: bool, seq_length: int,
               labels: Sequence[str], buckets: Sequence[int]):
    self.tokenizer, self.packer = tokenizer_and_packer(vocab, lower_case,
                                                       seq_length)
    self.unk = self.tokenizer.get_special_tokens_dict()["unknown_id"]
    self.seq_length = seq_length
    self.labels = tf.constant(list(labels), tf.string)
    super().__init__(model, buckets, name="tagger_serving")

  def _preprocess(self, strings):
    words = tf.strings.split(strings["text"])                        # [b, (w)]
    pieces = self.tokenizer(words.flat_values)                       # [n, (p)]
    # A word without pieces (e.g. only a zero-width character) is [UNK].
    n = tf.shape(pieces.row_lengths())[0]
    pieces = tf.concat([pieces, tf.RaggedTensor.from_tensor(
        tf.fill([n, 1], self.unk))], axis=1)
    keep = tf.maximum(pieces.row_lengths() - 1, 1)
    pieces = tf.ragged.boolean_mask(pieces, tf.ragged.range(pieces.row_lengths())
                                    < keep[:, None])
    per_word_pieces = tf.RaggedTensor.from_row_lengths(pieces, words.row_lengths())
    inputs = cut_to_bucket(self.packer([per_word_pieces]), self.buckets)
    # Row position of each word's first piece: 1 + pieces of the words
    # before it; -1 for a word that did not fit (and for padding).
    lengths = tf.RaggedTensor.from_row_lengths(
        tf.cast(pieces.row_lengths(), tf.int32), words.row_lengths())
    first = 1 + tf.math.cumsum(lengths, axis=1, exclusive=True)
    first = tf.where(first <= self.seq_length - 2, first, -1)
    inputs["word_first_piece"] = first.to_tensor(-1)                 # [b, w]
    return inputs

  def _postprocess(self, strings, features, outputs):
    predicted = tf.argmax(outputs["logits"], -1, output_type=tf.int32)  # [b, s]
    first = features["word_first_piece"]                             # [b, w]
    fits = first >= 0
    tags = tf.gather(self.labels, tf.gather(predicted, tf.maximum(first, 0),
                                            batch_dims=1))
    words = tf.strings.split(strings["text"]).to_tensor("")
    return dict(words=words, tags=tf.where(fits, tags, ""))
