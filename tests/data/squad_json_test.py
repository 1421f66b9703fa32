"""SQuAD json: one checked reader behind every path (issue 42, finding 6).

Each damaged file must give a one-line DataError naming the file (and the
line or JSON path) from every path that reads it: the examples, the article
titles of a split, and a task whose train and eval share the file (the
split) or read separate files. A repeated question id is refused instead of
being merged in the answers and metrics.
"""

import json

import pytest

from bert.data.errors import DataError
from bert.data.squad_eval import postprocess, squad_metrics
from bert.data.squad_examples import (SquadExample, article_titles,
                                      read_squad, split_articles)
from bert.tasks import QuestionAnsweringTask
from bert.tasks.configs import EncoderSource, FinetuningInputs, SquadData
from bert.validation import ConfigError
from conftest import shared_data, small_config, vocab


def real_squad(articles=2, paragraphs=1, questions=2):
  """The first articles of the real SQuAD 1.1 dev file, cut small."""
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    data = json.load(f)
  data["data"] = data["data"][:articles]
  for article in data["data"]:
    article["paragraphs"] = article["paragraphs"][:paragraphs]
    for paragraph in article["paragraphs"]:
      paragraph["qas"] = paragraph["qas"][:questions]
  return data


def write(tmp_path, name, data) -> str:
  path = tmp_path / name
  if isinstance(data, bytes):
    path.write_bytes(data)
  else:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
  return str(path)


def qa_task(train_file, eval_file):
  return QuestionAnsweringTask(
      data=SquadData(train_file=train_file, eval_file=eval_file,
                     train_fraction=0.5, max_query_length=8),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522),
          vocab_file=vocab(),
          lower_case=True),
      inputs=FinetuningInputs(seq_length=32, global_batch_size=2))


def every_path(bad: str, good: str):
  """(name, call) of each way the library reads the SQuAD file `bad`."""
  return [("read_squad", lambda: read_squad(bad)),
          ("read_squad(articles)", lambda: read_squad(bad, ["x"])),
          ("article_titles", lambda: article_titles(bad)),
          ("task, split of one file (train)",
           lambda: qa_task(bad, bad).examples("train")),
          ("task, split of one file (eval)",
           lambda: qa_task(bad, bad).examples("eval")),
          ("task, separate eval file", lambda: qa_task(good, bad).examples("eval"))]


def assert_named_everywhere(bad, good, pattern):
  for name, call in every_path(bad, good):
    with pytest.raises(DataError, match=pattern) as info:
      call()
    message = str(info.value)
    assert "\n" not in message, (name, message)
    assert message.startswith(bad), (name, message)


def test_missing_data_is_named_on_every_path(tmp_path):
  good = write(tmp_path, "good.json", real_squad())
  bad = write(tmp_path, "nodata.json", {"version": "1.1"})
  # 471c388: article_titles (the split) raised a raw KeyError: 'data'.
  assert_named_everywhere(bad, good, r"nodata.json: not a SQuAD json file")
  listed = write(tmp_path, "list.json", [1, 2])
  assert_named_everywhere(listed, good, r"list.json: not a SQuAD json file .*"
                          r"got a list")


def test_null_context_is_named_with_its_json_path(tmp_path):
  good = write(tmp_path, "good.json", real_squad())
  data = real_squad()
  data["data"][1]["paragraphs"][0]["context"] = None
  bad = write(tmp_path, "nullcontext.json", data)
  # 471c388: TypeError: 'NoneType' object is not subscriptable.
  assert_named_everywhere(bad, good, r"nullcontext.json: data\[1\]\.paragraphs"
                          r"\[0\]\.context: expected a string, got null")


def test_truncated_file_is_named_with_its_line(tmp_path):
  good = write(tmp_path, "good.json", real_squad())
  whole = open(good, "rb").read()
  bad = write(tmp_path, "cut.json", whole[:len(whole) // 2])
  line = whole[:len(whole) // 2].count(b"\n") + 1
  # 471c388: article_titles raised a raw json.JSONDecodeError.
  assert_named_everywhere(bad, good, rf"cut.json:{line}: not valid JSON")
  empty = write(tmp_path, "empty.json", b"")
  assert_named_everywhere(empty, good, r"empty.json: empty file")


def test_duplicate_question_ids_are_refused_naming_both(tmp_path):
  good = write(tmp_path, "good.json", real_squad())
  data = real_squad()
  first = data["data"][0]["paragraphs"][0]["qas"][1]["id"]
  data["data"][1]["paragraphs"][0]["qas"][0]["id"] = first
  bad = write(tmp_path, "dup.json", data)
  # 471c388: read without complaint; answers and metrics merged the two.
  assert_named_everywhere(
      bad, good, rf"dup.json: data\[1\]\.paragraphs\[0\]\.qas\[0\]: question "
      rf"id '{first}' is also the id of data\[0\]\.paragraphs\[0\]\.qas\[1\]")


def test_evaluation_refuses_examples_sharing_an_id():
  examples = [SquadExample("q", "Who?", "Ann met Bob.", [("Ann", 0)]),
              SquadExample("q", "Whom?", "Ann met Bob.", [("Bob", 8)])]
  # 471c388: EM 100 although one of the two answers is wrong.
  with pytest.raises(DataError, match=r"examples\[0\] and examples\[1\] share "
                     r"question id 'q'"):
    squad_metrics(examples, {"q": "Ann"})
  with pytest.raises(DataError, match="share question id 'q'"):
    postprocess(examples, [], None, None)


@pytest.mark.parametrize("where,value,message", [
    (("data", 0), "x", r"data\[0\]: expected an object, got a string"),
    (("data", 0, "paragraphs"), None, r"data\[0\]\.paragraphs: expected a "
     r"list, got null"),
    (("data", 0, "title"), 3, r"data\[0\]\.title: expected a string, got a "
     r"number \(3\)"),
    (("data", 0, "paragraphs", 0, "qas"), {}, r"qas: expected a list, got an "
     r"object"),
    (("data", 0, "paragraphs", 0, "qas", 0, "id"), 7, r"qas\[0\]\.id: expected "
     r"a string, got a number \(7\)"),
    (("data", 0, "paragraphs", 0, "qas", 0, "question"), ["q"],
     r"qas\[0\]\.question: expected a string, got a list"),
    (("data", 0, "paragraphs", 0, "qas", 0, "answers"), "Denver",
     r"qas\[0\]\.answers: expected a list, got a string"),
    (("data", 0, "paragraphs", 0, "qas", 0, "answers", 0, "answer_start"),
     "177", r"answers\[0\]\.answer_start: expected an integer, got a string"),
    (("data", 0, "paragraphs", 0, "qas", 0, "answers", 0, "answer_start"),
     177.0, r"answer_start: expected an integer, got a number \(177\.0\)"),
    (("data", 0, "paragraphs", 0, "qas", 0, "answers", 0, "answer_start"),
     -1, r"question 56be4db0acb8001400a502ec: answer 'Denver Broncos' is not "
     r"at answer_start -1"),
    (("data", 0, "paragraphs", 0, "qas", 0, "answers", 0, "text"), None,
     r"answers\[0\]\.text: expected a string, got null"),
    (("data", 0, "paragraphs", 0, "qas", 0, "is_impossible"), "no",
     r"qas\[0\]\.is_impossible: expected a boolean, got a string"),
], ids=["article", "paragraphs", "title", "qas", "id", "question", "answers",
        "answer_start-type", "answer_start-float", "answer_start-negative", "answer-text",
        "is_impossible"])
def test_each_field_is_checked_with_its_path(tmp_path, where, value, message):
  data = real_squad()
  node = data
  for key in where[:-1]:
    node = node[key]
  node[where[-1]] = value
  path = write(tmp_path, "f.json", data)
  with pytest.raises(DataError, match=r"^" + str(path) + ": .*" + message):
    read_squad(path)


def test_missing_fields_are_named(tmp_path):
  for key, pattern in [("context", r"data\[0\]\.paragraphs\[0\]: no 'context'"),
                       ("qas", r"data\[0\]\.paragraphs\[0\]: no 'qas'")]:
    data = real_squad()
    del data["data"][0]["paragraphs"][0][key]
    with pytest.raises(DataError, match=pattern):
      read_squad(write(tmp_path, "m.json", data))
  data = real_squad()
  del data["data"][0]["paragraphs"][0]["qas"][1]["id"]
  with pytest.raises(DataError, match=r"qas\[1\]: no 'id' field"):
    read_squad(write(tmp_path, "m.json", data))


def test_answer_and_id_errors_stay_on_one_line(tmp_path):
  data = real_squad()
  qa = data["data"][0]["paragraphs"][0]["qas"][0]
  qa["id"] = "a\nb"
  qa["answers"][0]["answer_start"] += 1
  with pytest.raises(DataError, match=r"question 'a\\nb': answer 'Denver "
                     r"Broncos' is not at answer_start 178") as info:
    read_squad(write(tmp_path, "nl.json", data))
  assert "\n" not in str(info.value)
  qa["answers"] = []
  with pytest.raises(DataError, match=r"question 'a\\nb' has no answer and "
                     r"is not marked is_impossible \(data\[0\]"):
    read_squad(write(tmp_path, "nl.json", data))
  qa["answers"] = [{"text": "", "answer_start": 3}]
  with pytest.raises(DataError, match=r"answers\[0\]\.text: question 'a\\nb': "
                     r"empty answer text"):
    read_squad(write(tmp_path, "nl.json", data))


def test_articles_sharing_a_title_stay_on_one_side_of_the_split(tmp_path):
  data = real_squad(articles=4)
  for article in data["data"]:
    article.pop("title")        # untitled: all share the title ""
  data["data"][0]["title"] = "A"
  path = write(tmp_path, "untitled.json", data)
  assert article_titles(path) == ["A", ""]
  for seed in range(8):
    train, held_out = split_articles(article_titles(path), 0.5, seed)
    assert not set(train) & set(held_out)
  # One article cannot be split: said in one line, not "no questions".
  one = write(tmp_path, "one.json", real_squad(articles=1))
  with pytest.raises(ConfigError, match=r"train_fraction=0.5 of the 1 "
                     r"article\(s\) of .*one.json leaves none for"):
    qa_task(one, one).examples("eval")


def test_the_real_dev_file_still_reads_whole():
  examples = read_squad(shared_data("squad", "dev-v1.1.json"))
  assert len(examples) == 10570
  assert len({e.qas_id for e in examples}) == 10570
