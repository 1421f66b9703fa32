"""`BertTokenizer`: raw strings -> WordPiece ids (and offsets), in-graph."""

from typing import Dict, List, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras

from bert.layers import _fast_path_data
from bert.layers import _text_normalization as norm
from bert.layers._tokenizer_ops import interleave, special_pattern, table
from bert.errors import DataError
from bert.io import read_text

UNKNOWN_TOKEN = "[UNK]"
MAX_CHARS_PER_WORD = 100
# A word FastWordpiece cannot match: stands in for words longer than
# MAX_CHARS_PER_WORD so they become one [UNK]. Private-use characters are
# removed by normalisation, so no real word can collide with it.
_UNMATCHABLE_WORD = "\ue000"


def _character_class(ranges) -> str:
  return "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}"
                 for a, b in ranges)


def _fast_path_pattern(lower_case: bool) -> str:
  """RE2 pattern of texts made only of codepoints on which FastBertTokenizer
  is proven identical to the reference (see _text_normalization.py)."""
  unsafe = (_fast_path_data.UNSAFE_UNCASED if lower_case
            else _fast_path_data.UNSAFE_CASED)
  return ("[^" + _character_class(tuple(unsafe) + ((norm.TABLE_SIZE, 0x10FFFF),))
          + "]*")


# A run of 26+ characters that are neither ASCII whitespace nor ASCII
# punctuation may hold a word over 100 bytes, where FastBertTokenizer's byte
# limit and the reference's 100-character limit disagree.
_LONG_RUN_PATTERN = "(?s).*[^\\s!-/:-@\\[-`{-~]{26,}.*"


SPECIAL_TOKENS = (UNKNOWN_TOKEN, "[CLS]", "[SEP]", "[PAD]")


def read_vocab(vocab_file: str) -> List[str]:
  """Tokens of a vocab.txt, one per line; id = line number. Checked as
  `check_vocab` checks a list, errors naming the file and line."""
  return check_vocab([line.strip() for line in read_text(vocab_file).splitlines()],
                     vocab_file)


def check_vocab(tokens: Sequence[str], source: str = "vocabulary") -> List[str]:
  """`tokens` as a list, or a DataError naming `source` and the line: a
  blank line (it would give an id to "" and none to the token meant there),
  a repeated token, or a missing special token."""
  seen = {}
  for i, token in enumerate(tokens):
    if not token:
      raise DataError(f"{source}:{i + 1}: blank line; each line of a vocab "
                       "is one token (its id is the line number - 1)")
    if token in seen:
      raise DataError(f"{source}:{i + 1}: token {token!r} repeats line "
                       f"{seen[token] + 1}")
    seen[token] = i
  for token in SPECIAL_TOKENS:
    if token not in seen:
      raise DataError(f"{source} has no {token} token")
  return list(tokens)


def _utf8_length(cps):
  """Bytes of each codepoint in UTF-8."""
  return (1 + tf.cast(cps >= 0x80, tf.int64) + tf.cast(cps >= 0x800, tf.int64)
          + tf.cast(cps >= 0x10000, tf.int64))


@tf_keras.utils.register_keras_serializable(package="bert")
class BertTokenizer(tf_keras.layers.Layer):
  """WordPiece tokenizer with the exact semantics of google-research BERT.

  Input: string [batch]. Output: int32 ragged [batch, (tokens)] wordpiece
  ids; with `tokenize_with_offsets=True`, also int64 ragged start and end
  byte offsets of every wordpiece in the original UTF-8 string (end
  exclusive), so `text[start:end]` is the text the wordpiece covers.

  How: normalisation (cleaning, CJK split, lowercasing with accent stripping
  when `lower_case`, punctuation split) runs as one gather from a
  per-codepoint table (see `_text_normalization.py`) that reproduces the
  reference exactly; words are then split on spaces and matched by
  `tensorflow_text.FastWordpieceTokenizer` (linear-time WordPiece, C++),
  greedy longest-match-first with "##" continuations. Words longer than 100
  characters become [UNK]. Invalid UTF-8 bytes are dropped (decoded to U+FFFD,
  which the reference removes).

  `FastBertTokenizer`'s own normaliser is not used: it case-folds with
  compatibility mappings ("ß" -> "ss", "½" -> "1⁄2") where the reference
  lowercases, which changes ids on ~0.1% of real sentences.
  """

  def __init__(self, vocab_file: Optional[str] = None, lower_case: bool = True,
               tokenize_with_offsets: bool = False, fast_path: bool = True,
               vocabulary: Optional[Sequence[str]] = None,
               special_tokens: Sequence[str] = (), **kwargs):
    super().__init__(**kwargs)
    if (vocab_file is None) == (vocabulary is None):
      raise ValueError("BertTokenizer: give vocab_file or vocabulary (the "
                       "tokens in id order), not both")
    self.vocab_file = vocab_file
    self.lower_case = bool(lower_case)
    self.tokenize_with_offsets = tokenize_with_offsets
    self.fast_path = fast_path
    # Bypasses Keras attribute tracking, which would wrap the 30k-token list
    # and visit every element each time a tokenizer is built.
    object.__setattr__(self, "_vocab", tuple(
        read_vocab(vocab_file) if vocab_file is not None
        else check_vocab(list(vocabulary))))
    # Tokens matched whole where the text has them (fill-mask's [MASK], as
    # transformers matches its special tokens); none by default, as the
    # reference, which reads "[MASK]" in a text as "[", "mask", "]".
    self.special_tokens = tuple(special_tokens)
    missing = [t for t in self.special_tokens if t not in self._vocab]
    if missing:
      raise DataError(f"{vocab_file or 'vocabulary'} has no {missing[0]} token")
    if self.special_tokens:
      self._special_pattern = special_pattern(self.special_tokens, ())
      self._special_ids = table(
          list(self.special_tokens),
          [self._vocab.index(t) for t in self.special_tokens], -1, tf.int64)
    self._table = tf.constant(norm.codepoint_table(self.lower_case))
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=self._vocab, suffix_indicator="##",
        # Length is limited in characters below; 4 bytes per character here.
        max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
        token_out_type=tf.int32, unknown_token=UNKNOWN_TOKEN,
        no_pretokenization=True)
    self._fast = None
    if fast_path:
      self._fast_pattern = _fast_path_pattern(self.lower_case)
      self._fast = tf_text.FastBertTokenizer(
          vocab=self._vocab, suffix_indicator="##", max_bytes_per_word=100,
          token_out_type=tf.int32, unknown_token=UNKNOWN_TOKEN,
          lower_case_nfd_strip_accents=self.lower_case)

  @classmethod
  def from_checkpoint(cls, checkpoint, lower_case=None, **kwargs):
    """The tokenizer of a loaded checkpoint (`bert.checkpoints.load`): its
    vocab.txt, and its casing unless `lower_case` is given."""
    if checkpoint.vocab_file is None:
      raise ValueError("the checkpoint has no vocab.txt; build BertTokenizer "
                       "with an explicit vocab_file")
    if lower_case is None:
      lower_case = checkpoint.lower_case
    if lower_case is None:
      raise ValueError(f"the checkpoint with {checkpoint.vocab_file} does not "
                       "say whether it is cased; pass lower_case=True/False")
    return cls(checkpoint.vocab_file, lower_case=lower_case, **kwargs)

  # ----------------------------------------------------------- vocabulary
  @property
  def vocab(self) -> List[str]:
    return list(self._vocab)

  @property
  def vocab_size(self) -> int:
    return len(self._vocab)

  @property
  def codepoint_table(self):
    """The normalisation table this tokenizer gathers from (NumPy int32
    [0x40000, 3]; `_text_normalization.codepoint_table`)."""
    return self._table.numpy()

  def get_special_tokens_dict(self) -> Dict[str, int]:
    """Ids of the special tokens, named as in TF Hub's preprocessing
    models."""
    ids = dict(
        padding_id=self._vocab.index("[PAD]"),
        start_of_sequence_id=self._vocab.index("[CLS]"),
        end_of_segment_id=self._vocab.index("[SEP]"),
        unknown_id=self._vocab.index(UNKNOWN_TOKEN),
        vocab_size=len(self._vocab))
    if "[MASK]" in self._vocab:
      ids["mask_id"] = self._vocab.index("[MASK]")
    return ids

  # Words alone tokenize as inside a sentence (it splits on spaces).
  word_prefix = ""

  @staticmethod
  def packer_options() -> Dict[str, object]:
    """BERT's template for BertPackInputs (its defaults)."""
    return {}

  # ------------------------------------------------------------- tokenize
  def call(self, inputs):
    return self.tokenize(inputs, with_offsets=self.tokenize_with_offsets)

  def tokenize(self, texts, with_offsets: bool = False):
    """string [batch] -> ids [batch, (tokens)] (+ start, end offsets)."""
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"BertTokenizer expects a 1-D batch of strings, got "
                       f"shape {texts.shape}")
    if self.special_tokens:
      return self._with_special_tokens(texts, with_offsets)
    return self._tokenize_text(texts, with_offsets)

  def _with_special_tokens(self, texts, with_offsets):
    """The stretches between special tokens tokenized, the special tokens
    their ids."""
    pieces, starts, ends = tf_text.regex_split_with_offsets(
        texts, self._special_pattern, self._special_pattern)
    flat = pieces.flat_values
    special_ids = self._special_ids.lookup(flat)
    is_special = special_ids >= 0
    out = self._tokenize_text(tf.where(is_special, "", flat), with_offsets)
    ids = out[0] if with_offsets else out                  # [pieces, (t)]
    ids = ids.with_row_splits_dtype(tf.int64)
    n_tokens = tf.where(is_special, tf.ones_like(ids.row_lengths()),
                        ids.row_lengths())
    splits = tf.gather(tf.concat([[0], tf.cumsum(n_tokens)], 0),
                       pieces.row_splits)
    merged = tf.RaggedTensor.from_row_splits(tf.cast(interleave(
        tf.cast(ids, tf.int64), special_ids, is_special, n_tokens), tf.int32),
        splits)
    if not with_offsets:
      return merged
    base = tf.repeat(starts.flat_values, n_tokens)
    begin = interleave(out[1].with_row_splits_dtype(tf.int64),
                       tf.zeros_like(special_ids), is_special, n_tokens)
    end = interleave(out[2].with_row_splits_dtype(tf.int64),
                     ends.flat_values - starts.flat_values, is_special,
                     n_tokens)
    return (merged, merged.with_flat_values(base + begin),
            merged.with_flat_values(base + end))

  def _tokenize_text(self, texts, with_offsets):
    if self._fast is None:
      return self._tokenize_exact(texts, with_offsets)
    # Texts made only of characters on which FastBertTokenizer is proven
    # identical (nearly all real text) take its faster C++ path; the rest
    # take the exact path. Results are put back in input order.
    fast = tf.logical_and(
        tf.strings.regex_full_match(texts, self._fast_pattern),
        tf.logical_not(tf.strings.regex_full_match(texts, _LONG_RUN_PATTERN)))
    index = tf.range(tf.shape(texts, out_type=tf.int64)[0])
    fast_index = tf.boolean_mask(index, fast)
    exact_index = tf.boolean_mask(index, tf.logical_not(fast))
    fast_texts = tf.gather(texts, fast_index)
    exact_out = self._tokenize_exact(tf.gather(texts, exact_index), with_offsets)
    if with_offsets:
      fast_out = self._fast.tokenize_with_offsets(fast_texts)
    else:
      fast_out = (self._fast.tokenize(fast_texts),)
      exact_out = (exact_out,)
    order = tf.math.invert_permutation(tf.concat([fast_index, exact_index], 0))
    merged = tuple(tf.gather(tf.concat([f, e], axis=0), order)
                   for f, e in zip(fast_out, exact_out))
    return merged if with_offsets else merged[0]

  def _tokenize_exact(self, texts, with_offsets):
    """The table-driven path; exact on any input."""
    # [batch, (chars)] codepoints and their byte offsets in the input.
    cps, cp_starts = tf.strings.unicode_decode_with_offsets(
        texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
    flat = cps.flat_values
    in_table = flat < norm.TABLE_SIZE
    # [chars, 3] output codepoints, -1 = none.
    out = tf.gather(self._table, tf.where(in_table, flat, 0))
    out = tf.where(in_table[:, tf.newaxis], out, -1)
    keep = out >= 0
    counts = tf.reduce_sum(tf.cast(keep, tf.int64), axis=1)
    norm_flat = tf.boolean_mask(out, keep)
    row_lengths = tf.math.unsorted_segment_sum(
        counts, cps.value_rowids(), cps.nrows())
    norm_cps = tf.RaggedTensor.from_row_lengths(norm_flat, row_lengths)
    normalized = tf.strings.unicode_encode(norm_cps, "UTF-8")

    # Words: maximal runs of non-spaces (punctuation is already spaced out).
    words, word_starts, word_ends = tf_text.regex_split_with_offsets(
        normalized, " +")
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") \
        > MAX_CHARS_PER_WORD
    words = words.with_flat_values(
        tf.where(too_long, _UNMATCHABLE_WORD, words.flat_values))
    if not with_offsets:
      return self._wordpiece.tokenize(words).merge_dims(1, 2)
    ids, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(words)

    # Offsets in the normalised string, then back to the input string.
    word_of_piece = ids.values.value_rowids()              # [pieces]
    row_of_word = ids.value_rowids()                        # [words]
    starts = tf.gather(word_starts.flat_values, word_of_piece) \
        + piece_starts.flat_values
    ends = tf.where(tf.gather(too_long, word_of_piece),
                    tf.gather(word_ends.flat_values, word_of_piece),
                    tf.gather(word_starts.flat_values, word_of_piece)
                    + piece_ends.flat_values)
    # Byte offset of every normalised codepoint, over the whole batch.
    norm_bytes = _utf8_length(norm_flat)
    norm_offsets = tf.math.cumsum(norm_bytes, exclusive=True)
    row_bytes = tf.math.unsorted_segment_sum(
        norm_bytes, norm_cps.value_rowids(), norm_cps.nrows())
    row_base = tf.gather(tf.math.cumsum(row_bytes, exclusive=True),
                         tf.gather(row_of_word, word_of_piece))
    first = tf.searchsorted(norm_offsets, starts + row_base, side="left")
    last = tf.searchsorted(norm_offsets, ends + row_base, side="left") - 1
    # The input codepoint each normalised codepoint came from.
    source = tf.repeat(tf.range(tf.size(flat, out_type=tf.int64)), counts)
    first_src = tf.gather(source, first)
    last_src = tf.gather(source, last)
    start_offsets = tf.gather(cp_starts.flat_values, first_src)
    # A piece ends where the next codepoint the normalisation keeps begins
    # (or at the text's end): what it removes after the piece's last
    # character (combining marks when uncased, format and control
    # characters) belongs to that character, as in FastBertTokenizer's
    # offsets, so both paths cut "cafe\u0301" whole.
    kept = tf.where(counts > 0)[:, 0]                              # [kept]
    n = tf.size(flat, out_type=tf.int64)
    after = tf.gather(tf.concat([kept, [n]], 0),
                      tf.searchsorted(kept, last_src, side="right"))
    row = tf.gather(cps.value_rowids(), last_src)
    in_row = after < tf.gather(cps.row_splits, row + 1)
    text_bytes = tf.cast(tf.strings.length(texts), tf.int64)      # [batch]
    end_offsets = tf.where(
        in_row, tf.gather(cp_starts.flat_values, tf.where(in_row, after, 0)),
        tf.gather(text_bytes, row))
    ids = ids.merge_dims(1, 2)
    return (ids, ids.with_flat_values(start_offsets),
            ids.with_flat_values(end_offsets))

  def get_config(self):
    config = super().get_config()
    if self.vocab_file is None:
      config.update(vocabulary=list(self._vocab))
    if self.special_tokens:
      config.update(special_tokens=list(self.special_tokens))
    config.update(vocab_file=self.vocab_file, lower_case=self.lower_case,
                  tokenize_with_offsets=self.tokenize_with_offsets,
                  fast_path=self.fast_path)
    return config
