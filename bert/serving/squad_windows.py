"""In-graph SQuAD windows and answer search, the same as the Python path.

`window_inputs` cuts each question's context into the windows
`bert.data.squad_examples.encode_examples` makes ([CLS] question [SEP]
window [SEP], a window every `doc_stride` context pieces) and marks, for
every context piece, its max-context window. `best_spans` runs the answer
search of `bert.data.squad_eval.postprocess` over the windows' logits: per
window the top `n_best_size` start and end positions, spans inside the
context that start in their max-context window, the best start + end logit
over all windows of a question; with `version_2`, no answer when the null
score beats it by more than `null_score_diff_threshold`. The settings are
one `bert.data.squad_config.SquadConfig`, the Python path's.

Both are plain TensorFlow ops on whole batches (no Python loop over data, no
NumPy), so a serving SavedModel can answer over the whole context:

  q, c = tokenizer(question), tokenizer(context)         # ragged [q, (pieces)]
  windows = window_inputs(q, c, squad, ...)              # [w, seq_length] rows
  out = model(cut_to_bucket(windows))                    # [w, L] logits
  spans = best_spans(out["start_logits"], out["end_logits"], windows, q_n,
                     squad)
  start, end = answer_byte_offsets(spans, c_start, c_end)  # c: with_offsets

Padding: rows run in batches cut to a length bucket, so the logits past a
window's last token are the model's outputs on [PAD] up to the bucket and
LOGIT_PAD_VALUE beyond. Both `postprocess` and `best_spans` set every
position past the window's tokens to LOGIT_PAD_VALUE before the top-n, so
the answer does not depend on which batch (and bucket) a window ran in.

Ties: `postprocess` ranks positions with `np.argsort(-logits)`, which is not
stable (NumPy's SIMD sorts), so among exactly equal logits at the n-best cut,
or exactly equal span scores, it may pick either. Here the lower position
wins, then the earlier window: `postprocess` with a stable argsort.
"""

from typing import Dict, Tuple

import tensorflow as tf

from bert.data import squad_eval
from bert.data.length_buckets import pad_sequence_axis
from bert.data.squad_config import SquadConfig

# The logit of a position past a window's tokens (`squad_eval.PAD_LOGIT`).
LOGIT_PAD_VALUE = squad_eval.PAD_LOGIT


def _gather_or(values: tf.Tensor, index: tf.Tensor, valid: tf.Tensor,
               default) -> tf.Tensor:
  """values[index] where `valid`, else `default` (values may be empty)."""
  n = tf.size(values, out_type=index.dtype)
  padded = tf.concat([values, tf.fill([1], tf.cast(default, values.dtype))], 0)
  return tf.gather(padded, tf.where(valid, index, n))


def window_inputs(question_ids, context_ids, squad: SquadConfig,
                  start_of_sequence_id, end_of_segment_id,
                  padding_id=0, separators_between_segments: int = 1,
                  segment_type_ids: bool = True) -> Dict[str, tf.Tensor]:
  """Every window of every question, as `encode_examples` makes them.

  Args:
    question_ids: int ragged [q, (pieces)], untruncated.
    context_ids: int ragged [q, (pieces)], each question's whole context.
    squad: seq_length, doc_stride, max_query_length (as `encode_examples`).
    start_of_sequence_id, end_of_segment_id, padding_id: [CLS], [SEP], [PAD].
    separators_between_segments, segment_type_ids: the family's template
      (`PackTemplate`; RoBERTa: 2 separators, no type ids).

  Returns:
    int32 `input_word_ids`, `input_mask`, `input_type_ids` [w, seq_length]
    (windows question-major, in order), int32 [w] `window_question` (its
    question), `window_offset` (row position of its first context piece),
    `window_start` (index of that piece in the context), `window_length`
    (its context pieces), and bool `max_context` [w, seq_length] (a context
    piece whose max-context window this is).
  """
  seq_length, doc_stride = squad.seq_length, squad.doc_stride
  question = tf.cast(question_ids[:, :squad.max_query_length], tf.int32)
  context = tf.cast(context_ids, tf.int32)
  q_len = tf.cast(question.row_lengths(), tf.int32)                    # [q]
  c_len = tf.cast(context.row_lengths(), tf.int32)                     # [q]
  seps = int(separators_between_segments)
  room = seq_length - 2 - seps - q_len                                 # [q] >= 1
  # Every window but the last is `room` pieces long, so windows start every
  # min(room, doc_stride) pieces until one reaches the end (one, empty, for
  # an empty context).
  step = tf.minimum(room, doc_stride)
  count = (tf.maximum(c_len - room, 0) + step - 1) // step + 1         # [q]
  wq = tf.repeat(tf.range(tf.size(count)), count)                      # [w]
  w = tf.size(wq)
  start = tf.ragged.range(count).flat_values * tf.gather(step, wq)     # [w]
  length = tf.minimum(tf.gather(c_len, wq) - start, tf.gather(room, wq))
  offset = tf.gather(q_len, wq) + 1 + seps                             # [w]
  # The window's first piece in context.flat_values.
  first = tf.gather(tf.cast(context.row_splits, tf.int32), wq) + start

  p = tf.range(seq_length)[tf.newaxis, :]                              # [1, seq]
  j = p - offset[:, tf.newaxis]                                        # [w, seq]
  window_len = length[:, tf.newaxis]
  in_question = (p >= 1) & (p < offset[:, tf.newaxis] - seps)
  in_context = (j >= 0) & (j < window_len)
  is_sep = ((j < 0) & (j >= -seps)) | (j == window_len)
  q_first = tf.gather(tf.cast(question.row_splits, tf.int32), wq)
  word_ids = tf.where(
      p == 0, tf.cast(start_of_sequence_id, tf.int32),
      tf.where(is_sep, tf.cast(end_of_segment_id, tf.int32),
               tf.where(in_question,
                        _gather_or(question.flat_values,
                                   q_first[:, tf.newaxis] + p - 1,
                                   in_question, 0),
                        _gather_or(context.flat_values,
                                   first[:, tf.newaxis] + j, in_context,
                                   padding_id))))
  real = j <= window_len                                               # [w, seq]
  return dict(
      input_word_ids=word_ids,
      input_mask=tf.cast(real, tf.int32),
      input_type_ids=tf.cast((j >= 0) & real & segment_type_ids, tf.int32),
      window_question=wq,
      window_offset=offset,
      window_start=start,
      window_length=length,
      max_context=_max_context(j, window_len, first, in_context,
                               tf.size(context.flat_values), w))


def _max_context(j, window_len, first, in_context, num_pieces, w):
  """Whether each row position is a piece in its max-context window.

  `_is_max_context`'s rule: the window with the highest min(left, right
  context) + 0.01 * window length, the first on ties; in float64 with the
  same operations, so equal scores compare equal as in Python.
  """
  score = (tf.cast(tf.minimum(j, window_len - 1 - j), tf.float64)
           + 0.01 * tf.cast(window_len, tf.float64))                   # [w, seq]
  # One segment per context piece; positions outside the context share a
  # spare one.
  piece = tf.where(in_context, first[:, tf.newaxis] + j, num_pieces)
  best = tf.math.unsorted_segment_max(tf.where(in_context, score, -1.0),
                                      piece, num_pieces + 1)
  window = tf.broadcast_to(tf.range(w)[:, tf.newaxis], tf.shape(j))
  is_best = in_context & (score == tf.gather(best, piece))
  winner = tf.math.unsorted_segment_min(tf.where(is_best, window, w), piece,
                                        num_pieces + 1)
  return in_context & (tf.gather(winner, piece) == window)


def best_spans(start_logits, end_logits, windows: Dict[str, tf.Tensor],
               num_questions, squad: SquadConfig) -> Dict[str, tf.Tensor]:
  """Each question's best answer span over its windows, and whether it is
  the answer (`squad`: n_best_size, max_answer_length, version_2,
  null_score_diff_threshold).

  Args:
    start_logits, end_logits: float [w, L], the model's logits of the rows
      of `windows`, L <= seq_length and holding every window's tokens (the
      batch may be cut to a length bucket). Padded back to seq_length with
      LOGIT_PAD_VALUE, as the Python path pads them.
    windows: what `window_inputs` returned.
    num_questions: q, the questions the windows came from.

  Returns:
    int32 [q] `piece_start`, `piece_end` (inclusive, indices into the
    question's context pieces), float32 [q] `score` (start + end logit),
    bool [q] `found` (False: no span qualifies; the three above are 0),
    float32 [q] `null_score` (the least [CLS] start + end logit over the
    question's windows, SQuAD 2.0's null score) and bool [q] `answered`:
    the span is the answer (`postprocess`' prediction), else it is "".
  """
  n_best_size, max_answer_length = squad.n_best_size, squad.max_answer_length
  max_context = tf.cast(windows["max_context"], tf.bool)
  seq_length = max_context.shape[1]
  if seq_length is None:
    raise ValueError("best_spans: windows['max_context'] needs a static "
                     "sequence length")
  offset = windows["window_offset"][:, tf.newaxis]                     # [w, 1]
  length = windows["window_length"][:, tf.newaxis]
  wq = windows["window_question"]
  rows = tf.reduce_max(offset + length + 1)
  check = tf.debugging.assert_less_equal(
      rows, tf.shape(start_logits)[1],
      message="best_spans: logits cut shorter than a window's tokens")
  with tf.control_dependencies([check]):
    start, end = (tf.ensure_shape(pad_sequence_axis(
        tf.cast(t, tf.float32), seq_length, LOGIT_PAD_VALUE), [None, seq_length])
                  for t in (start_logits, end_logits))                # [w, seq]
  # Past the window's tokens: padding, whatever length the batch ran at.
  real = tf.range(seq_length)[tf.newaxis, :] < offset + length + 1    # [w, seq]
  start = tf.where(real, start, LOGIT_PAD_VALUE)
  end = tf.where(real, end, LOGIT_PAD_VALUE)
  # np.argsort(-logits)[:n_best_size] (ties: the lower position first).
  k = min(n_best_size, seq_length)
  start_value, start_pos = tf.math.top_k(start, k)                     # [w, k]
  end_value, end_pos = tf.math.top_k(end, k)

  def inside(pos):
    return (pos >= offset) & (pos < offset + length)

  start_ok = inside(start_pos) & tf.gather(max_context, start_pos, batch_dims=1)
  span = end_pos[:, tf.newaxis, :] - start_pos[:, :, tf.newaxis] + 1  # [w, k, k]
  valid = (start_ok[:, :, tf.newaxis] & inside(end_pos)[:, tf.newaxis, :]
           & (span >= 1) & (span <= max_answer_length))
  score = start_value[:, :, tf.newaxis] + end_value[:, tf.newaxis, :]
  # Candidates in postprocess's order (window, start rank, end rank); the
  # best score wins, the first on ties (its sort is stable).
  valid, score = tf.reshape(valid, [-1]), tf.reshape(score, [-1])
  question = tf.repeat(wq, k * k)                                      # [w*k*k]
  found = tf.math.unsorted_segment_max(tf.cast(valid, tf.int32), question,
                                       num_questions) > 0              # [q]
  score = tf.where(valid, score, float("-inf"))
  best = tf.math.unsorted_segment_max(score, question, num_questions)
  cell = tf.range(tf.size(score))
  is_best = valid & (score == tf.gather(best, question))
  first = tf.math.unsorted_segment_min(
      tf.where(is_best, cell, tf.size(score)), question, num_questions)
  first = tf.where(found, first, 0)           # any cell; masked out below
  window, rank = first // (k * k), first % (k * k)
  s = tf.gather_nd(start_pos, tf.stack([window, rank // k], 1))
  e = tf.gather_nd(end_pos, tf.stack([window, rank % k], 1))
  to_piece = tf.gather(windows["window_start"] - windows["window_offset"], window)
  zero = tf.zeros_like(s)
  best = tf.where(found, best, 0.0)
  null_score = tf.math.unsorted_segment_min(start[:, 0] + end[:, 0], wq,
                                            num_questions)
  return dict(piece_start=tf.where(found, s + to_piece, zero),
              piece_end=tf.where(found, e + to_piece, zero),
              score=best, found=found, null_score=null_score,
              answered=found & ~_null_wins(null_score, best, squad))


def _null_wins(null_score, score, squad: SquadConfig):
  """SQuAD 2.0: whether "" is the answer, `postprocess`' rule (the null
  score beats the best span's by more than the threshold; in float64, as
  Python subtracts the float32 scores)."""
  if not squad.version_2:
    return tf.zeros_like(null_score, tf.bool)
  diff = tf.cast(null_score, tf.float64) - tf.cast(score, tf.float64)
  return diff > squad.null_score_diff_threshold


def answer_byte_offsets(spans: Dict[str, tf.Tensor], piece_starts,
                        piece_ends) -> Tuple[tf.Tensor, tf.Tensor]:
  """(start, end) int64 [q]: each answer's UTF-8 byte span in its context
  (end exclusive; 0, 0 when the answer is "": `answered` is False), from
  the context's ragged piece offsets (`BertTokenizer.tokenize(context,
  with_offsets=True)`). Safe for empty contexts; `tf.strings.substr(context,
  start, end - start, unit="BYTE")` is the answer, as `postprocess` cuts
  it."""
  first = piece_starts.row_splits[:-1]                                 # [q]
  found = spans["answered"]
  start = _gather_or(piece_starts.flat_values,
                     first + tf.cast(spans["piece_start"], first.dtype), found, 0)
  end = _gather_or(piece_ends.flat_values,
                   first + tf.cast(spans["piece_end"], first.dtype), found, 0)
  return tf.cast(start, tf.int64), tf.cast(end, tf.int64)
