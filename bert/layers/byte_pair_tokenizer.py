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

from typing import Dict, List, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras

from bert.errors import DataError
from bert.layers._byte_pair_ops import (NUL_STANDIN, exclusive_cumsum,
                                        join_whitespace, merge_loop, trimmed,
                                        without_standins)
from bert.layers._tokenizer_ops import (WHITESPACE, interleave,
                                        special_pattern, table)
# The file readers and byte table, where they have always been importable.
from bert.layers.byte_level_bpe import (bytes_to_unicode, read_merges,
                                        read_vocab_json)

__all__ = ["BytePairTokenizer", "bytes_to_unicode", "read_merges",
           "read_vocab_json"]

# GPT-2's pre-tokens, with whitespace one character at a time (see `join_
# whitespace` for the runs). Alternatives are tried in order (RE2 is
# leftmost-first, as the reference).
_PIECE = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+"
          rf"| ?[^{WHITESPACE}\p{{L}}\p{{N}}]+|[{WHITESPACE}]")


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
    self._ids = table(tokens, list(range(len(tokens))), -1, tf.int64)
    self._ranks = table([f"{a} {b}" for a, b in merges],
                        list(range(len(merges))), -1, tf.int64)
    byte_chars = bytes_to_unicode()
    self._byte_chars = tf.constant([byte_chars[b] for b in range(256)])
    self._byte_values = table([bytes([b]) for b in range(256)],
                              list(range(256)), -1, tf.int64)
    self._special_pattern = special_pattern(self.special_tokens,
                                            self.lstrip_tokens)
    self._special_ids = table(list(self.special_tokens),
                              [vocab[t] for t in self.special_tokens], -1,
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
    texts = tf.strings.regex_replace(texts, "\x00", NUL_STANDIN)
    # [batch, (pieces)]: specials and the stretches between them.
    pieces, starts, ends = tf_text.regex_split_with_offsets(
        texts, self._special_pattern, self._special_pattern)
    stripped = tf.strings.regex_replace(pieces.flat_values,
                                        f"^[{WHITESPACE}]+", "")
    special_ids = self._special_ids.lookup(stripped)
    is_special = tf.logical_and(special_ids >= 0, tf.strings.regex_full_match(
        pieces.flat_values, self._special_pattern))
    # Every stretch (specials too, replaced below) into GPT-2 pre-tokens.
    words, w_starts, w_ends = tf_text.regex_split_with_offsets(
        pieces.flat_values, _PIECE, _PIECE)
    words, w_starts, w_ends = join_whitespace(words, w_starts, w_ends)
    # [stretch, (symbols)] via the distinct words.
    symbols, lengths = self._bpe_of_words(words.flat_values)
    found = self._ids.lookup(symbols.flat_values)
    word_ids = symbols.with_flat_values(
        tf.where(found < 0, tf.cast(self._unknown_id, tf.int64), found))
    sym_start = (tf.repeat(w_starts.flat_values, symbols.row_lengths())
                 + exclusive_cumsum(lengths))
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
    merged_ids = interleave(first, special_ids, is_special, n_tokens)
    merged_starts = interleave(
        tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(s_starts.flat_values, keep),
            tf.where(is_special, 0 * one, ids.row_lengths())),
        tf.zeros_like(special_ids), is_special, n_tokens)
    merged_ends = interleave(
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
    begin, end = (without_standins(texts, x) for x in (begin, end))
    begin = begin.with_flat_values(tf.maximum(begin.flat_values - shift, 0))
    end = end.with_flat_values(tf.maximum(end.flat_values - shift, 0))
    if self.trim_offsets:
      begin, end = trimmed(original, begin, end)
    return out_ids, begin, end

  def _bpe_of_words(self, words):
    """(symbols [word, (symbols)] strings, their byte lengths alike) of the
    words (pre-tokens), the merges applied."""
    unique, index = tf.unique(words)
    unique = tf.strings.regex_replace(unique, NUL_STANDIN, "\x00")
    chars = tf.strings.bytes_split(unique)                  # [u, (bytes)]
    byte_values = self._byte_values.lookup(chars.flat_values)
    mapped = chars.with_flat_values(tf.gather(self._byte_chars, byte_values))
    # Lengths in the text's bytes, where a NUL stands in as 3.
    byte_len = chars.with_flat_values(
        tf.where(byte_values == 0, tf.constant(3, tf.int64), 1))
    merged, merged_len = merge_loop(mapped, byte_len, self._ranks)
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
