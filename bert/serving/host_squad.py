"""SQuAD windows and answer search in NumPy, for small batches from Python.

`bert.serving.squad_windows` does this in the serving graph, where a request
of one question pays TensorFlow's fixed cost per op, more than the work.
Here the same three steps are NumPy on [w, seq_length] arrays (well under a
millisecond for a few windows), for the host path (`bert.serving.host`), and
they give the graph's results exactly: the same ints and bools, the same
float32 scores bit for bit, the same ties (the lower position at the n-best
cut, then the earlier window, start rank, end rank among equal scores), the
max-context scores and SQuAD 2.0's null rule in float64 with the graph's
operations. `tests/serving/host_squad_test.py` checks every output against
the graph's.

No TensorFlow here, not even through an import: `SquadConfig` is only a type
(its package imports TensorFlow), and the pad logit is stated again (the
test checks it is `squad_windows.LOGIT_PAD_VALUE`).

  windows = window_inputs(q_ids, c_ids, squad, cls, sep)   # [w, seq_length]
  out = model(rows cut to a bucket)                        # [w, L] logits
  spans = best_spans(out["start_logits"], out["end_logits"], windows, q, squad)
  start, end = answer_byte_offsets(spans, c_starts, c_ends)  # byte offsets
"""

from typing import TYPE_CHECKING, Dict, Sequence, Tuple

import numpy as np

if TYPE_CHECKING:
  from bert.data.squad_config import SquadConfig

# The logit of a position past a window's tokens (`squad_eval.PAD_LOGIT`,
# `squad_windows.LOGIT_PAD_VALUE`), as the graph uses it: float32.
LOGIT_PAD_VALUE = -1e4
# What `window_inputs` returns beside the encoder inputs: the windows'
# bookkeeping that `best_spans` reads (here and in the graph).
WINDOW_KEYS = ("window_question", "window_offset", "window_start",
               "window_length", "max_context")
_PAD = np.float32(LOGIT_PAD_VALUE)


def _splits(lengths: np.ndarray) -> np.ndarray:
  """Row starts of rows of `lengths` in their concatenation, int32 [n]."""
  return (np.cumsum(lengths, dtype=np.int32) - lengths).astype(np.int32)


def _flat(rows: Sequence[np.ndarray], default) -> np.ndarray:
  """The rows concatenated as int32, and `default` after them (what an
  index past the end, or into no row, gathers)."""
  return np.concatenate([np.asarray(r).astype(np.int32, copy=False).ravel()
                         for r in rows] + [np.full(1, default, np.int32)])


def window_inputs(question_ids: Sequence[np.ndarray],
                  context_ids: Sequence[np.ndarray], squad: "SquadConfig",
                  start_of_sequence_id: int, end_of_segment_id: int,
                  padding_id: int = 0, separators_between_segments: int = 1,
                  segment_type_ids: bool = True) -> Dict[str, np.ndarray]:
  """Every window of every question: `squad_windows.window_inputs`.

  Args:
    question_ids: one int array of word-piece ids per question, untruncated.
    context_ids: one int array per question, its whole context.
    squad: seq_length, doc_stride, max_query_length.
    start_of_sequence_id, end_of_segment_id, padding_id: [CLS], [SEP], [PAD].
    separators_between_segments, segment_type_ids: the family's template
      (`PackTemplate`; RoBERTa: 2 separators, no type ids).

  Returns:
    int32 `input_word_ids`, `input_mask`, `input_type_ids` [w, seq_length]
    (windows question-major, in order), int32 [w] `window_question`,
    `window_offset`, `window_start`, `window_length`, and bool `max_context`
    [w, seq_length], as the graph's.

  Raises:
    ValueError: a question leaves no room for a context piece (the graph
      fails too: an integer division by zero).
  """
  if len(question_ids) != len(context_ids):
    raise ValueError(f"window_inputs: {len(question_ids)} questions, "
                     f"{len(context_ids)} contexts")
  seq_length, doc_stride = squad.seq_length, squad.doc_stride
  seps = int(separators_between_segments)
  questions = [np.asarray(q)[:squad.max_query_length] for q in question_ids]
  q_len = np.array([len(q) for q in questions], np.int32)              # [q]
  c_len = np.array([len(c) for c in context_ids], np.int32)            # [q]
  room = (seq_length - 2 - seps - q_len).astype(np.int32)              # [q]
  if (room < 1).any():
    raise ValueError(
        f"window_inputs: a question of {int(q_len.max())} pieces leaves no "
        f"room for the context in seq_length={seq_length} with {seps} "
        "separators")
  # Every window but the last is `room` pieces long, so windows start every
  # min(room, doc_stride) pieces until one reaches the end (one, empty, for
  # an empty context).
  step = np.minimum(room, np.int32(doc_stride))
  count = (np.maximum(c_len - room, 0) + step - 1) // step + 1          # [q]
  wq = np.repeat(np.arange(len(count), dtype=np.int32), count)         # [w]
  w = len(wq)
  rank = np.arange(w, dtype=np.int32) - np.repeat(_splits(count), count)
  start = rank * step[wq]                                              # [w]
  length = np.minimum(c_len[wq] - start, room[wq])
  offset = q_len[wq] + np.int32(1 + seps)                              # [w]
  # The window's first piece in the concatenated contexts.
  first = _splits(c_len)[wq] + start

  p = np.arange(seq_length, dtype=np.int32)[np.newaxis, :]             # [1, seq]
  j = p - offset[:, np.newaxis]                                        # [w, seq]
  window_len = length[:, np.newaxis]
  in_question = (p >= 1) & (p < (offset - seps)[:, np.newaxis])
  in_context = (j >= 0) & (j < window_len)
  is_sep = ((j < 0) & (j >= -seps)) | (j == window_len)
  q_flat, c_flat = _flat(questions, 0), _flat(context_ids, padding_id)
  q_index = np.where(in_question, (_splits(q_len)[wq] - 1)[:, np.newaxis] + p,
                     len(q_flat) - 1)
  c_index = np.where(in_context, first[:, np.newaxis] + j, len(c_flat) - 1)
  word_ids = np.where(
      p == 0, np.int32(start_of_sequence_id),
      np.where(is_sep, np.int32(end_of_segment_id),
               np.where(in_question, q_flat[q_index], c_flat[c_index])))
  real = j <= window_len                                               # [w, seq]
  type_ids = (j >= 0) & real if segment_type_ids else np.zeros_like(real)
  return dict(
      input_word_ids=word_ids.astype(np.int32, copy=False),
      input_mask=real.astype(np.int32),
      input_type_ids=type_ids.astype(np.int32),
      window_question=wq,
      window_offset=offset.astype(np.int32, copy=False),
      window_start=start.astype(np.int32, copy=False),
      window_length=length.astype(np.int32, copy=False),
      max_context=_max_context(j, window_len, first, in_context,
                               len(c_flat) - 1))


def _max_context(j, window_len, first, in_context, num_pieces):
  """Whether each row position is a piece in its max-context window: the
  window with the highest min(left, right context) + 0.01 * window length,
  the first on ties; in float64 with the graph's operations."""
  window, pos = np.nonzero(in_context)                     # the context cells
  jj = j[window, pos]
  n = window_len[window, 0]
  score = (np.minimum(jj, n - 1 - jj).astype(np.float64)
           + 0.01 * n.astype(np.float64))                  # [cells]
  piece = first[window] + jj
  best = np.full(num_pieces, -np.inf)
  np.maximum.at(best, piece, score)
  is_best = score == best[piece]
  winner = np.full(num_pieces, len(first), np.int64)
  np.minimum.at(winner, piece[is_best], window[is_best])
  out = np.zeros(in_context.shape, bool)
  out[window, pos] = winner[piece] == window
  return out


def _top_k(x: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
  """`tf.math.top_k(x, k)` of float32 [w, n]: the k largest of each row,
  largest first, the lower position first among equal values."""
  pos = np.argsort(-x, axis=1, kind="stable")[:, :k].astype(np.int32)
  return x[np.arange(len(x))[:, np.newaxis], pos], pos


def best_spans(start_logits: np.ndarray, end_logits: np.ndarray,
               windows: Dict[str, np.ndarray], num_questions: int,
               squad: "SquadConfig") -> Dict[str, np.ndarray]:
  """Each question's best answer span over its windows, and whether it is
  the answer: `squad_windows.best_spans` (`squad`: n_best_size,
  max_answer_length, version_2, null_score_diff_threshold).

  Args:
    start_logits, end_logits: float [w, L], the logits of the rows of
      `windows`, L <= seq_length and holding every window's tokens; padded
      back to seq_length with LOGIT_PAD_VALUE.
    windows: what `window_inputs` returned.
    num_questions: q, the questions the windows came from.

  Returns:
    int32 [q] `piece_start`, `piece_end`, float32 [q] `score`, bool [q]
    `found`, float32 [q] `null_score`, bool [q] `answered`, as the graph's.

  Raises:
    ValueError: the logits are cut shorter than a window's tokens, or longer
      than seq_length (the graph fails too).
  """
  n_best_size, max_answer_length = squad.n_best_size, squad.max_answer_length
  max_context = np.asarray(windows["max_context"]).astype(bool, copy=False)
  w, seq_length = max_context.shape
  offset = np.asarray(windows["window_offset"], np.int32)[:, np.newaxis]
  length = np.asarray(windows["window_length"], np.int32)[:, np.newaxis]
  wq = np.asarray(windows["window_question"], np.int32)                # [w]
  to_row = offset + length + 1                                         # [w, 1]
  padded = []
  for t in (start_logits, end_logits):
    t = np.asarray(t, np.float32)                                      # [w, L]
    if t.ndim != 2 or len(t) != w:
      raise ValueError(f"best_spans: logits of shape {t.shape} for {w} windows")
    if w and to_row.max() > t.shape[1]:
      raise ValueError("best_spans: logits cut shorter than a window's tokens")
    if t.shape[1] > seq_length:
      raise ValueError(f"best_spans: logits of {t.shape[1]} positions, more "
                       f"than seq_length={seq_length}")
    # Past the window's tokens: padding, whatever length the batch ran at.
    real = np.arange(t.shape[1])[np.newaxis, :] < to_row
    row = np.full((w, seq_length), _PAD)                               # [w, seq]
    row[:, :t.shape[1]] = np.where(real, t, _PAD)
    padded.append(row)
  start, end = padded
  # np.argsort(-logits)[:n_best_size] (ties: the lower position first).
  k = min(n_best_size, seq_length)
  start_value, start_pos = _top_k(start, k)                            # [w, k]
  end_value, end_pos = _top_k(end, k)

  def inside(pos):
    return (pos >= offset) & (pos < offset + length)

  start_ok = inside(start_pos) & max_context[np.arange(w)[:, np.newaxis],
                                             start_pos]
  span = end_pos[:, np.newaxis, :] - start_pos[:, :, np.newaxis] + 1  # [w, k, k]
  valid = (start_ok[:, :, np.newaxis] & inside(end_pos)[:, np.newaxis, :]
           & (span >= 1) & (span <= max_answer_length)).reshape(w, k * k)
  score = (start_value[:, :, np.newaxis]
           + end_value[:, np.newaxis, :]).reshape(w, k * k)
  score = np.where(valid, score, np.float32(-np.inf))
  # Candidates in postprocess's order (window, start rank, end rank); the
  # best score wins, the first on ties. The graph's segment reductions give
  # an empty question the float's lowest / highest value.
  f32 = np.finfo(np.float32)
  found = np.zeros(num_questions, bool)                                # [q]
  found[wq[valid.any(1)]] = True
  best = np.full(num_questions, f32.min, np.float32)
  np.maximum.at(best, wq, score.max(1, initial=-np.inf))
  is_best = valid & (score == best[wq][:, np.newaxis])                 # [w, k*k]
  cell = np.where(is_best.any(1), np.arange(w) * (k * k) + is_best.argmax(1),
                  w * k * k)
  first = np.full(num_questions, w * k * k, np.int64)
  np.minimum.at(first, wq, cell)
  s = np.zeros(num_questions, np.int32)
  e = np.zeros(num_questions, np.int32)
  to_piece = np.zeros(num_questions, np.int32)
  if found.any():
    window, rank = first[found] // (k * k), first[found] % (k * k)
    s[found] = start_pos[window, rank // k]
    e[found] = end_pos[window, rank % k]
    to_piece[found] = (np.asarray(windows["window_start"], np.int32)[window]
                       - offset[window, 0])
  best = np.where(found, best, np.float32(0))
  null_score = np.full(num_questions, f32.max, np.float32)
  np.minimum.at(null_score, wq, start[:, 0] + end[:, 0])
  return dict(piece_start=np.where(found, s + to_piece, 0).astype(np.int32),
              piece_end=np.where(found, e + to_piece, 0).astype(np.int32),
              score=best, found=found, null_score=null_score,
              answered=found & ~_null_wins(null_score, best, squad))


def _null_wins(null_score, score, squad: "SquadConfig") -> np.ndarray:
  """SQuAD 2.0: whether "" is the answer (the null score beats the best
  span's by more than the threshold, in float64)."""
  if not squad.version_2:
    return np.zeros(null_score.shape, bool)
  diff = null_score.astype(np.float64) - score.astype(np.float64)
  return diff > np.float64(squad.null_score_diff_threshold)


def answer_byte_offsets(spans: Dict[str, np.ndarray],
                        piece_starts: Sequence[np.ndarray],
                        piece_ends: Sequence[np.ndarray]
                        ) -> Tuple[np.ndarray, np.ndarray]:
  """(start, end) int64 [q]: each answer's UTF-8 byte span in its context
  (end exclusive; 0, 0 when `answered` is False), from each context's piece
  byte offsets: `squad_windows.answer_byte_offsets`."""
  answered = np.asarray(spans["answered"], bool)
  out = []
  for offsets, key in ((piece_starts, "piece_start"), (piece_ends, "piece_end")):
    lengths = np.array([len(o) for o in offsets], np.int64)
    flat = np.concatenate([np.asarray(o, np.int64).ravel() for o in offsets]
                          + [np.zeros(1, np.int64)])
    index = (np.cumsum(lengths) - lengths
             + np.asarray(spans[key]).astype(np.int64))
    out.append(flat[np.where(answered, index, len(flat) - 1)])
  return out[0], out[1]
