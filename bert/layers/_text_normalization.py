"""BERT's text normalisation as a per-codepoint table, for in-graph use.

google-research `tokenization.py` (and Hugging Face's BertNormalizer, which
agrees with it) normalise text one codepoint at a time:
  - NUL, U+FFFD and control/format/unassigned/private-use characters
    (Unicode category C*, except tab/newline/CR) are removed;
  - whitespace (space, tab, newline, CR, category Zs and other White_Space
    characters) becomes a space;
  - CJK ideographs get a space on each side (one token each);
  - uncased only: NFD, drop combining marks (Mn), lowercase (full Unicode
    mapping, so "ß" stays "ß" and "µ" stays "µ");
  - punctuation (ASCII !-/ :-@ [-` {-~ and category P*) gets a space on each
    side, which is the reference's punctuation split.
So each input codepoint maps to 0-3 output codepoints. This module builds
that mapping once, with Python's `unicodedata`, as a dense int32 table
[TABLE_SIZE, 3] padded with -1; the tokenizer gathers from it in-graph. Every
codepoint at or above TABLE_SIZE (planes 4-16: unassigned, tags, variation
selectors, private use) maps to nothing.

`tensorflow_text.FastBertNormalizer` is not used because it case-folds with
compatibility decomposition (NFKC_Casefold-like: "ß" -> "ss", "½" -> "1⁄2",
"…" -> "...", "µ" -> "μ"), which changes ids on about 0.1% of real sentences.
"""

import functools
import os
import unicodedata

import numpy as np

TABLE_SIZE = 0x40000
MAX_EXPANSION = 3


def is_control(char: str) -> bool:
  if char in "\t\n\r":
    return False
  return unicodedata.category(char).startswith("C")


def is_whitespace(char: str) -> bool:
  return char in " \t\n\r" or char.isspace() or unicodedata.category(char) == "Zs"


def is_punctuation(char: str) -> bool:
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def is_cjk(cp: int) -> bool:
  """CJK Unified Ideographs blocks, as google-research `_is_chinese_char`."""
  return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF
          or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
          or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
          or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def normalize_char(cp: int, lower_case: bool) -> str:
  """What one codepoint becomes (0-3 characters)."""
  if 0xD800 <= cp <= 0xDFFF:  # lone surrogates cannot come out of UTF-8
    return ""
  char = chr(cp)
  if cp == 0 or cp == 0xFFFD or is_control(char):
    return ""
  if is_whitespace(char):
    return " "
  if is_cjk(cp):
    return f" {char} "
  text = char
  if lower_case:
    text = "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn").lower()
  return "".join(f" {c} " if is_punctuation(c) else c for c in text)


def normalize_text(text: str, lower_case: bool) -> str:
  """Pure-Python normalisation of a whole string (reference for tests)."""
  return "".join(normalize_char(ord(c), lower_case) if ord(c) < TABLE_SIZE
                 else "" for c in text)


# Bump when normalize_char changes: cached tables of other versions are ignored.
_TABLE_VERSION = 1


def _table_cache_file(lower_case: bool) -> str:
  folder = os.environ.get("BERT_CACHE_DIR") or os.path.join(
      os.path.expanduser("~"), ".cache", "bert_tf2")
  return os.path.join(folder, f"codepoints_v{_TABLE_VERSION}_unicode"
                      f"{unicodedata.unidata_version}_"
                      f"{'uncased' if lower_case else 'cased'}.npy")


@functools.lru_cache(maxsize=2)
def codepoint_table(lower_case: bool) -> np.ndarray:
  """int32 [TABLE_SIZE, MAX_EXPANSION]: output codepoints, -1 padded.

  Computing it visits every codepoint in Python, so it is cached on disk
  (BERT_CACHE_DIR, default
  ~/.cache/bert_tf2), keyed by this module's table version and Python's
  Unicode database version; a cache that cannot be read or written is
  ignored. Loaded with allow_pickle=False.
  """
  path = _table_cache_file(lower_case)
  try:
    table = np.load(path, allow_pickle=False)
    if table.shape == (TABLE_SIZE, MAX_EXPANSION) and table.dtype == np.int32:
      table.setflags(write=False)
      return table
  except (OSError, ValueError):
    pass
  table = _compute_codepoint_table(lower_case)
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp.npy"
    np.save(tmp, table, allow_pickle=False)
    os.replace(tmp, path)
  except OSError:
    pass
  table.setflags(write=False)
  return table


def _compute_codepoint_table(lower_case: bool) -> np.ndarray:
  table = np.full((TABLE_SIZE, MAX_EXPANSION), -1, np.int32)
  for cp in range(TABLE_SIZE):
    out = normalize_char(cp, lower_case)
    if len(out) > MAX_EXPANSION:
      raise AssertionError(f"U+{cp:04X} expands to {len(out)} characters")
    table[cp, :len(out)] = [ord(c) for c in out]
  return table


def fast_path_unsafe_codepoints(lower_case: bool):
  """Codepoints where `tensorflow_text.FastBertTokenizer` (its normaliser and
  pre-tokenizer) differs from the reference, found by comparing both on every
  codepoint below TABLE_SIZE, alone and inside a word ("ab" + c + "cd").

  Slow (about a minute); `_fast_path_data.py` holds the result, and a slow
  test regenerates it and checks it is current.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=lower_case)
  # A vocab that matches nothing: every word becomes one [UNK], so the
  # offsets show exactly how the pre-tokenizer split the text into words.
  splitter = tf_text.FastWordpieceTokenizer(
      vocab=["[UNK]", "\ue000\ue000"], token_out_type=tf.int32)
  cps = [cp for cp in range(TABLE_SIZE) if not 0xD800 <= cp <= 0xDFFF]
  unsafe = []
  for i in range(0, len(cps), 8192):
    chunk = cps[i:i + 8192]
    alone = normalizer.normalize(tf.constant([chr(c) for c in chunk])).numpy()
    in_word = normalizer.normalize(tf.constant([f"ab{chr(c)}cd" for c in chunk]))
    _, starts, ends = splitter.tokenize_with_offsets(in_word)
    in_word = in_word.numpy()
    for k, cp in enumerate(chunk):
      ours = normalize_char(cp, lower_case)
      theirs = alone[k].decode("utf-8", "replace")
      ours_words = f"ab{ours}cd".split()
      theirs_words = [in_word[k][s:e].decode("utf-8", "replace")
                      for s, e in zip(starts[k].numpy(), ends[k].numpy())]
      if (ours.strip() or ours) != theirs or ours_words != theirs_words:
        unsafe.append(cp)
  return _ranges(unsafe)


def _ranges(cps):
  out = []
  for cp in cps:
    if out and out[-1][1] == cp - 1:
      out[-1][1] = cp
    else:
      out.append([cp, cp])
  return [tuple(r) for r in out]


def write_fast_path_data(path):
  """Regenerates `_fast_path_data.py`."""
  with open(path, "w", encoding="utf-8") as f:
    f.write('"""Generated by _text_normalization.write_fast_path_data; do not '
            'edit.\n\nCodepoint ranges (inclusive) on which tensorflow_text\'s '
            'FastBertTokenizer\ndiffers from the reference tokenizer.\n"""\n\n')
    for lower_case in (True, False):
      ranges = fast_path_unsafe_codepoints(lower_case)
      name = "UNSAFE_UNCASED" if lower_case else "UNSAFE_CASED"
      f.write(f"{name} = (\n")
      for a, b in ranges:
        f.write(f"    (0x{a:X}, 0x{b:X}),\n")
      f.write(")\n\n")


if __name__ == "__main__":
  import os  # pylint: disable=g-import-not-at-top
  write_fast_path_data(os.path.join(os.path.dirname(__file__), "_fast_path_data.py"))
