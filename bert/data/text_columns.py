"""Columns of texts, one example a row, for sentence embeddings: (anchor,
positive[, negative ...]) for the ranking and triplet losses, (a, b, score)
for CoSENT and STS.

  {"anchor": "how tall is it?", "positive": "It is 300 m tall."}   (.jsonl)
  text_a<TAB>text_b<TAB>score                                     (.tsv)
  a man is eating.<TAB>a man eats food.<TAB>4.2

JSON lines: one object a line, the columns its keys (texts strings, scores
numbers). Tables (`.tsv`, `.csv`): a header row naming the columns. Every
problem is a one-line DataError naming the file and line
(`bert.data.classification_data.read_rows`).
"""

import dataclasses
import math
from typing import List, Optional, Sequence

import numpy as np

from bert.data.classification_data import read_rows
from bert.data.errors import DataError


@dataclasses.dataclass
class TextColumns:
  """`texts[i][j]`: column i's text of row j; `scores`: float32 [rows] or
  None; `lines`: each row's line number in `path`."""
  path: str
  texts: List[List[str]]
  scores: Optional[np.ndarray]
  lines: List[int]

  def __len__(self) -> int:
    return len(self.lines)


def _text(record: dict, key: str, path: str, number: int) -> str:
  value = record[key]
  if not isinstance(value, str):
    # str(None) would train on the text "None".
    raise DataError(f"{path}:{number}: field {key!r} must be a string, got "
                    f"{'null' if value is None else type(value).__name__}")
  return value


def _score(record: dict, key: str, path: str, number: int) -> float:
  value = record[key]
  ok = isinstance(value, (str, int, float)) and not isinstance(value, bool)
  try:
    score = float(value) if ok else math.nan
  except ValueError:     # a table's text that is no number
    score = math.nan
  if not math.isfinite(score):
    raise DataError(f"{path}:{number}: score {key!r} must be a finite number, "
                    f"got {value!r}")
  return score


def read_text_columns(path: str, columns: Sequence[str],
                      score_column: Optional[str] = None,
                      max_rows: int = 0) -> TextColumns:
  """The `columns` (and `score_column`) of every row of `path`; with
  `max_rows`, only the first ones. No rows is a DataError."""
  wanted = list(columns) + ([score_column] if score_column else [])
  texts: List[List[str]] = [[] for _ in columns]
  scores, lines = [], []
  for number, record in read_rows(path, wanted):
    if max_rows and len(lines) == max_rows:
      break
    for i, name in enumerate(columns):
      texts[i].append(_text(record, name, path, number))
    if score_column:
      scores.append(_score(record, score_column, path, number))
    lines.append(number)
  if not lines:
    raise DataError(f"{path}: no examples")
  return TextColumns(path, texts,
                     np.asarray(scores, np.float32) if score_column else None,
                     lines)
