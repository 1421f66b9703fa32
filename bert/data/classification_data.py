"""Readers for sentence(-pair) classification and regression data.

GLUE's original TSV layouts (as `download_glue_data.py` writes them: UTF-8,
a header row on all but CoLA's train/dev, a BOM on some files, and `"` that
is *not* a quote character), and a generic reader for TSV/CSV/JSONL files
with named columns. Every problem names the file and line.
"""

import csv
import dataclasses
import json
import logging
import math
import os
from typing import Dict, List, Optional, Sequence, Union

from bert.io import text_lines
from bert.data.errors import DataError
from bert.validation import ConfigError

Label = Union[str, float, None]


@dataclasses.dataclass
class Example:
  """One input: one or two texts and a label (None in test sets)."""
  guid: str
  text_a: str
  text_b: Optional[str] = None
  label: Label = None


@dataclasses.dataclass(frozen=True)
class GlueLayout:
  """Columns of one GLUE task's TSV files (0-based; -1 = last column)."""
  text_a: int
  text_b: Optional[int]
  label: Optional[int]
  labels: Optional[Sequence[str]]           # None: regression
  header: bool = True
  test_text_a: int = 1
  test_text_b: Optional[int] = None
  test_header: bool = True
  metrics: Sequence[str] = ("accuracy",)
  skip_short_rows: bool = False             # the original skips bad QQP rows
  dev_files: Sequence[str] = ("dev.tsv",)
  test_files: Sequence[str] = ("test.tsv",)


GLUE_TASKS: Dict[str, GlueLayout] = {
    "cola": GlueLayout(text_a=3, text_b=None, label=1, labels=("0", "1"),
                       header=False, metrics=("mcc", "accuracy")),
    "sst-2": GlueLayout(text_a=0, text_b=None, label=1, labels=("0", "1")),
    "mrpc": GlueLayout(text_a=3, text_b=4, label=0, labels=("0", "1"),
                       test_text_a=3, test_text_b=4, metrics=("accuracy", "f1")),
    "qqp": GlueLayout(text_a=3, text_b=4, label=5, labels=("0", "1"),
                      test_text_a=1, test_text_b=2, metrics=("accuracy", "f1"),
                      skip_short_rows=True),
    "sts-b": GlueLayout(text_a=7, text_b=8, label=-1, labels=None,
                        test_text_a=7, test_text_b=8,
                        metrics=("pearson", "spearman")),
    "mnli": GlueLayout(text_a=8, text_b=9, label=-1,
                       labels=("contradiction", "entailment", "neutral"),
                       test_text_a=8, test_text_b=9,
                       dev_files=("dev_matched.tsv", "dev_mismatched.tsv"),
                       test_files=("test_matched.tsv", "test_mismatched.tsv")),
    "qnli": GlueLayout(text_a=1, text_b=2, label=-1,
                       labels=("entailment", "not_entailment"), test_text_b=2),
    "rte": GlueLayout(text_a=1, text_b=2, label=-1,
                      labels=("entailment", "not_entailment"), test_text_b=2),
    "wnli": GlueLayout(text_a=1, text_b=2, label=-1, labels=("0", "1"),
                       test_text_b=2),
}
GLUE_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts_b": "sts-b",
                "sst_2": "sst-2"}


def glue_layout(task: str) -> GlueLayout:
  name = GLUE_ALIASES.get(task.lower(), task.lower())
  if name not in GLUE_TASKS:
    raise ConfigError(f"unknown GLUE task {task!r}; known: "
                      f"{', '.join(GLUE_TASKS)}")
  return GLUE_TASKS[name]


def _tsv_rows(path: str):
  """(line number, columns) of a TSV file; `"` is an ordinary character."""
  for number, line in text_lines(path):
    line = line.rstrip("\r\n")
    if line:
      yield number, line.split("\t")


def _column(row, index, path, number, what):
  try:
    return row[index]
  except IndexError:
    raise DataError(f"{path}:{number}: row has {len(row)} column(s), {what} "
                    f"is column {index if index >= 0 else len(row) + index}")


def read_glue(task: str, path: str, split: str = "train",
              log=logging.warning) -> List[Example]:
  """Examples of one GLUE file; `split` "test" reads the unlabelled layout."""
  layout = glue_layout(task)
  test = split == "test"
  header = layout.test_header if test else layout.header
  col_a = layout.test_text_a if test else layout.text_a
  col_b = layout.test_text_b if test else layout.text_b
  examples, skipped = [], 0
  for number, row in _tsv_rows(path):
    if header and number == 1:
      continue
    needed = max(c if c >= 0 else 0 for c in
                 [col_a, col_b or 0] + ([] if test else [layout.label])) + 1
    if len(row) < needed and layout.skip_short_rows:
      skipped += 1
      continue
    text_a = _column(row, col_a, path, number, "text_a")
    text_b = _column(row, col_b, path, number, "text_b") if col_b is not None else None
    label = None
    if not test:
      raw = _column(row, layout.label, path, number, "the label")
      label = _parse_label(raw, layout.labels, path, number)
    examples.append(Example(f"{split}-{number}", text_a, text_b, label))
  if skipped:
    log(f"{path}: skipped {skipped} row(s) with missing columns, as the "
        "original GLUE processor does")
  if not examples:
    raise DataError(f"{path}: no examples")
  return examples


def _parse_label(raw: str, labels: Optional[Sequence[str]], path, number) -> Label:
  if labels is None:
    try:
      value = float(raw)
    except ValueError:
      value = None
    if value is None or not math.isfinite(value):   # "nan"/"inf" parse
      raise DataError(f"{path}:{number}: regression label {raw!r} is not a "
                      "finite number")
    return value
  if raw not in labels:
    raise DataError(f"{path}:{number}: label {raw!r} is not one of "
                    f"{list(labels)}")
  return raw


def _csv_rows(path: str):
  """(line number of its first line, fields) of each record of a CSV file;
  a malformed record (a stray carriage return, a field past csv's size
  limit) is a DataError naming its line."""
  reader = csv.reader(line for _, line in text_lines(path))
  while True:
    start = reader.line_num + 1
    try:
      row = next(reader)
    except StopIteration:
      return
    except csv.Error as e:
      raise DataError(f"{path}:{reader.line_num or start}: not valid CSV "
                      f"({e})") from None
    yield start, row


def _json_lines(path: str):
  """(line number, object) of each non-blank line of a JSON-lines file."""
  for number, line in text_lines(path):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      raise DataError(f"{path}:{number}: not valid JSON ({e.msg})") from None
    except RecursionError:
      raise DataError(f"{path}:{number}: not valid JSON (nested too "
                      "deeply)") from None
    except ValueError as e:   # an integer of more than 4300 digits
      raise DataError(f"{path}:{number}: not valid JSON ({e})") from None
    if not isinstance(record, dict):
      raise DataError(f"{path}:{number}: expected a JSON object per line")
    yield number, record


def _text_field(record: dict, key: str, path: str, number: int) -> str:
  value = record[key]
  if not isinstance(value, str):
    # str(None) would train on the text "None".
    raise DataError(f"{path}:{number}: field {key!r} must be a string, got "
                    f"{'null' if value is None else type(value).__name__}")
  return value


def _label_field(record: dict, key: str, path: str, number: int) -> str:
  value = record[key]
  if isinstance(value, bool) or not isinstance(value, (str, int, float)):
    raise DataError(f"{path}:{number}: field {key!r} must be a string or a "
                    f"number, got "
                    f"{'null' if value is None else type(value).__name__}")
  return str(value)


def read_generic(path: str, text_a: str, text_b: Optional[str] = None,
                 label: Optional[str] = None,
                 labels: Optional[Sequence[str]] = None) -> List[Example]:
  """Examples from a TSV, CSV (with a header row) or JSON-lines file.

  Columns are named: `text_a`, `text_b`, `label` are header names (TSV/CSV)
  or keys (JSONL). With `labels`, labels must be among them (as strings);
  without, a label column is read as a float (regression). JSON texts must
  be strings and labels strings or numbers.
  """
  wanted = [c for c in (text_a, text_b, label) if c]
  examples = []
  for number, record in read_rows(path, wanted):
    value = None
    if label:
      value = _parse_label(_label_field(record, label, path, number), labels,
                           path, number)
    examples.append(Example(
        f"{os.path.basename(path)}-{number}",
        _text_field(record, text_a, path, number),
        _text_field(record, text_b, path, number) if text_b else None, value))
  if not examples:
    raise DataError(f"{path}: no examples")
  return examples


def read_rows(path: str, wanted: Sequence[str]):
  """(line number, {column: value}) of each row of a TSV or CSV file (with
  a header row) or JSON-lines file (by its extension), in order, each
  checked to hold the `wanted` columns (a missing one is a DataError naming
  the line)."""
  ext = os.path.splitext(path)[1].lower()
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: no such file")
  if ext in (".jsonl", ".json"):
    rows = list(_json_lines(path))
  elif ext in (".tsv", ".csv", ".txt"):
    rows = _table(path, _csv_rows(path) if ext == ".csv" else
                  ((n, line.rstrip("\r\n").split("\t"))
                   for n, line in text_lines(path)), wanted)
  else:
    raise DataError(f"{path}: unknown extension {ext!r} (use .tsv, .csv or "
                    ".jsonl)")
  for number, record in rows:
    for c in wanted:
      if c not in record:
        raise DataError(f"{path}:{number}: no field {c!r}")
    yield number, record


def _table(path: str, rows, wanted: Sequence[str]):
  """(line number, {column: value}) of a table with a header row."""
  header, out = None, []
  for number, row in rows:
    if not row or row == [""]:
      continue
    if header is None:
      header = row
      missing = [c for c in wanted if c not in header]
      if missing:
        raise DataError(f"{path}:{number}: header {header} has no column "
                        f"{missing[0]!r}")
      continue
    if len(row) != len(header):
      raise DataError(f"{path}:{number}: {len(row)} column(s), the header "
                      f"has {len(header)}")
    out.append((number, dict(zip(header, row))))
  return out


@dataclasses.dataclass
class ChoiceExample:
  """A context, the start of the answer, and the candidate endings."""
  guid: str
  context: str
  start: str
  endings: List[str]
  label: Optional[int] = None


def read_swag(path: str, num_choices: int = 4) -> List[ChoiceExample]:
  """SWAG CSV (header `video-id,fold-ind,startphrase,sent1,sent2,gold-source,
  ending0..ending3[,label]`): context = sent1, each choice = sent2 + ending."""
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: no such file")
  examples = []
  rows = _csv_rows(path)
  first, header = next(((n, r) for n, r in rows if r), (1, None))
  if header is None:
    raise DataError(f"{path}: empty file")
  endings = [f"ending{i}" for i in range(num_choices)]
  missing = [c for c in ["sent1", "sent2"] + endings if c not in header]
  if missing:
    raise DataError(f"{path}:{first}: header has no column {missing[0]!r}")
  col = {name: i for i, name in enumerate(header)}
  for number, row in rows:
    if not row:
      continue
    if len(row) != len(header):
      raise DataError(f"{path}:{number}: {len(row)} column(s), the header "
                      f"has {len(header)}")
    label = None
    if "label" in col and row[col["label"]] != "":
      try:
        label = int(row[col["label"]])
      except ValueError:
        raise DataError(f"{path}:{number}: label {row[col['label']]!r} is "
                        "not an integer") from None
      if not 0 <= label < num_choices:
        raise DataError(f"{path}:{number}: label {label} is not in "
                        f"[0, {num_choices})")
    examples.append(ChoiceExample(
        row[col["video-id"]] if "video-id" in col else f"{number}",
        row[col["sent1"]], row[col["sent2"]],
        [row[col[e]] for e in endings], label))
  if not examples:
    raise DataError(f"{path}: no examples")
  return examples
