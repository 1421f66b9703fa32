"""The one check of what users pass to the task models' Keras API.

`fit`, `evaluate` and `predict` on raw inputs (and the preprocessors'
`encode`) run `x` and `y` through their preprocessor's `check`, made of the
functions below, before anything is tokenized: a bad item stops there with
one line naming the argument, the index of the item and what it is
(`y[2] = 0.5 is not a class id: ids are integers in [0, 2)`), never as a
TensorFlow trace from inside a step, a label silently truncated or a
prediction for the wrong row. Plain Python over the items, once per call:
no step of `fit` runs a check.

Errors: `DataError` for a bad value or a count that does not match (the
argument and index stand where a file and line would); its subclass
`InputTypeError`, also a `TypeError`, for an item of the wrong type.
"""

import itertools
import numbers
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert.data.errors import DataError


class InputTypeError(DataError, TypeError):
  """An argument of the Keras API, or an item of it, has the wrong type."""


def show(value) -> str:
  """`value` for a message: its repr, cut short; containers by their type."""
  if isinstance(value, (str, bytes, numbers.Number, type(None))):
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return text if len(text) <= 40 else text[:37] + "..."
  return f"a {type(value).__name__}"


def _looks_raw(item) -> bool:
  if isinstance(item, (list, tuple)) and item:   # a sentence of words
    item = item[0]
  return isinstance(item, (str, bytes))


_END = object()


def peel(x):
  """(raw, x): whether `x` is raw input for a preprocessor (a list, tuple
  or NumPy array; a collection or generator of texts) or Keras' own (a
  dict of arrays, a tf.data.Dataset, a generator of batches). A generator
  of texts comes back as a list; any other with its first item put back."""
  if isinstance(x, (str, bytes, list, tuple, np.ndarray)):
    return True, x
  if x is None or isinstance(x, (dict, tf.data.Dataset, tf.Tensor,
                                 tf_keras.utils.Sequence)):
    return False, x
  if hasattr(x, "__next__"):                                # an iterator
    first = next(x, _END)
    if first is _END:
      return True, []
    if _looks_raw(first):
      return True, [first] + list(x)
    return False, itertools.chain([first], x)
  try:            # another collection of texts (e.g. a pandas Series)
    return _looks_raw(next(iter(x))), x
  except (TypeError, StopIteration):
    return False, x


def items(value, name: str, what: str) -> list:
  """`value`, a collection of items, as a list; a lone string, a dict or a
  non-collection is an InputTypeError."""
  if isinstance(value, (str, bytes)):
    raise InputTypeError(f"{name} is one string, {show(value)}; give {what}")
  if isinstance(value, dict) or not hasattr(value, "__iter__"):
    raise InputTypeError(f"{name} is {show(value)}; give {what}")
  return list(value)


def texts(values, name: str, allow_bytes: bool = True) -> list:
  """`values` as a list of texts: str (or bytes, read as UTF-8); the first
  item that is no text (None, a number, a list) or not valid Unicode is
  named."""
  values = items(values, name, "a list of strings")
  kinds = (str, bytes) if allow_bytes else str
  for i, text in enumerate(values):
    if not isinstance(text, kinds):
      raise InputTypeError(f"{name}[{i}] is {show(text)}, not a string")
    if isinstance(text, str) and not text.isascii():
      try:
        text.encode("utf-8")
      except UnicodeEncodeError as e:
        raise DataError(f"{name}[{i}] is not valid Unicode: a lone surrogate "
                        f"{text[e.start]!r} at character {e.start}") from None
  return values


def not_empty(values, name: str, what: str) -> None:
  if not len(values):
    raise DataError(f"{name} is empty: give at least one {what}")


def same_count(n: int, of: str, m: int, per: str) -> None:
  """`n` items of `of` (e.g. "y: 3 labels") for `m` of `per`."""
  if n != m:
    raise DataError(f"{of.format(n)} for {m} {per}")


def label_array(y, name: str) -> np.ndarray:
  """`y`, one label per example, as a 1-D array: numeric when every label
  is a number (Keras' [n, 1] taken as [n]), else of Python objects (so a
  number among names stays a number)."""
  if isinstance(y, (str, bytes, dict)) or not hasattr(y, "__len__"):
    raise InputTypeError(f"{name} is {show(y)}; give one label per example "
                         "(a list or NumPy array)")
  try:
    array = np.asarray(y)
  except ValueError:                 # ragged: items of different lengths
    array = None
  if array is not None and array.dtype.kind in "biuf":
    if array.ndim == 2 and array.shape[1] == 1:
      array = array[:, 0]
    if array.ndim != 1:
      raise DataError(f"{name} has shape {array.shape}; give one label per "
                      "example")
    return array
  array = np.empty(len(y), dtype=object)
  for i, value in enumerate(y):
    array[i] = value
  return array


def _first(bad: np.ndarray) -> int:
  return int(np.flatnonzero(bad)[0])


def class_ids(y, name: str, num_classes: Optional[int],
              labels: Optional[Sequence[str]] = None) -> np.ndarray:
  """int32 class ids of `y`: ids in [0, num_classes), or names in `labels`
  (None: no names). Non-integral numbers are refused, never truncated."""
  array = label_array(y, name)
  span = f"in [0, {num_classes})" if num_classes else ">= 0"
  if array.dtype.kind in "biuf":
    values = array.astype(np.float64)
    bad = ~np.isfinite(values) | (values != np.round(values))
    if bad.any():
      i = _first(bad)
      raise DataError(f"{name}[{i}] = {show(array[i])} is not a class id: ids "
                      f"are integers {span}")
    bad = (values < 0) | (values >= num_classes if num_classes else False)
    if bad.any():
      i = _first(bad)
      raise DataError(f"{name}[{i}] = {show(array[i])} is out of range: class "
                      f"ids are integers {span}")
    return values.astype(np.int32)
  index = {label: k for k, label in enumerate(labels or ())}
  out = np.empty(len(array), np.int32)
  unknown = []
  for i, value in enumerate(array):
    if isinstance(value, str):
      if not labels:
        raise DataError(f"{name}[{i}] = {show(value)}: string labels need the "
                        "class names: from_pretrained(..., labels=[...])")
      if value not in index:
        unknown.append((i, value))
        continue
      out[i] = index[value]
    elif isinstance(value, numbers.Real):
      out[i] = _one_id(value, f"{name}[{i}]", num_classes, span)
    else:
      raise InputTypeError(f"{name}[{i}] is {show(value)}, not a class id or "
                           "name")
  if unknown:
    names = sorted({v for _, v in unknown})
    raise DataError(f"{name}: labels {names[:5]} are not among {list(labels)} "
                    f"(first: {name}[{unknown[0][0]}])")
  return out


def _one_id(value, name, num_classes, span) -> int:
  if not (np.isfinite(value) and value == int(value)):
    raise DataError(f"{name} = {show(value)} is not a class id: ids are "
                    f"integers {span}")
  if value < 0 or (num_classes and value >= num_classes):
    raise DataError(f"{name} = {show(value)} is out of range: class ids are "
                    f"integers {span}")
  return int(value)


def regression_targets(y, name: str) -> np.ndarray:
  """float32 regression targets: finite numbers."""
  array = label_array(y, name)
  if array.dtype.kind not in "biuf":
    for i, value in enumerate(array):
      if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputTypeError(f"{name}[{i}] is {show(value)}, not a number (a "
                             "regression target: the model has num_classes=1)")
  values = array.astype(np.float64)
  bad = ~np.isfinite(values)
  if bad.any():
    i = _first(bad)
    raise DataError(f"{name}[{i}] = {show(values[i])} is not a finite number")
  return values.astype(np.float32)


def ids_in_range(y, name: str, low: int, high: int) -> None:
  """Integer ids of any shape (e.g. per-token labels) in [low, high)."""
  array = np.asarray(y)
  if array.dtype.kind not in "biuf":
    raise InputTypeError(f"{name} holds {array.dtype} values, not integer ids")
  values = array.astype(np.float64)
  bad = ~np.isfinite(values) | (values != np.round(values)) | (values < low) | (
      values >= high)
  if bad.any():
    at = np.unravel_index(_first(bad.reshape(-1)), array.shape)
    where = ", ".join(str(int(k)) for k in at)
    raise DataError(f"{name}[{where}] = {show(array[at])} is not an id in "
                    f"[{low}, {high})")


def text_columns(x) -> List[list]:
  """Raw text input as 1 or 2 columns: a list of texts `x`, or an (a, b)
  pair of two lists (`x[0]`, `x[1]`) of the same length."""
  if isinstance(x, tuple) and len(x) == 2:
    if all(isinstance(t, (str, bytes)) for t in x):
      raise InputTypeError("x is a pair of strings: give a list of texts, or "
                           "an (a, b) pair of two lists of texts")
    a, b = texts(x[0], "x[0]"), texts(x[1], "x[1]")
    same_count(len(b), "x: {} second texts (x[1])", len(a),
               "first texts (x[0])")
    not_empty(a, "x", "text")
    return [a, b]
  if isinstance(x, (str, bytes)):
    raise InputTypeError("x is one string: give a list of strings (or an "
                         "(a, b) pair of lists)")
  column = texts(x, "x")
  not_empty(column, "x", "text")
  return [column]


def tagged_sentences(x, y, tags: Sequence[str]):
  """(words per sentence, tags per sentence or None): `x` a list of
  sentences, each a list of words; `y` one list of tag names per sentence,
  one tag per word."""
  x = items(x, "x", "a list of sentences, each a list of words")
  not_empty(x, "x", "sentence (a list of words)")
  words = []
  for i, sentence in enumerate(x):
    if isinstance(sentence, (str, bytes)):
      raise InputTypeError(f"x[{i}] is one string, {show(sentence)}: give each "
                           "sentence as a list of words (e.g. text.split())")
    words.append(texts(sentence, f"x[{i}]"))
  if y is None:
    return words, None
  y = items(y, "y", "one list of tags per sentence")
  same_count(len(y), "y: {} tag lists", len(words), "sentences in x")
  known, out = set(tags), []
  for i, (sentence_tags, sentence) in enumerate(zip(y, words)):
    sentence_tags = items(sentence_tags, f"y[{i}]", "a list of tags, one per "
                          "word")
    same_count(len(sentence_tags), f"y[{i}]: {{}} tags", len(sentence),
               f"words in x[{i}]")
    for j, tag in enumerate(sentence_tags):
      if not isinstance(tag, str) or tag not in known:
        raise DataError(f"y[{i}][{j}] = {show(tag)} is not one of the tags "
                        f"{list(tags)}")
    out.append(sentence_tags)
  return words, out


def questions_and_answers(x, y):
  """((questions, contexts), answers or None): `y` one answer per question,
  `(text, answer_start)` (or a dict of them; None: no answer), its start in
  characters of the context."""
  if not (isinstance(x, tuple) and len(x) == 2):
    raise InputTypeError(f"x is {show(x)}: give (questions, contexts), a "
                         "tuple of two lists of strings")
  questions = texts(x[0], "x[0]", allow_bytes=False)
  contexts = texts(x[1], "x[1]", allow_bytes=False)
  same_count(len(contexts), "x: {} contexts (x[1])", len(questions),
             "questions (x[0])")
  not_empty(questions, "x", "question")
  if y is None:
    return (questions, contexts), None
  y = items(y, "y", "one answer per question: (text, answer_start) or None")
  same_count(len(y), "y: {} answers", len(questions), "questions in x")
  return (questions, contexts), [
      _answer(a, f"y[{i}]", contexts[i], f"x[1][{i}]") for i, a in enumerate(y)]


def _answer(value, name: str, context: str, where: str):
  if value is None:
    return None
  if isinstance(value, dict):
    missing = [k for k in ("text", "answer_start") if k not in value]
    if missing:
      raise InputTypeError(f"{name} has no {missing[0]!r}: give "
                           "{'text': ..., 'answer_start': ...}")
    text, start = value["text"], value["answer_start"]
  elif isinstance(value, (list, tuple)) and len(value) == 2:
    text, start = value
  else:
    raise InputTypeError(f"{name} is {show(value)}: give (text, answer_start), "
                         "a dict of them, or None for no answer")
  if not isinstance(text, str) or not text:
    raise InputTypeError(f"{name}: the answer text is {show(text)}, not a "
                         "non-empty string (None: no answer)")
  if isinstance(start, bool) or not isinstance(start, numbers.Integral):
    raise InputTypeError(f"{name}: answer_start is {show(start)}, not an "
                         "integer")
  if start < 0 or context[start:start + len(text)] != text:
    raise DataError(f"{name}: {text!r} is not at character {start} of its "
                    f"context ({where})")
  return text, int(start)


def contexts_and_endings(x, y):
  """((contexts, endings), label ids or None): the same number of endings
  for every context; `y` the index of the right one."""
  if not (isinstance(x, tuple) and len(x) == 2):
    raise InputTypeError(f"x is {show(x)}: give (contexts, endings), a list "
                         "of contexts and per context a list of its endings")
  contexts = texts(x[0], "x[0]")
  endings = items(x[1], "x[1]", "one list of endings per context")
  same_count(len(endings), "x: {} ending lists (x[1])", len(contexts),
             "contexts (x[0])")
  not_empty(contexts, "x", "context")
  endings = [texts(e, f"x[1][{i}]") for i, e in enumerate(endings)]
  count = len(endings[0])
  not_empty(endings[0], "x[1][0]", "ending")
  for i, e in enumerate(endings):
    if len(e) != count:
      raise DataError(f"x[1][{i}] has {len(e)} endings but x[1][0] has "
                      f"{count}: every context needs the same number of "
                      "endings")
  if y is not None:
    y = class_ids(y, "y", count)
    same_count(len(y), "y: {} labels", len(contexts), "contexts in x")
  return (contexts, endings), y
