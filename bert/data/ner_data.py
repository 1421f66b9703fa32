"""CoNLL-style token classification data (NER): reading, word-piece
alignment, and writing predictions back.

Input: one token per line, its tag in the last column (whitespace-separated
columns; CoNLL-2003's four columns and WNUT's two both work); sentences end at
a blank or whitespace-only line; `-DOCSTART-` lines are skipped. Every
problem names the file and line.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence

import numpy as np

from bert.io import text_lines
from bert.data.errors import DataError


@dataclasses.dataclass
class Sentence:
  words: List[str]
  tags: Optional[List[str]]        # None when the file has no tag column
  line: int                        # line number of the first word


def read_conll(path: str, num_columns: Optional[int] = None,
               has_tags: Optional[bool] = True) -> List[Sentence]:
  """Sentences of a CoNLL file. With `num_columns`, every token line must
  have exactly that many columns; otherwise the first line sets it.
  `has_tags=None`: tags if the lines have two or more columns."""
  sentences, words, tags, start = [], [], [], 0
  for number, line in text_lines(path):
    columns = line.split()
    if not columns:
      if words:
        sentences.append(Sentence(words, tags if has_tags else None, start))
      words, tags = [], []
      continue
    if columns[0] == "-DOCSTART-":
      continue
    if num_columns is None:
      num_columns = len(columns)
      if has_tags is None:
        has_tags = num_columns >= 2
      if has_tags and num_columns < 2:
        raise DataError(f"{path}:{number}: expected a token and a tag, "
                        f"got {len(columns)} column(s)")
    if len(columns) != num_columns:
      raise DataError(f"{path}:{number}: {len(columns)} column(s), expected "
                      f"{num_columns}")
    if not words:
      start = number
    words.append(columns[0])
    tags.append(columns[-1])
  if words:
    sentences.append(Sentence(words, tags if has_tags else None, start))
  if not sentences:
    raise DataError(f"{path}: no sentences")
  return sentences


def label_list(sentences: Sequence[Sentence]) -> List[str]:
  """All tags, "O" first, then sorted by entity type and B before I."""
  tags = {t for s in sentences for t in s.tags}
  rest = sorted(tags - {"O"}, key=lambda t: (t[2:], t[:2]))
  return ["O"] + rest


def check_tags(sentences: Sequence[Sentence], labels: Sequence[str], path: str):
  known = set(labels)
  for s in sentences:
    for i, tag in enumerate(s.tags):
      if tag not in known:
        raise DataError(f"{path}:{s.line + i}: tag {tag!r} is not one of the "
                        f"training labels {list(labels)}")


def encode_sentences(sentences: Sequence[Sentence], tokenizer, seq_length: int,
                     labels: Optional[Sequence[str]] = None
                     ) -> Dict[str, np.ndarray]:
  """Model inputs, one row per chunk of a sentence.

  Each word becomes its word pieces as inside a sentence
  (`Tokenizer.tokenize_words`; a word with none, e.g. only a zero-width
  character, becomes the unknown token); the label sits on the first piece,
  -1 on the others and on the family's start/end tokens and padding; `word_start` marks first pieces.
  Sentences longer than seq_length - 2 pieces are split at word boundaries
  into several rows; `sentence_id` and `first_word` say where each row belongs.
  """
  template = tokenizer.template
  unk = tokenizer.get_special_tokens_dict()["unknown_id"]
  flat = [w for s in sentences for w in s.words]
  pieces = tokenizer.tokenize_words(flat) if flat else []
  index = {t: i for i, t in enumerate(labels or [])}
  budget = seq_length - 2
  rows = dict(input_word_ids=[], input_mask=[], input_type_ids=[],
              label_ids=[], word_start=[], sentence_id=[], first_word=[])
  k = 0

  def emit(ids, label_ids, starts, sentence_id, first_word):
    word_ids, mask, types = template.pack([ids], seq_length)
    pad = seq_length - len(ids) - 1
    rows["input_word_ids"].append(word_ids)
    rows["input_mask"].append(mask)
    rows["input_type_ids"].append(types)
    rows["label_ids"].append([-1] + label_ids + [-1] * pad)
    rows["word_start"].append([0] + starts + [0] * pad)
    rows["sentence_id"].append(sentence_id)
    rows["first_word"].append(first_word)

  for sid, s in enumerate(sentences):
    ids, label_ids, starts, first = [], [], [], 0
    for w, word in enumerate(s.words):
      word_pieces = [int(x) for x in pieces[k]] or [unk]
      k += 1
      word_pieces = word_pieces[:budget]        # a single enormous word
      if len(ids) + len(word_pieces) > budget:
        emit(ids, label_ids, starts, sid, first)
        ids, label_ids, starts, first = [], [], [], w
      tag = index.get(s.tags[w], -1) if (labels and s.tags) else -1
      ids += word_pieces
      label_ids += [tag] + [-1] * (len(word_pieces) - 1)
      starts += [1] + [0] * (len(word_pieces) - 1)
    emit(ids, label_ids, starts, sid, first)
  return {k: np.asarray(v, np.int32) for k, v in rows.items()}


def word_predictions(sentences: Sequence[Sentence], features, predicted_ids,
                     labels: Sequence[str]) -> List[List[str]]:
  """Per sentence, the predicted tag of each word (from its first piece)."""
  out = [[] for _ in sentences]
  for row in range(len(predicted_ids)):
    starts = np.nonzero(features["word_start"][row])[0]
    out[int(features["sentence_id"][row])].extend(
        labels[int(p)] for p in np.asarray(predicted_ids[row])[starts])
  for s, tags in zip(sentences, out):
    if len(tags) != len(s.words):
      raise AssertionError(f"line {s.line}: {len(tags)} predictions for "
                           f"{len(s.words)} words")
  return out


def write_conll(path: str, sentences: Sequence[Sentence],
                predicted: Sequence[Sequence[str]]) -> None:
  """token, gold tag (if known) and predicted tag per line, as conlleval reads."""
  with open(path, "w", encoding="utf-8") as f:
    for s, tags in zip(sentences, predicted):
      for i, (word, tag) in enumerate(zip(s.words, tags)):
        gold = f"\t{s.tags[i]}" if s.tags else ""
        f.write(f"{word}{gold}\t{tag}\n")
      f.write("\n")
