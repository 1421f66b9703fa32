"""The three ways to predict give one answer: Keras `predict` on raw inputs,
the task's `predict` (what `bert-train --mode=predict` writes) and the
exported serving model, on inputs longer than `seq_length` (a sentence over
several rows, an answer past the first window, a text cut short)."""

import json
import os

import numpy as np
import tf_keras

from bert import export
from bert.data import ner_data
from bert.tasks import (ClassificationTask, QuestionAnsweringTask,
                        TokenClassificationTask)
from bert.tasks.configs import (AnswerConfig, ClassificationData,
                                FinetuningInputs, SquadData, TaggingData)
from _tasks import encoder_source

WORDS = ["we", "went", "to", "see", "the", "xylophonists", "show", "in",
         "paris", "today", "unbelievably", "good"]


def served(model, path, **strings):
  model.export(path)
  return {k: v.numpy() for k, v in export.load_serving(path)(**strings).items()}


def decoded(rows):
  return [[t.decode("utf-8") for t in row] for row in rows]


# ------------------------------------------------------------------ tagger
def test_tags_of_a_sentence_longer_than_a_row_agree(tmp_path):
  rng = np.random.RandomState(0)
  sentences = [list(rng.choice(WORDS, n)) for n in (3, 25, 7, 40, 1)]
  path = str(tmp_path / "words.conll")
  with open(path, "w", encoding="utf-8") as f:
    for words in sentences:
      f.writelines(f"{w}\t{'B-loc' if w == 'paris' else 'O'}\n" for w in words)
      f.write("\n")
  seq = 16
  task = TokenClassificationTask(
      data=TaggingData(train_file=path, eval_file=path, predict_file=path),
      encoder=encoder_source(), inputs=FinetuningInputs(seq_length=seq))
  rows = ner_data.encode_sentences(task.sentences("predict"), task.tokenizer,
                                   seq)["sentence_id"]
  assert np.bincount(rows).max() >= 3          # a sentence over 3 rows
  tf_keras.utils.set_random_seed(0)
  model = task.build_model()
  model.attach_preprocessor(task.preprocessor())
  written = open(task.predict(model, str(tmp_path)), encoding="utf-8").read()
  by_task = [[line.split("\t")[-1] for line in block.splitlines()]
             for block in written.split("\n\n") if block.strip()]
  by_keras = model.predict(sentences)["tags"]
  out = served(model, str(tmp_path / "served"),
               text=[" ".join(s) for s in sentences])
  assert by_task == by_keras
  for words, tags, row, served_words in zip(sentences, by_keras,
                                            decoded(out["tags"]),
                                            decoded(out["words"])):
    assert served_words[:len(words)] == words
    assert row == tags + [""] * (len(row) - len(tags))
  # Not vacuous: the tags differ from word to word.
  assert len({t for tags in by_keras for t in tags}) == 2


# ------------------------------------------------------------------- spans
def write_squad(path, rng):
  """Articles whose contexts need several windows of 64 pieces."""
  data = []
  for a in range(4):
    context = " ".join(" ".join(rng.choice(WORDS, 12)) + "."
                       for _ in range(6))
    qas = [dict(id=f"{a}-{q}", question=" ".join(rng.choice(WORDS, 4)) + "?",
                answers=[dict(text=context[:3], answer_start=0)])
           for q in range(3)]
    data.append(dict(title=f"t{a}", paragraphs=[dict(context=context,
                                                     qas=qas)]))
  with open(path, "w", encoding="utf-8") as f:
    json.dump(dict(version="1.1", data=data), f)
  return path


def squad_task(path, threshold):
  return QuestionAnsweringTask(
      data=SquadData(train_file=path, eval_file=path, predict_file=path,
                     train_fraction=0.5, version_2=True, doc_stride=16,
                     max_query_length=16),
      answers=AnswerConfig(null_score_diff_threshold=threshold),
      encoder=encoder_source(), inputs=FinetuningInputs(seq_length=64))


def test_answers_past_the_first_window_and_null_answers_agree(tmp_path):
  path = write_squad(str(tmp_path / "squad.json"), np.random.RandomState(1))
  task = squad_task(path, 0.0)
  tf_keras.utils.set_random_seed(0)
  model = task.build_model()
  model.attach_preprocessor(task.preprocessor())
  task.predict(model, str(tmp_path))
  null_odds = json.loads((tmp_path / "null_odds.json").read_text())
  # Half the questions answer "" (SQuAD 2.0's null answer).
  task = squad_task(path, float(np.median(list(null_odds.values()))))
  model.attach_preprocessor(task.preprocessor())
  task.predict(model, str(tmp_path))
  by_task = json.loads((tmp_path / "predictions.json").read_text())
  examples = task.examples("predict")
  questions = [e.question for e in examples]
  contexts = [e.context for e in examples]
  by_keras = model.predict((questions, contexts))
  out = served(model, str(tmp_path / "served"), question=questions,
               context=contexts)
  answers = [by_task[e.qas_id] for e in examples]
  assert by_keras["answers"] == answers
  assert decoded([out["answer"]])[0] == answers
  assert 0 < answers.count("") < len(answers)
  # Some answers lie past the end of their question's first window.
  first_window_end = {}
  for m in task.meta("predict"):
    first_window_end.setdefault(m["example"],
                                max(e for _, e in m["char_spans"].values()))
  assert any(start is not None and start >= first_window_end[i]
             for i, start in enumerate(by_keras["start"]))
  for e, start, end, answer in zip(examples, by_keras["start"],
                                   by_keras["end"], answers):
    assert e.context[start:end] == answer if answer else start is None


# ---------------------------------------------------------- classification
def test_labels_of_texts_longer_than_a_row_agree(tmp_path):
  rng = np.random.RandomState(2)
  texts = [" ".join(rng.choice(WORDS, n)) for n in (4, 30, 9, 50, 2, 40)]
  path = str(tmp_path / "texts.tsv")
  with open(path, "w", encoding="utf-8") as f:
    f.write("text\tlabel\n" + "".join(f"{t}\t{['neg', 'pos'][i % 2]}\n"
                                      for i, t in enumerate(texts)))
  task = ClassificationTask(
      data=ClassificationData(train_file=path, eval_file=path,
                              predict_file=path, text_a_column="text",
                              label_column="label", labels=("neg", "pos")),
      encoder=encoder_source(), inputs=FinetuningInputs(seq_length=16))
  assert max(task.features("predict")["input_mask"].sum(1)) == 16  # cut
  tf_keras.utils.set_random_seed(0)
  model = task.build_model()
  model.attach_preprocessor(task.preprocessor())
  written = open(task.predict(model, str(tmp_path)), encoding="utf-8").read()
  by_task = np.array([[float(v) for v in line.split("\t")]
                      for line in written.splitlines()])
  by_keras = model.predict(texts)
  out = served(model, str(tmp_path / "served"), text=texts)
  for probabilities in (by_keras["probabilities"], out["probabilities"]):
    np.testing.assert_allclose(probabilities, by_task, rtol=0, atol=1e-5)
  labels = [["neg", "pos"][i] for i in by_task.argmax(-1)]
  assert list(by_keras["labels"]) == labels
  assert decoded([out["label"]])[0] == labels
  # Not vacuous: the texts' probabilities differ (rows are not mixed up).
  assert np.ptp(by_task[:, 0]) > 1e-4
