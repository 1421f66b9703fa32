"""`BertPackInputs`: tokenized segments -> fixed-length BERT inputs."""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras


def truncation_lengths(lengths, budget):
  """How many tokens of each segment to keep, as the reference truncates.

  google-research `truncate_seq_pair` removes one token at a time from the
  end of the longer segment (the second one on ties) until the total fits.
  The closed form: cap every segment at the largest T with
  sum(min(length, T)) <= budget, then give the tokens still free to the
  earliest capped segments, one each.

  Args:
    lengths: int [batch, segments].
    budget: int scalar, tokens available for all segments together.
  Returns:
    int [batch, segments].
  """
  lengths = tf.cast(lengths, tf.int64)
  budget = tf.cast(budget, tf.int64)
  k = lengths.shape[-1]
  ascending = tf.sort(lengths, axis=-1)
  prefix = tf.math.cumsum(ascending, axis=-1, exclusive=True)
  cap = tf.zeros_like(lengths[:, 0])
  for j in range(k):
    # If segments j.. are the capped ones: sum = prefix_j + (k - j) * T.
    t_j = tf.math.floordiv(budget - prefix[:, j], k - j)
    floor_j = ascending[:, j - 1] if j else tf.zeros_like(t_j)
    cap = tf.where(t_j >= floor_j,
                   tf.maximum(cap, tf.minimum(t_j, ascending[:, j])), cap)
  capped = tf.minimum(lengths, cap[:, tf.newaxis])
  spare = budget - tf.reduce_sum(capped, axis=-1, keepdims=True)
  over = lengths > cap[:, tf.newaxis]
  rank = tf.math.cumsum(tf.cast(over, tf.int64), axis=-1)
  return capped + tf.cast(over & (rank <= spare), tf.int64)


@tf_keras.utils.register_keras_serializable(package="bert")
class BertPackInputs(tf_keras.layers.Layer):
  """Packs 1..n tokenized segments as `[CLS] a [SEP] b [SEP] ...`.

  Inputs: a list of int ragged segments, each [batch, (tokens)] or
  [batch, (words), (pieces)] (merged). Outputs a dict of int32
  [batch, seq_length] tensors: `input_word_ids`, `input_mask` (1 = real
  token) and `input_type_ids` (segment index). Segments that do not fit are
  truncated from the end, longest first, as the reference does.

  RoBERTa's template, `<s> a </s></s> b </s>` with every type id 0, is
  `separators_between_segments=2, segment_type_ids=False` (with its ids:
  <s> starts, </s> ends, <pad> pads).
  """

  def __init__(self, seq_length: int,
               special_tokens_dict: Optional[Dict[str, int]] = None,
               start_of_sequence_id: Optional[int] = None,
               end_of_segment_id: Optional[int] = None,
               padding_id: Optional[int] = None,
               separators_between_segments: int = 1,
               segment_type_ids: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.separators_between_segments = int(separators_between_segments)
    self.segment_type_ids = bool(segment_type_ids)
    special = dict(special_tokens_dict or {})
    self.seq_length = int(seq_length)
    self.start_of_sequence_id = int(
        start_of_sequence_id if start_of_sequence_id is not None
        else special["start_of_sequence_id"])
    self.end_of_segment_id = int(
        end_of_segment_id if end_of_segment_id is not None
        else special["end_of_segment_id"])
    self.padding_id = int(padding_id if padding_id is not None
                          else special.get("padding_id", 0))

  def call(self, inputs, seq_length=None):
    segments = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    seq_length = self.seq_length if seq_length is None else seq_length
    segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s
                for s in segments]
    # Room for the segments: seq_length minus [CLS], one [SEP] each and the
    # extra separators between segments.
    extra = self.separators_between_segments - 1
    length = tf.cast(seq_length, tf.int64)
    budget = length - (
        len(segments) + 1 + extra * (len(segments) - 1))
    tf.debugging.assert_non_negative(
        budget, message=f"seq_length is too short for {len(segments)} segments")
    lengths = tf.stack([tf.cast(s.row_lengths(), tf.int64) for s in segments],
                       axis=1)                                   # [batch, n]
    keep = truncation_lengths(lengths, budget)                   # [batch, n]
    # The row is written by position, with no ragged ops in between (they
    # make the graph five times larger, and as much slower to trace):
    # segment i's kept tokens start at column `begin`; its [SEP] follows
    # them; the extra separators of a later segment precede it.
    columns = tf.range(length)[tf.newaxis, :]                    # [1, seq]
    segment_of, separator = tf.zeros_like(columns), columns < 0
    begin = tf.ones_like(keep[:, :1])                            # [batch, 1]
    rows, cols, values = [], [], []
    for i, s in enumerate(segments):
      if i:
        first = begin                    # where segment i's separators begin
        begin = begin + extra
        separator |= (columns >= first) & (columns < begin)
        segment_of += tf.cast(columns >= first, segment_of.dtype)
      splits = tf.cast(s.row_splits, tf.int64)                   # [batch + 1]
      index = tf.range(splits[-1])                               # [tokens]
      row = tf.searchsorted(splits[1:], index, side="right",
                            out_type=tf.int64)                   # [tokens]
      position = index - tf.gather(splits, row)
      # A token cut by truncation goes to column seq_length, dropped below.
      rows.append(row)
      cols.append(tf.where(position < tf.gather(keep[:, i], row),
                           position + tf.gather(begin[:, 0], row), length))
      values.append(tf.cast(s.values, tf.int32))
      end = begin + keep[:, i:i + 1]                  # this segment's [SEP]
      separator |= columns == end
      begin = end + 1
    batch = tf.shape(keep, out_type=tf.int64)[0]
    scattered = tf.scatter_nd(
        tf.stack([tf.concat(rows, 0), tf.concat(cols, 0)], axis=1),
        tf.concat(values, 0), tf.stack([batch, length + 1]))[:, :-1]
    real = columns < begin                                       # [batch, seq]
    word_ids = tf.where(
        columns == 0, self.start_of_sequence_id,
        tf.where(separator, self.end_of_segment_id,
                 tf.where(real, scattered, self.padding_id)))
    type_ids = (tf.where(real, tf.cast(segment_of, tf.int32), 0)
                if self.segment_type_ids else tf.zeros_like(word_ids))
    return dict(input_word_ids=word_ids,
                input_mask=tf.cast(real, tf.int32),
                input_type_ids=type_ids)

  def get_config(self):
    config = super().get_config()
    config.update(seq_length=self.seq_length,
                  start_of_sequence_id=self.start_of_sequence_id,
                  end_of_segment_id=self.end_of_segment_id,
                  padding_id=self.padding_id,
                  separators_between_segments=self.separators_between_segments,
                  segment_type_ids=self.segment_type_ids)
    return config


@dataclasses.dataclass(frozen=True)
class PackTemplate:
  """A family's template for code that packs rows itself (NER chunks, SQuAD
  windows): the special ids, the separators between two segments (BERT 1,
  RoBERTa 2) and whether the second segment has type id 1."""
  start_of_sequence_id: int
  end_of_segment_id: int
  padding_id: int
  separators_between_segments: int = 1
  segment_type_ids: bool = True

  @classmethod
  def of(cls, tokenizer) -> "PackTemplate":
    """The template of a tokenizer layer (its special ids and
    `packer_options`)."""
    special = tokenizer.get_special_tokens_dict()
    return cls(special["start_of_sequence_id"], special["end_of_segment_id"],
               special["padding_id"], **tokenizer.packer_options())

  def special_count(self, segments: int) -> int:
    """Special tokens in a row of `segments` segments."""
    return 1 + segments + (self.separators_between_segments - 1) * (
        segments - 1)

  def pack(self, segments: Sequence[Sequence[int]], seq_length: int
           ) -> Tuple[List[int], List[int], List[int]]:
    """(word ids, mask, type ids) of already-truncated segments, padded."""
    ids, types = [self.start_of_sequence_id], [0]
    for i, segment in enumerate(segments):
      extra = self.separators_between_segments - 1 if i else 0
      part = [self.end_of_segment_id] * extra + list(segment) + [
          self.end_of_segment_id]
      ids += part
      types += [i if self.segment_type_ids else 0] * len(part)
    n = len(ids)
    if n > seq_length:
      raise ValueError(f"{n} tokens do not fit seq_length={seq_length}")
    pad = seq_length - n
    return (ids + [self.padding_id] * pad, [1] * n + [0] * pad,
            types + [0] * pad)
