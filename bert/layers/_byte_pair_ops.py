"""The in-graph steps of `BytePairTokenizer` (byte-level BPE) that work on
ragged tensors alone: GPT-2's whitespace rule over one-character whitespace
pieces, the merge loop, and the offsets of its tokens (NUL stand-ins mapped
back, spaces trimmed).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert.layers._tokenizer_ops import WHITESPACE

IS_WHITESPACE = rf"[{WHITESPACE}]"
# TensorFlow Text's regex splits stop at a NUL character: NULs stand in as
# U+FFFE (a noncharacter of the same class in GPT-2's pattern, 3 bytes in
# UTF-8) until the byte mapping, and offsets are mapped back at the end.
NUL_STANDIN = "\uFFFE"


def trimmed(texts, begin, end):
  """Offsets without the spaces a token holds at either end (the space GPT-2
  folds into the next word), as the reference's `trim_offsets`: a token of
  spaces alone becomes the empty span at its end."""
  flat_b, flat_e = begin.flat_values, end.flat_values
  text = tf.gather(texts, begin.value_rowids())
  covered = tf.strings.substr(text, flat_b, flat_e - flat_b)
  length = tf.strings.length(covered)
  lead = length - tf.strings.length(tf.strings.regex_replace(covered, "^ +", ""))
  trail = length - tf.strings.length(tf.strings.regex_replace(covered, " +$", ""))
  start = tf.minimum(flat_b + tf.cast(lead, flat_b.dtype), flat_e)
  stop = tf.maximum(flat_e - tf.cast(trail, flat_e.dtype), start)
  return begin.with_flat_values(start), end.with_flat_values(stop)


def exclusive_cumsum(lengths):
  """Per row of ragged `lengths`: each value's offset from its row's start."""
  total = tf.cumsum(lengths.flat_values, exclusive=True)
  row_start = tf.gather(tf.concat([total, [0]], 0), lengths.row_starts())
  return total - tf.repeat(row_start, lengths.row_lengths())


def join_whitespace(words, starts, ends):
  """GPT-2's whitespace rule on one-character whitespace pieces: a run of
  them is one pre-token, except that a run before a word that has not taken
  a space gives its last character a pre-token of its own."""
  flat = words.flat_values
  is_ws = tf.strings.regex_full_match(flat, IS_WHITESPACE)
  row = words.value_rowids()
  prev_ws = tf.concat([[False], is_ws[:-1]], 0)
  prev_same_row = tf.concat([[False], tf.equal(row[1:], row[:-1])], 0)
  next_same_row = tf.concat([tf.equal(row[1:], row[:-1]), [False]], 0)
  next_ws = tf.concat([is_ws[1:], [False]], 0)
  next_word_space = tf.concat(
      [tf.strings.regex_full_match(flat[1:], " .*"), [False]], 0)
  # The last whitespace of a run followed (in its row) by a word that does
  # not begin with a space stands alone.
  last_alone = is_ws & next_same_row & ~next_ws & ~next_word_space
  joins_previous = is_ws & prev_ws & prev_same_row & ~last_alone
  group = tf.cumsum(tf.cast(~joins_previous, tf.int64)) - 1
  num = tf.reduce_max(tf.concat([group, [-1]], 0)) + 1
  text = tf.strings.unsorted_segment_join(flat, group, num)
  g_start = tf.math.unsorted_segment_min(starts.flat_values, group, num)
  g_end = tf.math.unsorted_segment_max(ends.flat_values, group, num)
  g_row = tf.math.unsorted_segment_min(row, group, num)
  nrows = words.nrows()
  return (tf.RaggedTensor.from_value_rowids(text, g_row, nrows),
          tf.RaggedTensor.from_value_rowids(g_start, g_row, nrows),
          tf.RaggedTensor.from_value_rowids(g_end, g_row, nrows))


def merge_loop(symbols, lengths, ranks):
  """BPE on ragged [word, (symbols)]: while a word has an adjacent pair with
  a merge rank, the lowest-ranked pair's first occurrence is merged (a
  merge's parts come from lower ranks, so this equals merging every
  occurrence at once)."""

  def step(sym, ln):
    dense = sym.to_tensor("")                             # [w, L]
    dlen = ln.to_tensor(0)
    left, right = dense[:, :-1], dense[:, 1:]
    valid = tf.logical_and(tf.strings.length(left) > 0,
                           tf.strings.length(right) > 0)
    rank = ranks.lookup(tf.strings.join([left, right], " "))
    rank = tf.where(valid & (rank >= 0), rank, tf.int64.max)
    # A column no pair reaches: argmin has a column even for one-symbol words.
    rank = tf.concat([rank, tf.fill([tf.shape(rank)[0], 1], tf.int64.max)], 1)
    best = tf.reduce_min(rank, axis=1)                    # [w]
    active = best < tf.int64.max
    at = tf.argmin(rank, axis=1, output_type=tf.int64)    # [w]
    width = tf.shape(dense, out_type=tf.int64)[1]
    pos = tf.range(width)[None, :]
    at_b = at[:, None]
    act_b = active[:, None]
    joined = tf.strings.join([dense, tf.concat(
        [dense[:, 1:], tf.fill([tf.shape(dense)[0], 1], "")], 1)])
    joined_len = dlen + tf.concat([dlen[:, 1:], tf.zeros_like(dlen[:, :1])], 1)
    new = tf.where(act_b & tf.equal(pos, at_b), joined, dense)
    new_len = tf.where(act_b & tf.equal(pos, at_b), joined_len, dlen)
    drop = act_b & tf.equal(pos, at_b + 1)
    keep = tf.logical_and(tf.strings.length(new) > 0, ~drop)
    out = tf.ragged.boolean_mask(new, keep)
    out_len = tf.ragged.boolean_mask(new_len, keep)
    return out, out_len, tf.reduce_any(active)

  def cond(sym, ln, more):
    del sym, ln
    return more

  def body(sym, ln, more):
    del more
    return step(sym, ln)

  sym, ln, _ = tf.while_loop(
      cond, body, (symbols, lengths, tf.constant(True)),
      shape_invariants=(tf.TensorShape([None, None]),
                        tf.TensorShape([None, None]), tf.TensorShape([])))
  return sym, ln


def without_standins(texts, offsets):
  """Byte offsets into `texts` (NULs standing in as 3 bytes) as offsets into
  the texts with their NULs."""
  found, begins, _ = tf_text.regex_split_with_offsets(
      texts, NUL_STANDIN, NUL_STANDIN)
  at = tf.ragged.boolean_mask(begins, tf.equal(found, NUL_STANDIN))
  positions = at.to_tensor(tf.int64.max)                   # [batch, n]
  values = offsets.to_tensor(0)                            # [batch, tokens]
  before = tf.searchsorted(positions, values, side="left", out_type=tf.int64)
  fixed = values - 2 * before
  return tf.RaggedTensor.from_tensor(fixed, lengths=offsets.row_lengths())
