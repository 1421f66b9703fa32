"""The one reader of SQuAD json files (v1.1 and v2.0).

Every path that reads a SQuAD file (training and evaluation examples, the
article split of one file into train and held-out, predictions) goes through
`load_squad`, which checks every field it relies on before anything uses it.
A wrong file is a one-line `DataError` naming the file and the line (invalid
JSON) or the JSON path of the bad value (`data[3].paragraphs[0].qas[2].id`).
Question ids must be unique in the file: the answers, metrics and prediction
files are keyed by them, so a repeated id would silently merge two questions.
"""

import dataclasses
import json
from typing import Dict, List, Optional, Sequence, Tuple

from bert.io import read_text
from bert.data.errors import DataError


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question: str
  context: str
  answers: List[Tuple[str, int]]        # (text, answer_start in characters)
  is_impossible: bool = False
  title: str = ""


@dataclasses.dataclass
class SquadArticle:
  title: str
  examples: List[SquadExample]


def _kind(value) -> str:
  """A JSON value's type as the file's author would call it."""
  if value is None:
    return "null"
  if isinstance(value, bool):
    return "a boolean"
  if isinstance(value, (int, float)):
    return "a number"
  if isinstance(value, str):
    return "a string"
  return "a list" if isinstance(value, list) else "an object"


_EXPECTED = {str: "a string", int: "an integer", bool: "a boolean",
             list: "a list", dict: "an object"}


class _Checker:
  """Reads typed fields of one file, naming the file and JSON path of a bad
  one."""

  def __init__(self, path: str):
    self.path = path

  def fail(self, where: str, message: str):
    raise DataError(f"{self.path}: {where}: {message}")

  def field(self, obj: dict, where: str, key: str, kind: type, default=None,
            required: bool = True):
    """obj[key], which must be of `kind` (bool is never an int here)."""
    if key not in obj:
      if required:
        self.fail(where, f"no {key!r} field")
      return default
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
      got = _kind(value)
      if isinstance(value, (int, float)) and not isinstance(value, bool):
        got += f" ({str(value)[:20]})"
      self.fail(f"{where}.{key}", f"expected {_EXPECTED[kind]}, got {got}")
    return value

  def objects(self, obj: dict, where: str, key: str, required: bool = True
              ) -> List[Tuple[str, dict]]:
    """(JSON path, object) of each item of the list obj[key]."""
    items = self.field(obj, where, key, list, [], required)
    out = []
    for i, item in enumerate(items):
      at = f"{where}.{key}[{i}]" if where else f"{key}[{i}]"
      if not isinstance(item, dict):
        self.fail(at, f"expected an object, got {_kind(item)}")
      out.append((at, item))
    return out


def _parse(path: str):
  text = read_text(path)
  if not text.strip():
    raise DataError(f"{path}: empty file (expected a SQuAD json object)")
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column "
                    f"{e.colno})") from None
  except RecursionError:
    raise DataError(f"{path}: not valid JSON for SQuAD (nested too "
                    "deeply)") from None
  except ValueError as e:     # an integer of more than 4300 digits
    raise DataError(f"{path}: not valid JSON for SQuAD ({e})") from None


def load_squad(path: str) -> List[SquadArticle]:
  """The articles of a SQuAD json file, every field checked.

  `answer_start` must point at the answer's text; a question that is not
  `is_impossible` needs an answer; question ids are unique.
  """
  top = _parse(path)
  if not isinstance(top, dict) or "data" not in top:
    raise DataError(f"{path}: not a SQuAD json file (expected an object with "
                    f"a \"data\" list, got {_kind(top)}"
                    f"{' without one' if isinstance(top, dict) else ''})")
  check = _Checker(path)
  seen: Dict[str, str] = {}
  articles = []
  for at, article in check.objects(top, "", "data"):
    title = check.field(article, at, "title", str, "", required=False)
    examples = []
    for p_at, paragraph in check.objects(article, at, "paragraphs"):
      context = check.field(paragraph, p_at, "context", str)
      for q_at, qa in check.objects(paragraph, p_at, "qas"):
        example = _example(check, q_at, qa, context, title)
        if example.qas_id in seen:
          check.fail(q_at, f"question id {example.qas_id!r} is also the id "
                     f"of {seen[example.qas_id]} (ids must be unique)")
        seen[example.qas_id] = q_at
        examples.append(example)
    articles.append(SquadArticle(title, examples))
  if not seen:
    raise DataError(f"{path}: no questions")
  return articles


def _example(check: _Checker, at: str, qa: dict, context: str, title: str
             ) -> SquadExample:
  qas_id = check.field(qa, at, "id", str)
  if not qas_id:
    check.fail(f"{at}.id", "empty question id")
  # Plain in messages when it is plain (so a user can grep for it), quoted
  # when it holds a line break or other control character.
  shown = qas_id if qas_id.isprintable() else repr(qas_id)
  question = check.field(qa, at, "question", str)
  impossible = check.field(qa, at, "is_impossible", bool, False,
                           required=False)
  answers = []
  for a_at, answer in check.objects(qa, at, "answers", required=False):
    text = check.field(answer, a_at, "text", str)
    start = check.field(answer, a_at, "answer_start", int)
    there = context[max(start, 0):max(start, 0) + len(text)]
    if not text:
      check.fail(f"{a_at}.text", f"question {shown}: empty answer text")
    if start < 0 or there != text:
      # The file and question id first: what a user greps for.
      raise DataError(f"{check.path}: question {shown}: answer {text!r} is "
                      f"not at answer_start {start} (the context there reads "
                      f"{there!r}; {a_at})")
    answers.append((text, start))
  if not impossible and not answers:
    raise DataError(f"{check.path}: question {shown} has no answer and is "
                    f"not marked is_impossible ({at})")
  return SquadExample(qas_id, question, context, answers, impossible, title)


def read_squad(path: str, articles: Optional[Sequence[str]] = None
               ) -> List[SquadExample]:
  """Examples of a SQuAD json (v1.1 or v2.0), optionally of some articles
  (by title). The whole file is checked either way, so the two sides of an
  article split fail alike."""
  loaded = load_squad(path)
  wanted = set(articles) if articles is not None else None
  examples = [e for a in loaded if wanted is None or a.title in wanted
              for e in a.examples]
  if not examples:
    raise DataError(f"{path}: no questions in the {len(wanted)} selected "
                    f"article(s) of {len(article_titles(path, loaded))}")
  return examples


def article_titles(path: str, loaded: Optional[List[SquadArticle]] = None
                   ) -> List[str]:
  """The distinct article titles, in file order (articles that share a
  title, or have none, stay together on one side of a split)."""
  loaded = load_squad(path) if loaded is None else loaded
  return list(dict.fromkeys(a.title for a in loaded))
