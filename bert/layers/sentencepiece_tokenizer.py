"""`SentencePieceTokenizer`: raw strings -> SentencePiece ids (ALBERT),
in-graph.

The reference is Hugging Face's `AlbertTokenizer` (fast) on the same
`spiece.model`:

1. Special tokens written in the text (`[CLS]`, `[SEP]`, `[MASK]`, ...) are
   matched first and never split.
2. Each stretch between them is normalised as the reference does: `` and
   '' become ", then (unless `keep_accents`) NFKD and combining marks
   removed, then (with `lower_case`) lower-cased.
3. `tensorflow_text.FastSentencepieceTokenizer` applies the model's own
   normalisation (its precompiled character map, whitespace clean-up) and
   segments each whitespace-separated word.

The reference's fast tokenizer also keeps a number from swallowing the comma
after it ("9," is "▁9" and ","): it lowers the score of every piece that
ends in a digit and a comma by 100. The same change is made to a copy of
the model here, so the segmentation is the reference's.

Offsets (`tokenize(texts, with_offsets=True)`) are the reference's
`offset_mapping` in UTF-8 bytes. The fast tokenizer has none, so they are
rebuilt from its ids (the ids are never changed): every character of the
input is normalised alone (as step 2, a `` or '' pair giving its " to the
second character, as the reference aligns it) and segmented alone, which
gives its "units": the characters it becomes in the model's normalised text
(none for whitespace and removed characters), each known to the vocabulary
or not. A piece covers as many units as it has characters after its "▁";
an unknown piece covers one run of unknown units (SentencePiece fuses them
within a word). A token's span runs from the start of the input character
of its first unit to the end of that of its last; a "▁" alone takes the
character after it, as the reference's prepended "▁" does. A character the
normalisation expands ("ﬁ", "½") gives all its tokens its own span, as the
reference.

The one place this differs from the reference: characters that the model's
normalisation composes with their neighbours (Hangul jamo, some Indic vowel
signs; accents with `keep_accents`, "e" + U+0301) count here as alone. An
unknown composed character is harmless (its unknown piece covers the whole
run), but a known one counts a unit too many, and the later tokens of its
stretch start that many characters early. The reference's own alignment is
irregular there too (it composes only graphemes shorter than 6 bytes, and
misaligns what follows a character its model map expands).
"""

import base64
from typing import Optional, Sequence, Union

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras

from bert.errors import DataError
from bert.layers._tokenizer_ops import (WHITESPACE, interleave,
                                        special_pattern, table)
# The model readers, where they have always been importable.
from bert.layers.sentencepiece_model import (number_comma, parse_model,
                                             read_model)

__all__ = ["SentencePieceTokenizer", "number_comma", "parse_model",
           "read_model"]


@tf_keras.utils.register_keras_serializable(package="bert")
class SentencePieceTokenizer(tf_keras.layers.Layer):
  """SentencePiece: string [batch] -> int32 ragged [batch, (tokens)].

  Args:
    model_file: the `spiece.model`; or
    model: a serialized model (bytes, or base64 text as `get_config` saves
      it), as spiece.model holds it (`Vocabulary.model`).
    lower_case: lower-case before segmenting (ALBERT: True).
    keep_accents: keep combining marks (ALBERT: False).
    special_tokens: tokens matched whole in the text, never split.
    lstrip_tokens: special tokens that take the whitespace on their left.
    tokenize_with_offsets: `call` also returns int64 ragged start and end
      UTF-8 byte offsets of every token in the input (end exclusive).
  """

  def __init__(self, model_file: Optional[str] = None, lower_case: bool = True,
               keep_accents: bool = False,
               special_tokens: Sequence[str] = ("[CLS]", "[SEP]", "<pad>",
                                                "<unk>", "[MASK]"),
               lstrip_tokens: Sequence[str] = (),
               model: Union[bytes, str, None] = None,
               source: Optional[str] = None,
               tokenize_with_offsets: bool = False, **kwargs):
    super().__init__(**kwargs)
    if (model_file is None) == (model is None):
      raise ValueError("SentencePieceTokenizer: give model_file or model, "
                       "not both")
    self.model_file = model_file
    self.lower_case = bool(lower_case)
    self.keep_accents = bool(keep_accents)
    self.special_tokens = tuple(special_tokens)
    self.lstrip_tokens = tuple(lstrip_tokens)
    self.tokenize_with_offsets = bool(tokenize_with_offsets)
    if model_file is not None:
      model = read_model(model_file, number_comma_penalty=False)
      source = model_file
    elif isinstance(model, str):
      model = base64.b64decode(model)
    source = source or "SentencePiece model"
    object.__setattr__(self, "_model", bytes(model))
    model = parse_model(model, source).SerializeToString()
    self._sp = tf_text.FastSentencepieceTokenizer(model=model)
    import sentencepiece  # pylint: disable=g-import-not-at-top
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    object.__setattr__(self, "_processor", processor)
    ids = [processor.piece_to_id(t) for t in self.special_tokens]
    unknown = processor.unk_id()
    missing = [t for t, i in zip(self.special_tokens, ids)
               if i == unknown and t != "<unk>"]
    if missing:
      raise DataError(f"{source} has no {missing[0]} piece")
    object.__setattr__(self, "_special", dict(zip(self.special_tokens,
                                                  (int(i) for i in ids))))
    self._special_pattern = special_pattern(self.special_tokens,
                                            self.lstrip_tokens)
    self._special_ids = table(list(self.special_tokens),
                              [self._special[t] for t in self.special_tokens],
                              -1, tf.int64)
    # Per piece id: the units it covers (its characters after a leading
    # "▁"), and whether it starts a word.
    pieces = [processor.id_to_piece(i)
              for i in range(processor.get_piece_size())]
    self._piece_units = tf.constant(
        [len(p) - p.startswith("▁") for p in pieces], tf.int64)
    self._word_start = tf.constant([p.startswith("▁") for p in pieces])
    self._unknown_id = int(unknown)

  @property
  def vocab_size(self) -> int:
    return self._processor.get_piece_size()

  @property
  def vocab(self):
    """The pieces in id order."""
    return [self._processor.id_to_piece(i)
            for i in range(self._processor.get_piece_size())]

  def token_to_id(self, token: str) -> int:
    return self._processor.piece_to_id(token)

  def get_special_tokens_dict(self):
    """Ids of the special tokens, named as BertTokenizer's."""
    ids = dict(padding_id=self._special["<pad>"],
               start_of_sequence_id=self._special["[CLS]"],
               end_of_segment_id=self._special["[SEP]"],
               unknown_id=self._processor.unk_id(),
               vocab_size=self._processor.get_piece_size())
    if "[MASK]" in self._special:
      ids["mask_id"] = self._special["[MASK]"]
    return ids

  # Words alone tokenize as inside a sentence (it splits on spaces).
  word_prefix = ""

  @staticmethod
  def packer_options():
    """ALBERT packs as BERT: `[CLS] a [SEP] b [SEP]`, segment type ids."""
    return {}

  def tokenize(self, texts, with_offsets: bool = False):
    """string [batch] -> ids [batch, (tokens)] (+ start, end offsets)."""
    return self._tokenize(texts, with_offsets)

  def normalize(self, texts):
    texts = tf.strings.regex_replace(texts, "``|''", '"')
    if not self.keep_accents:
      texts = tf_text.normalize_utf8(texts, "NFKD")
      texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    if self.lower_case:
      texts = tf.strings.lower(texts, encoding="utf-8")
    return texts

  def call(self, texts):
    return self._tokenize(texts, self.tokenize_with_offsets)

  def _tokenize(self, texts, with_offsets):
    texts = tf.convert_to_tensor(texts, tf.string)
    pieces, starts, ends = tf_text.regex_split_with_offsets(
        texts, self._special_pattern, self._special_pattern)
    flat = pieces.flat_values
    stripped = tf.strings.regex_replace(flat, f"^[{WHITESPACE}]+", "")
    special_ids = self._special_ids.lookup(stripped)
    is_special = tf.logical_and(special_ids >= 0, tf.strings.regex_full_match(
        flat, self._special_pattern))
    ids = self._sp.tokenize(self.normalize(flat))            # [piece, (ids)]
    ids = tf.cast(ids, tf.int64).with_row_splits_dtype(tf.int64)
    n_tokens = tf.where(is_special, tf.ones_like(ids.row_lengths()),
                        ids.row_lengths())
    keep = tf.repeat(tf.logical_not(is_special), ids.row_lengths())
    plain = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids.flat_values, keep),
        tf.where(is_special, tf.zeros_like(n_tokens), ids.row_lengths()))
    merged = interleave(plain, special_ids, is_special, n_tokens)
    out = tf.RaggedTensor.from_row_splits(
        tf.cast(merged, tf.int32),
        tf.gather(tf.concat([[0], tf.cumsum(n_tokens)], 0), pieces.row_splits))
    if not with_offsets:
      return out
    # Offsets of the plain stretches' tokens, in their stretch; a special
    # token covers its whole stretch.
    begin, end = self._offsets(tf.where(is_special, "", flat), plain)
    base = tf.repeat(starts.flat_values, n_tokens)
    begin = interleave(begin, tf.zeros_like(special_ids), is_special,
                       n_tokens)
    end = interleave(end, ends.flat_values - starts.flat_values, is_special,
                     n_tokens)
    return (out, out.with_flat_values(base + begin),
            out.with_flat_values(base + end))

  def _offsets(self, stretches, ids):
    """Start and end byte offsets in `stretches` [n] of their tokens `ids`
    [n, (tokens)] (int64), ragged as `ids` (see the module docstring)."""
    chars, c_start = tf.strings.unicode_split_with_offsets(
        stretches, "UTF-8", errors="replace")
    c_start = tf.cast(c_start.flat_values, tf.int64)
    c_row = chars.value_rowids()
    n_chars = tf.shape(c_start, out_type=tf.int64)[0]
    # A character ends where the next one of its stretch starts.
    row_bytes = tf.cast(tf.strings.length(stretches), tf.int64)
    same_row_next = tf.concat([tf.equal(c_row[1:], c_row[:-1]), [False]], 0)
    c_end = tf.where(same_row_next,
                     tf.concat([c_start[1:], [0]], 0)[:n_chars],
                     tf.gather(row_bytes, c_row))
    # `` and '': the first character gives nothing, the second the ".
    quotes, q_start, _ = tf_text.regex_split_with_offsets(
        stretches, "``|''", "``|''")
    is_pair = tf.logical_or(tf.equal(quotes.flat_values, "``"),
                            tf.equal(quotes.flat_values, "''"))
    pair_key = tf.boolean_mask(
        quotes.value_rowids() * _ROW + q_start.flat_values, is_pair)
    char_key = c_row * _ROW + c_start
    first = _member(char_key, pair_key)
    second = _member(char_key - 1, pair_key)
    normal = self.normalize(chars.flat_values)
    normal = tf.where(first, "", tf.where(second, '"', normal))
    # Each distinct normalised character segmented alone: its units, and
    # whether it separates words (between two letters it makes two words).
    unique, which = tf.unique(normal, out_idx=tf.int64)
    alone = tf.cast(self._sp.tokenize(unique), tf.int64).with_row_splits_dtype(
        tf.int64)
    probe = tf.cast(self._sp.tokenize(tf.strings.join(["a", unique, "a"])),
                    tf.int64).with_row_splits_dtype(tf.int64)
    separates = tf.reduce_sum(tf.cast(tf.gather(
        self._word_start, probe), tf.int64), axis=1) >= 2
    a_unknown = tf.equal(alone.flat_values, self._unknown_id)
    a_units = tf.where(a_unknown, tf.constant(1, tf.int64),
                       tf.gather(self._piece_units, alone.flat_values))
    unit_unknown = tf.repeat(a_unknown, a_units)
    unit_row = tf.repeat(alone.value_rowids(), a_units)
    units_of = tf.RaggedTensor.from_value_rowids(
        unit_unknown, unit_row, nrows=tf.shape(unique, out_type=tf.int64)[0])
    # The units of the stretches, in order: [units] flags and characters.
    units = tf.gather(units_of, which)                    # [chars, (units)]
    unknown = units.flat_values
    u_char = units.value_rowids()
    u_first = tf.equal(tf.range(tf.shape(unknown, out_type=tf.int64)[0]),
                       tf.gather(units.row_starts(), u_char))
    u_row = tf.gather(c_row, u_char)
    seps = tf.cumsum(tf.cast(tf.gather(separates, which), tf.int64))
    # A run of unknown units is one unknown piece: it breaks at a word or
    # stretch boundary, and between two unknown pieces of one character.
    prev_char = tf.concat([[-1], u_char[:-1]], 0)
    prev_row = tf.concat([[-1], u_row[:-1]], 0)
    prev_unknown = tf.concat([[False], unknown[:-1]], 0)
    boundary = tf.logical_or(
        tf.not_equal(u_row, prev_row),
        tf.gather(seps, u_char) > tf.gather(seps, tf.maximum(prev_char, 0)))
    run_start = unknown & (~u_first | boundary | ~prev_unknown)
    run_id = tf.cumsum(tf.cast(run_start, tf.int64)) - 1
    n_runs = tf.reduce_sum(tf.cast(run_start, tf.int64))
    run_len = tf.math.unsorted_segment_sum(
        tf.cast(unknown, tf.int64), tf.where(unknown, run_id, n_runs),
        n_runs + 1)[:n_runs]
    n_rows = tf.shape(stretches, out_type=tf.int64)[0]
    runs_in_row = tf.math.unsorted_segment_sum(
        tf.cast(run_start, tf.int64), u_row, n_rows)
    units_in_row = tf.math.unsorted_segment_sum(
        tf.ones_like(u_row), u_row, n_rows)
    # The k-th unknown piece of a stretch covers its k-th run.
    flat_ids = ids.flat_values
    t_row = ids.value_rowids()
    t_unknown = tf.equal(flat_ids, self._unknown_id)
    rank = tf.cumsum(tf.cast(t_unknown, tf.int64), exclusive=True)
    rank -= tf.gather(_row_first(rank, ids), t_row)
    valid = t_unknown & (rank < tf.gather(runs_in_row, t_row))
    run = tf.cumsum(runs_in_row, exclusive=True)
    unknown_len = tf.gather(tf.concat([run_len, [1]], 0),
                            tf.where(valid, tf.gather(run, t_row) + rank,
                                     n_runs))
    length = tf.where(t_unknown, unknown_len,
                      tf.gather(self._piece_units, flat_ids))
    start = tf.cumsum(length, exclusive=True)
    start -= tf.gather(_row_first(start, ids), t_row)
    # Units to characters to bytes; a "▁" alone (no unit) takes the next.
    row_base = tf.gather(tf.cumsum(units_in_row, exclusive=True), t_row)
    row_last = row_base + tf.gather(units_in_row, t_row) - 1
    n_units = tf.shape(unknown, out_type=tf.int64)[0]
    first_unit = tf.clip_by_value(row_base + start, 0, row_last)
    last_unit = tf.clip_by_value(row_base + start + tf.maximum(length, 1) - 1,
                                 0, row_last)
    # An extra unit and character keep the gathers in range when a stretch
    # has no units (its tokens, if any, get an empty span at 0).
    unit_char = tf.concat([u_char, [n_chars]], 0)
    first_unit = tf.where(row_last < row_base, n_units, first_unit)
    last_unit = tf.where(row_last < row_base, n_units, last_unit)
    begin = tf.gather(tf.concat([c_start, [0]], 0),
                      tf.gather(unit_char, first_unit))
    end = tf.gather(tf.concat([c_end, [0]], 0),
                    tf.gather(unit_char, last_unit))
    return ids.with_flat_values(begin), ids.with_flat_values(end)

  def get_config(self):
    config = super().get_config()
    if self.model_file is None:
      config.update(model=base64.b64encode(self._model).decode("ascii"))
    config.update(model_file=self.model_file, lower_case=self.lower_case,
                  keep_accents=self.keep_accents,
                  special_tokens=list(self.special_tokens),
                  lstrip_tokens=list(self.lstrip_tokens),
                  tokenize_with_offsets=self.tokenize_with_offsets)
    return config


# Row keys: a stretch's row times this plus a byte offset in it.
_ROW = 1 << 32


def _member(keys, sorted_keys):
  """keys [n] -> bool [n]: whether each is in the sorted `sorted_keys`."""
  padded = tf.concat([sorted_keys, [tf.int64.max]], 0)
  at = tf.searchsorted(padded, keys, side="left")
  return tf.equal(tf.gather(padded, at), keys)


def _row_first(values, ragged):
  """Per row of `ragged`: the flat `values` at its first position (0 for an
  empty row), to make a flat cumulative sum restart at every row."""
  return tf.gather(tf.concat([values, [0]], 0), ragged.row_starts())
