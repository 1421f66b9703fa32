"""`BytePairTokenizer`: raw strings -> byte-level BPE ids (RoBERTa, GPT-2),
in-graph, with the byte offsets of every token.

The reference is Hugging Face's `RobertaTokenizerFast` on the same
`vocab.json` and `merges.txt`:

1. Special tokens (`<s>`, `</s>`, `<mask>`, ...) written in the text are
   matched first and never split; `<mask>` also takes the whitespace on its
   left (it is a word of its own, space included).
2. Each stretch between them is cut into pre-tokens by GPT-2's pattern:
   contractions ('s 't 're 've 'm 'll 'd), letters, digits or other
   symbols, each with at most one space in front, and whitespace runs, a
   run before a word giving its last character to that word (when it is a
   space) or to a token of its own.
3. A pre-token's UTF-8 bytes become printable characters (GPT-2's
   byte-to-unicode table), and the merges apply lowest rank first until
   none applies; the resulting symbols are looked up in the vocabulary.

RE2 (TensorFlow's regex engine) has no lookahead, which GPT-2's whitespace
rule uses; here whitespace is split one character at a time and the runs
are joined again by that rule, so no marker character is inserted into the
text. The merge loop runs once per distinct pre-token of a batch, on all of
them at once (`tf.while_loop`).
"""

import json
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras

from bert.errors import DataError
from bert.io import read_text

# Unicode White_Space, the `\s` of the reference's regex engine.
_WS = (r"\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}"
       r"\x{2029}\x{202F}\x{205F}\x{3000}")
# GPT-2's pre-tokens, with whitespace one character at a time (see `_join_
# whitespace` for the runs). Alternatives are tried in order (RE2 is
# leftmost-first, as the reference).
_PIECE = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+"
          rf"| ?[^{_WS}\p{{L}}\p{{N}}]+|[{_WS}]")
_IS_WS = rf"[{_WS}]"
# TensorFlow Text's regex splits stop at a NUL character: NULs stand in as
# U+FFFE (a noncharacter of the same class in GPT-2's pattern, 3 bytes in
# UTF-8) until the byte mapping, and offsets are mapped back at the end.
_NUL_STANDIN = "\uFFFE"


def bytes_to_unicode() -> Dict[int, str]:
  """GPT-2's map of the 256 byte values to printable characters: printable
  Latin-1 bytes map to themselves, the other 68 (control characters, space,
  ...) to U+0100 onward in byte order."""
  keep = (list(range(ord("!"), ord("~") + 1))
          + list(range(ord("\xa1"), ord("\xac") + 1))
          + list(range(ord("\xae"), ord("\xff") + 1)))
  table, extra = {}, 0
  for b in range(256):
    if b in keep:
      table[b] = chr(b)
    else:
      table[b] = chr(256 + extra)
      extra += 1
  return table


def read_vocab_json(path: str) -> Dict[str, int]:
  """{token: id} of a `vocab.json`; a DataError naming the file otherwise."""
  try:
    vocab = json.loads(read_text(path))
  except ValueError as e:
    raise DataError(f"{path}: not a JSON object of token -> id ({e})") from None
  if not isinstance(vocab, dict) or not vocab:
    raise DataError(f"{path}: expected a JSON object of token -> id")
  bad = [k for k, v in vocab.items()
         if not isinstance(v, int) or isinstance(v, bool) or v < 0]
  if bad:
    raise DataError(f"{path}: token {bad[0]!r} has id {vocab[bad[0]]!r}, not "
                    "a non-negative integer")
  ids = sorted(vocab.values())
  if ids != list(range(len(ids))):
    raise DataError(f"{path}: ids must be 0..{len(ids) - 1}, each once")
  return vocab


def read_merges(path: str) -> List[Tuple[str, str]]:
  """The merges of a `merges.txt`, rank = order: one "left right" pair per
  line after an optional "#version" header."""
  merges = []
  for number, line in enumerate(read_text(path).split("\n"), 1):
    if not line or (number == 1 and line.startswith("#version")):
      continue
    parts = line.split(" ")
    if len(parts) != 2 or not all(parts):
      raise DataError(f"{path}:{number}: expected two symbols separated by "
                      f"one space, found {line[:40]!r}")
    merges.append((parts[0], parts[1]))
  if not merges:
    raise DataError(f"{path}: no merges")
  return merges


@tf_keras.utils.register_keras_serializable(package="bert")
class BytePairTokenizer(tf_keras.layers.Layer):
  """Byte-level BPE: string [batch] -> int32 ragged [batch, (tokens)].

  With `tokenize_with_offsets=True`, also int64 ragged start and end byte
  offsets of every token in the input (end exclusive). With `trim_offsets`
  (the reference's default) a token's span leaves out the space GPT-2 folds
  into it; without, it covers every byte the token stands for.

  Args:
    vocab_file: `vocab.json` (token -> id).
    merges_file: `merges.txt`.
    vocabulary, merges: instead of the files, the tokens in id order and the
      merges by rank ("left right"), as `Vocabulary` and `get_config` hold
      them.
    special_tokens: tokens matched whole in the text, never split.
    lstrip_tokens: the special tokens that take the whitespace on their left
      (RoBERTa's `<mask>`).
    unknown_token: the id of symbols not in the vocabulary (byte-level BPE
      covers every byte, so only a vocabulary without them needs it).
    add_prefix_space: a space before each text (RoBERTa: False).
  """

  def __init__(self, vocab_file: Optional[str] = None,
               merges_file: Optional[str] = None,
               special_tokens: Sequence[str] = ("<s>", "<pad>", "</s>",
                                                "<unk>", "<mask>"),
               lstrip_tokens: Sequence[str] = ("<mask>",),
               unknown_token: str = "<unk>", add_prefix_space: bool = False,
               tokenize_with_offsets: bool = False, trim_offsets: bool = True,
               vocabulary: Optional[Sequence[str]] = None,
               merges: Optional[Sequence[str]] = None,
               source: Optional[str] = None, **kwargs):
    super().__init__(**kwargs)
    if ((vocab_file is None) != (merges_file is None)
        or (vocabulary is None) != (merges is None)
        or (vocab_file is None) == (vocabulary is None)):
      raise ValueError("BytePairTokenizer: give vocab_file and merges_file, "
                       "or vocabulary and merges")
    self.vocab_file, self.merges_file = vocab_file, merges_file
    self.special_tokens = tuple(special_tokens)
    self.lstrip_tokens = tuple(lstrip_tokens)
    self.unknown_token = unknown_token
    self.add_prefix_space = bool(add_prefix_space)
    self.tokenize_with_offsets = tokenize_with_offsets
    self.trim_offsets = bool(trim_offsets)
    if vocab_file is not None:
      vocab = read_vocab_json(vocab_file)
      merges = read_merges(merges_file)
      source = vocab_file
    else:
      vocab = {t: i for i, t in enumerate(vocabulary)}
      merges = [tuple(m.split(" ")) for m in merges]
      source = source or "vocabulary"
    missing = [t for t in self.special_tokens + (unknown_token,)
               if t not in vocab]
    if missing:
      raise DataError(f"{source} has no {missing[0]} token")
    object.__setattr__(self, "_merges", tuple(f"{a} {b}" for a, b in merges))
    object.__setattr__(self, "_vocab", vocab)
    self._unknown_id = vocab[unknown_token]
    tokens = sorted(vocab, key=vocab.get)
    self._ids = _table(tokens, list(range(len(tokens))), -1, tf.int64)
    self._ranks = _table([f"{a} {b}" for a, b in merges],
                         list(range(len(merges))), -1, tf.int64)
    byte_chars = bytes_to_unicode()
    self._byte_chars = tf.constant([byte_chars[b] for b in range(256)])
    self._byte_values = _table([bytes([b]) for b in range(256)],
                               list(range(256)), -1, tf.int64)
    # Special tokens: longest first, so that one that starts another wins.
    ordered = sorted(self.special_tokens, key=len, reverse=True)
    alternatives = []
    for token in ordered:
      escaped = _re2_escape(token)
      alternatives.append(f"[{_WS}]*{escaped}" if token in self.lstrip_tokens
                          else escaped)
    self._special_pattern = "|".join(alternatives)
    self._special_ids = _table(list(ordered), [vocab[t] for t in ordered], -1,
                               tf.int64)

  @property
  def vocab_size(self) -> int:
    return len(self._vocab)

  @property
  def vocab(self) -> List[str]:
    """The tokens in id order."""
    return sorted(self._vocab, key=self._vocab.get)

  lower_case = False
  # A word alone is tokenized as inside a sentence with the space before it
  # (the space is folded into its first token): transformers'
  # `is_split_into_words` with `add_prefix_space`.
  word_prefix = " "

  def token_to_id(self, token: str) -> int:
    return self._vocab[token]

  def get_special_tokens_dict(self) -> Dict[str, int]:
    """Ids of the special tokens, named as BertTokenizer's (RoBERTa's
    `<s>` starts a sequence, `</s>` ends a segment)."""
    ids = dict(padding_id=self._vocab["<pad>"],
               start_of_sequence_id=self._vocab["<s>"],
               end_of_segment_id=self._vocab["</s>"],
               unknown_id=self._unknown_id, vocab_size=len(self._vocab))
    if "<mask>" in self._vocab:
      ids["mask_id"] = self._vocab["<mask>"]
    return ids

  @staticmethod
  def packer_options() -> Dict[str, object]:
    """RoBERTa's template for BertPackInputs: `<s> a </s></s> b </s>`, every
    type id 0."""
    return dict(separators_between_segments=2, segment_type_ids=False)

  def tokenize(self, texts, with_offsets: bool = False):
    """string [batch] -> ids [batch, (tokens)] (+ start, end offsets)."""
    return self._tokenize(texts, with_offsets)

  def call(self, texts):
    return self._tokenize(texts, self.tokenize_with_offsets)

  def _tokenize(self, texts, with_offsets):
    texts = tf.convert_to_tensor(texts, tf.string)
    original = texts
    if self.add_prefix_space:
      texts = tf.strings.join([" ", texts])
    texts = tf.strings.regex_replace(texts, "\x00", _NUL_STANDIN)
    # [batch, (pieces)]: specials and the stretches between them.
    pieces, starts, ends = tf_text.regex_split_with_offsets(
        texts, self._special_pattern, self._special_pattern)
    stripped = tf.strings.regex_replace(pieces.flat_values, f"^[{_WS}]+", "")
    special_ids = self._special_ids.lookup(stripped)
    is_special = tf.logical_and(special_ids >= 0, tf.strings.regex_full_match(
        pieces.flat_values, self._special_pattern))
    # Every stretch (specials too, replaced below) into GPT-2 pre-tokens.
    words, w_starts, w_ends = tf_text.regex_split_with_offsets(
        pieces.flat_values, _PIECE, _PIECE)
    words, w_starts, w_ends = _join_whitespace(words, w_starts, w_ends)
    # [stretch, (symbols)] via the distinct words.
    symbols, lengths = self._bpe_of_words(words.flat_values)
    found = self._ids.lookup(symbols.flat_values)
    word_ids = symbols.with_flat_values(
        tf.where(found < 0, tf.cast(self._unknown_id, tf.int64), found))
    sym_start = (tf.repeat(w_starts.flat_values, symbols.row_lengths())
                 + _exclusive_cumsum(lengths))
    sym_end = sym_start + lengths.flat_values
    ids = tf.RaggedTensor.from_row_splits(word_ids.flat_values,
                                          tf.gather(word_ids.row_splits,
                                                    words.row_splits))
    s_starts = tf.RaggedTensor.from_row_splits(sym_start, ids.row_splits)
    s_ends = tf.RaggedTensor.from_row_splits(sym_end, ids.row_splits)
    # A special stretch is one token: its id, covering the whole piece.
    one = tf.cast(is_special, tf.int64)
    n_tokens = tf.where(is_special, one, ids.row_lengths())
    keep = tf.repeat(tf.logical_not(is_special), ids.row_lengths())
    first = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids.flat_values, keep),
        tf.where(is_special, 0 * one, ids.row_lengths()))
    merged_ids = _interleave(first, special_ids, is_special, n_tokens)
    merged_starts = _interleave(
        tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(s_starts.flat_values, keep),
            tf.where(is_special, 0 * one, ids.row_lengths())),
        tf.zeros_like(special_ids), is_special, n_tokens)
    merged_ends = _interleave(
        tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(s_ends.flat_values, keep),
            tf.where(is_special, 0 * one, ids.row_lengths())),
        ends.flat_values - starts.flat_values, is_special, n_tokens)
    piece_start = tf.repeat(starts.flat_values, n_tokens)
    out_ids = tf.RaggedTensor.from_row_splits(
        tf.cast(merged_ids, tf.int32),
        tf.gather(tf.concat([[0], tf.cumsum(n_tokens)], 0), pieces.row_splits))
    if not with_offsets:
      return out_ids
    shift = 1 if self.add_prefix_space else 0
    begin = out_ids.with_flat_values(piece_start + merged_starts)
    end = out_ids.with_flat_values(piece_start + merged_ends)
    begin, end = (_without_standins(texts, x) for x in (begin, end))
    begin = begin.with_flat_values(tf.maximum(begin.flat_values - shift, 0))
    end = end.with_flat_values(tf.maximum(end.flat_values - shift, 0))
    if self.trim_offsets:
      begin, end = _trimmed(original, begin, end)
    return out_ids, begin, end

  def _bpe_of_words(self, words):
    """(symbols [word, (symbols)] strings, their byte lengths alike) of the
    words (pre-tokens), the merges applied."""
    unique, index = tf.unique(words)
    unique = tf.strings.regex_replace(unique, _NUL_STANDIN, "\x00")
    chars = tf.strings.bytes_split(unique)                  # [u, (bytes)]
    byte_values = self._byte_values.lookup(chars.flat_values)
    mapped = chars.with_flat_values(tf.gather(self._byte_chars, byte_values))
    # Lengths in the text's bytes, where a NUL stands in as 3.
    byte_len = chars.with_flat_values(
        tf.where(byte_values == 0, tf.constant(3, tf.int64), 1))
    merged, merged_len = _merge_loop(mapped, byte_len, self._ranks)
    symbols = tf.gather(merged, index)
    lengths = tf.gather(merged_len, index)
    return symbols, lengths

  def get_config(self):
    config = super().get_config()
    if self.vocab_file is None:
      config.update(vocabulary=self.vocab, merges=list(self._merges))
    config.update(vocab_file=self.vocab_file, merges_file=self.merges_file,
                  special_tokens=list(self.special_tokens),
                  lstrip_tokens=list(self.lstrip_tokens),
                  unknown_token=self.unknown_token,
                  add_prefix_space=self.add_prefix_space,
                  tokenize_with_offsets=self.tokenize_with_offsets,
                  trim_offsets=self.trim_offsets)
    return config


def _trimmed(texts, begin, end):
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


def _table(keys, values, default, dtype):
  return tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(
          tf.constant(keys, tf.string), tf.constant(values, dtype)), default)


def _re2_escape(text: str) -> str:
  return "".join(f"\\x{{{ord(c):x}}}" for c in text)


def _exclusive_cumsum(lengths):
  """Per row of ragged `lengths`: each value's offset from its row's start."""
  total = tf.cumsum(lengths.flat_values, exclusive=True)
  row_start = tf.gather(tf.concat([total, [0]], 0), lengths.row_starts())
  return total - tf.repeat(row_start, lengths.row_lengths())


def _join_whitespace(words, starts, ends):
  """GPT-2's whitespace rule on one-character whitespace pieces: a run of
  them is one pre-token, except that a run before a word that has not taken
  a space gives its last character a pre-token of its own."""
  flat = words.flat_values
  is_ws = tf.strings.regex_full_match(flat, _IS_WS)
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


def _merge_loop(symbols, lengths, ranks):
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


def _without_standins(texts, offsets):
  """Byte offsets into `texts` (NULs standing in as 3 bytes) as offsets into
  the texts with their NULs."""
  found, begins, _ = tf_text.regex_split_with_offsets(
      texts, _NUL_STANDIN, _NUL_STANDIN)
  at = tf.ragged.boolean_mask(begins, tf.equal(found, _NUL_STANDIN))
  positions = at.to_tensor(tf.int64.max)                   # [batch, n]
  values = offsets.to_tensor(0)                            # [batch, tokens]
  before = tf.searchsorted(positions, values, side="left", out_type=tf.int64)
  fixed = values - 2 * before
  return tf.RaggedTensor.from_tensor(fixed, lengths=offsets.row_lengths())


def _interleave(ragged_tokens, special_values, is_special, n_tokens):
  """Flat values, per piece: the piece's tokens, or its one special value."""
  flat = ragged_tokens.flat_values
  # Position of each output value: pieces in order.
  special_positions = tf.gather(tf.cumsum(n_tokens, exclusive=True),
                                tf.where(is_special)[:, 0])
  token_piece = ragged_tokens.value_rowids()
  within = tf.range(tf.shape(flat, out_type=tf.int64)[0]) - tf.gather(
      ragged_tokens.row_starts(), token_piece)
  token_positions = tf.gather(tf.cumsum(n_tokens, exclusive=True),
                              token_piece) + within
  total = tf.reduce_sum(n_tokens)
  out = tf.scatter_nd(token_positions[:, None], tf.cast(flat, tf.int64),
                      [total])
  return tf.tensor_scatter_nd_update(
      out, special_positions[:, None],
      tf.cast(tf.boolean_mask(special_values, is_special), tf.int64))
