"""Unlabeled transfer text for distillation (Turc et al. 2019): lines of
text a teacher labels for its student, encoded as the student task's rows
and appended to its training rows (`DistillationTask.transfer_files`)."""

import logging
from typing import Dict, List, Sequence, Tuple

import numpy as np

from bert.data import ner_data
from bert.io import text_lines
from bert.data.errors import DataError
from bert.tasks.multiple_choice import MultipleChoiceTask
from bert.validation import ConfigError


def with_transfer_rows(data: Dict[str, np.ndarray], files: Sequence[str],
                       student_task, kind: str
                       ) -> Tuple[Dict[str, np.ndarray], List[str]]:
  """(`data` plus the rows of `files`, unlabeled: `has_label` 0, labels -1;
  each added row's origin, "path: line n")."""
  rows, origins = _encode(files, student_task, kind)
  n = len(rows["input_word_ids"])
  if not n:
    raise DataError(f"DistillationTask.transfer_files: no text in "
                    f"{', '.join(files)}")
  rows["has_label"] = np.zeros([n], np.float32)
  fill = dict(label=-1, label_ids=-1)
  merged = {}
  for key, column in data.items():
    extra = rows.get(key)
    if extra is None:
      extra = np.full((n,) + column.shape[1:], fill.get(key, 0), column.dtype)
    merged[key] = np.concatenate([column, np.asarray(extra, column.dtype)])
  logging.info("DistillationTask: %d training rows of the task, %d of "
               "transfer text (%s)", len(data["input_word_ids"]), n,
               ", ".join(files))
  return merged, origins


def _encode(files, st, kind):
  """The rows of the non-empty lines of `files` for task `st`, and their
  origins: a tagger's line is whitespace-separated words; a classifier's
  one text, or for sentence pairs two tab-separated texts."""
  if kind == "spans" or isinstance(st, MultipleChoiceTask):
    raise ConfigError("DistillationTask.transfer_files: transfer text is "
                      "read for classification and tagging teachers (a QA "
                      "or multiple-choice example is more than a line)")
  lines = []
  for path in files:
    lines += [(path, number, line.rstrip("\r\n"))
              for number, line in text_lines(path) if line.strip()]
  origins = [f"{path}: line {number}" for path, number, _ in lines]
  if kind == "tokens":
    sentences = [ner_data.Sentence(words=text.split(), tags=None, line=number)
                 for _, number, text in lines]
    rows = ner_data.encode_sentences(sentences, st.tokenizer, st.seq_length)
    return rows, [origins[i] for i in rows["sentence_id"]]
  pairs = st.preprocessor().text_pairs
  texts_a, texts_b = [], []
  for path, number, text in lines:
    parts = text.split("\t")
    if len(parts) != (2 if pairs else 1):
      raise DataError(f"{path}:{number}: expected "
                      f"{'two tab-separated texts' if pairs else 'one text (no tab)'}"
                      f" for this {'sentence-pair' if pairs else 'single-sentence'} "
                      f"teacher, got {len(parts)} field(s)")
    texts_a.append(parts[0])
    if pairs:
      texts_b.append(parts[1])
  rows = st.tokenizer.encode(texts_a, texts_b if pairs else None,
                             st.seq_length)
  return rows, origins
