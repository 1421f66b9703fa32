"""BERT's WordPiece in NumPy and `tokenizers`, as the graph computes it.

The graph's `bert.layers.BertTokenizer` normalises text with one gather from
a per-codepoint table (cleaning, CJK split, lower-casing and accent
stripping, punctuation split; `bert.layers._text_normalization`) and then
matches the space-separated words greedily, longest piece first. Here the
same table (the export's own copy, so the Unicode database of the machine
that serves cannot differ) gathers the codepoints in NumPy, and Hugging
Face `tokenizers`' WordPiece model, which applies the same matching rule,
splits the words. So the ids and the byte offsets are the graph's for any
text (`tests/serving/host_tokenizer_test.py` compares them on generated
Unicode and the shared data), without TensorFlow's per-op cost.
"""

from typing import List, Sequence, Tuple

import numpy as np

TABLE_SHAPE = (0x40000, 3)   # bert.layers._text_normalization's table
MAX_CHARS_PER_WORD = 100     # longer words are one [UNK], as the graph's


def _utf8_sizes(cps: np.ndarray) -> np.ndarray:
  return 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)


class HostWordPiece:
  """str -> WordPiece ids, and each piece's UTF-8 byte span in the text."""

  def __init__(self, tokens: Sequence[str], table: np.ndarray):
    """tokens: the vocabulary in id order; table: int32 [0x40000, 3], the
    output codepoints of each input codepoint, -1 padded."""
    from tokenizers import Tokenizer, models, pre_tokenizers  # pylint: disable=g-import-not-at-top
    table = np.asarray(table)
    if table.shape != TABLE_SHAPE or table.dtype != np.int32:
      raise ValueError(f"the normalisation table is {table.dtype} "
                       f"{list(table.shape)}, not int32 {list(TABLE_SHAPE)}")
    self._table = table
    self._ascii = {c: "".join(map(chr, row[row >= 0]))
                   for c, row in enumerate(table[:128])}
    self._wordpiece = Tokenizer(models.WordPiece(
        {t: i for i, t in enumerate(tokens)}, unk_token="[UNK]",
        max_input_chars_per_word=MAX_CHARS_PER_WORD))
    # The table turned every space into " " and removed other whitespace.
    self._wordpiece.pre_tokenizer = pre_tokenizers.WhitespaceSplit()

  def _normalize(self, text: str):
    """(normalised text, the normalised characters of each codepoint [n],
    the codepoints [n])."""
    cps = np.frombuffer(text.encode("utf-32-le"), np.uint32).astype(np.int64)
    out = self._table[np.minimum(cps, TABLE_SHAPE[0] - 1)]             # [n, 3]
    out[cps >= TABLE_SHAPE[0]] = -1     # planes 4-16: removed, as the graph
    keep = out >= 0
    normalized = out[keep].astype(np.uint32).tobytes().decode("utf-32-le")
    return normalized, keep.sum(1), cps

  def tokenize(self, texts: Sequence[str]) -> List[List[int]]:
    """The ids of each text."""
    # ASCII text (most requests) goes through the table's ASCII rows as a
    # str.translate mapping: the same normalisation, without NumPy's calls.
    return [self._wordpiece.encode(
        t.translate(self._ascii) if t.isascii() else self._normalize(t)[0],
        add_special_tokens=False).ids for t in texts]

  def tokenize_with_offsets(self, text: str
                            ) -> Tuple[List[int], np.ndarray, np.ndarray]:
    """(ids, int64 start, int64 end): each piece's UTF-8 byte span in
    `text`, end exclusive. A piece ends where the next codepoint the
    normalisation keeps begins: the marks and format characters it removes
    after a piece belong to it, as in the graph."""
    normalized, counts, cps = self._normalize(text)
    source = np.repeat(np.arange(len(cps)), counts)                    # [m]
    encoding = self._wordpiece.encode(normalized, add_special_tokens=False)
    spans = np.array(encoding.offsets, np.int64).reshape(-1, 2)        # [p, 2]
    byte = np.concatenate([[0], np.cumsum(_utf8_sizes(cps))])         # [n + 1]
    kept = np.flatnonzero(counts)
    after = np.append(kept, len(cps))[
        np.searchsorted(kept, source[spans[:, 1] - 1], side="right")]
    return encoding.ids, byte[source[spans[:, 0]]], byte[after]
