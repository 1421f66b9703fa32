"""Byte-level BPE (RoBERTa, GPT-2) outside the graph: GPT-2's byte <->
character table, the readers of its `vocab.json` and `merges.txt`, and the
text that byte-level tokens stand for. `BytePairTokenizer` tokenizes with
them in-graph; `Vocabulary` reads and decodes with them.
"""

import functools
import json
from typing import Dict, List, Sequence, Tuple

from bert.errors import DataError
from bert.io import read_text


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


@functools.lru_cache(maxsize=None)
def _byte_of_char():
  """GPT-2's byte -> character table, inverted (built once)."""
  return {c: b for b, c in bytes_to_unicode().items()}


def byte_level_text(tokens: Sequence[str], special: Sequence[str]) -> str:
  """The text of byte-level tokens: their bytes as UTF-8 (bad bytes
  replaced), the `special` tokens as written."""
  to_byte = _byte_of_char()
  special = set(special)
  parts, run = [], bytearray()
  for t in list(tokens) + [None]:
    if t is None or t in special:
      parts.append(run.decode("utf-8", errors="replace"))
      run = bytearray()
      if t is not None:
        parts.append(t)
    else:
      run.extend(to_byte[c] for c in t)
  return "".join(parts)


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
