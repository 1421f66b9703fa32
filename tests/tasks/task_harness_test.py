"""Every task through the task-level harness (tests/harness.py,
`run_task_test`): stats against their denominators, a resumed run against
the uninterrupted one, Keras `fit` against the custom loop, the task's
predictions against Keras `predict`, and the serving export against both,
each on a tiny model and tiny generated data."""

import csv
import dataclasses
import json
import os

import numpy as np
import pytest

from bert import data as bert_data
from bert.tasks import (DistillationTask, MultipleChoiceTask,
                        QuestionAnsweringTask, TokenClassificationTask)
from bert.tasks.configs import (AnswerConfig, MultipleChoiceData, SquadData,
                                TaggingData)
from conftest import PRETRAIN_PRED, PRETRAIN_SEQ, pretraining_task, vocab
import harness
from _tasks import (CLASSIFIER, SMALL, classification_teacher, encoder_source,
                    make_task, small_encoder, write_entities_conll)

def _split_files(write, folder, suffix, sizes):
  """The train, eval and predict files, `write(path, rows, seed)` of
  `sizes` rows: the file arguments of the task's data config."""
  splits = ("train", "eval", "predict")
  return {f"{split}_file": write(folder / f"{split}{suffix}", n, seed)
          for seed, (split, n) in enumerate(zip(splits, sizes))}


def _strings(tensor):
  return [t.decode("utf-8") for t in np.asarray(tensor).reshape(-1)]


# Each test trains, predicts and exports: several seconds.
pytestmark = pytest.mark.heavy


# ---------------------------------------------------------- classification
def test_classification(tmp_path):
  harness.run_task_test(lambda: make_task(tmp_path, inputs=SMALL),
                        tmp_path / "runs", answers=CLASSIFIER)


REGRESSOR = dict(
    CLASSIFIER, keras_answers=lambda out: list(out["scores"][:, None]),
    served_answers=lambda out: list(out["score"].numpy()[:, None]))


def test_regression(tmp_path):
  # Resuming is classification's pipeline and loop (test_classification).
  harness.run_task_test(
      lambda: make_task(tmp_path, regression=True, inputs=SMALL),
      tmp_path / "runs", answers=REGRESSOR,
      checks=("stats", "fit", "predict", "export"))


# ---------------------------------------------------- token classification
def _tagged_file(task, model_dir):
  """predictions.conll: per sentence, the predicted tag (last column) of
  each word."""
  del task
  with open(os.path.join(model_dir, "predictions.conll"), encoding="utf-8") as f:
    blocks = f.read().strip("\n").split("\n\n")
  return [[line.split("\t")[-1] for line in b.split("\n")] for b in blocks]


TAGGER = dict(
    read_predictions=_tagged_file,
    raw_inputs=lambda task: [s.words for s in task.sentences("predict")],
    keras_answers=lambda out: out["tags"],
    served_inputs=lambda sentences: dict(text=[" ".join(s) for s in sentences]),
    # Tags padded with "" past each sentence's words.
    served_answers=lambda out: [
        [t.decode() for t, w in zip(tags, words) if w]
        for tags, words in zip(out["tags"].numpy(), out["words"].numpy())])


def test_token_classification(tmp_path):
  files = _split_files(write_entities_conll, tmp_path, ".conll", (64, 16, 12))

  def make():
    return TokenClassificationTask(data=TaggingData(**files),
                                   encoder=small_encoder(), inputs=SMALL)

  harness.run_task_test(make, tmp_path / "runs", answers=TAGGER)


# ------------------------------------------------------ question answering
WORDS = ("the river runs past an old mill where people from the town meet "
         "in summer to swim fish and talk about the weather").split()


def _write_squad(path, n, seed):
  """SQuAD 1.1 json: contexts of 20 to 60 words (so some need two windows
  of 48 pieces), one question each, whose answer is a span of them."""
  rng = np.random.RandomState(seed)
  paragraphs = []
  for i in range(n):
    words = list(rng.choice(WORDS, rng.randint(20, 60)))
    start = rng.randint(0, len(words) - 3)
    answer = " ".join(words[start:start + 2])
    context = " ".join(words)
    offset = len(" ".join(words[:start])) + (1 if start else 0)
    question = "where does " + " ".join(rng.choice(WORDS, 4)) + " go"
    paragraphs.append(dict(context=context, qas=[dict(
        id=f"q{i}", question=question,
        answers=[dict(text=answer, answer_start=offset)])]))
  with open(path, "w", encoding="utf-8") as f:
    json.dump(dict(version="1.1", data=[dict(title=f"a{seed}",
                                             paragraphs=paragraphs)]), f)
  return str(path)


SPANS = dict(
    read_predictions=lambda task, model_dir: [
        json.load(open(os.path.join(model_dir, "predictions.json"),
                       encoding="utf-8"))[e.qas_id]
        for e in task.examples("predict")],
    raw_inputs=lambda task: ([e.question for e in task.examples("predict")],
                             [e.context for e in task.examples("predict")]),
    keras_answers=lambda out: out["answers"],
    served_inputs=lambda x: dict(question=x[0], context=x[1]),
    served_answers=lambda out: _strings(out["answer"]))


def test_question_answering(tmp_path):
  files = _split_files(_write_squad, tmp_path, ".json", (48, 12, 12))

  def make():
    return QuestionAnsweringTask(
        data=SquadData(**files, doc_stride=16, max_query_length=12),
        answers=AnswerConfig(max_answer_length=8),
        encoder=encoder_source(),
        inputs=dataclasses.replace(SMALL, seq_length=48))

  harness.run_task_test(make, tmp_path / "runs", answers=SPANS)


# --------------------------------------------------------- multiple choice
def _write_swag(path, n, seed):
  rng = np.random.RandomState(seed)
  words = "the man walks to a car and opens the door slowly".split()
  with open(path, "w", newline="", encoding="utf-8") as f:
    out = csv.writer(f)
    out.writerow(["video-id", "fold-ind", "startphrase", "sent1", "sent2",
                  "gold-source", "ending0", "ending1", "ending2", "ending3",
                  "label"])
    for i in range(n):
      label = rng.randint(4)
      endings = [" ".join(rng.choice(words, 4)) + (" yes" if j == label else " no")
                 for j in range(4)]
      out.writerow([f"v{i}", "0", "", " ".join(rng.choice(words, 6)), "He",
                    "gold"] + endings + [str(label)])
  return str(path)


def _choices_file(task, model_dir):
  del task
  with open(os.path.join(model_dir, "predictions.csv"), encoding="utf-8") as f:
    rows = list(csv.reader(f))[1:]
  return [np.array([float(v) for v in row[1:-1]]) for row in rows]


CHOICES = dict(
    read_predictions=_choices_file,
    # The task puts each example's `start` before every ending.
    raw_inputs=lambda task: (
        [e.context for e in task.examples("predict")],
        [[f"{e.start} {ending}".strip() for ending in e.endings]
         for e in task.examples("predict")]),
    keras_answers=lambda out: list(out["probabilities"]))


def test_multiple_choice(tmp_path):
  files = _split_files(_write_swag, tmp_path, ".csv", (48, 16, 12))

  def make():
    return MultipleChoiceTask(
        data=MultipleChoiceData(**files),
        encoder=small_encoder(),
        inputs=dataclasses.replace(SMALL, seq_length=24))

  # No serving export: multiple-choice models have none.
  harness.run_task_test(make, tmp_path / "runs", answers=CHOICES,
                        checks=("stats", "determinism", "fit", "predict"))


# ------------------------------------------------------------ pre-training
def _write_records(folder):
  """Pre-training records of a generated corpus (40 documents of 4 to 8
  sentences) with MiniLM's vocab: 2 shards."""
  rng = np.random.RandomState(0)
  corpus = os.path.join(str(folder), "corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    for _ in range(40):
      for _ in range(rng.randint(4, 9)):
        f.write(" ".join(rng.choice(WORDS, rng.randint(5, 15))) + " .\n")
      f.write("\n")
  records = os.path.join(str(folder), "records")
  bert_data.create_pretraining_data(
      corpus, records, vocab(),
      bert_data.PretrainingDataConfig(seq_length=PRETRAIN_SEQ,
                                      max_predictions_per_seq=PRETRAIN_PRED,
                                      dupe_factor=2),
      num_shards=2, log=lambda *_: None)
  return os.path.join(records, "*.tfrecord")


def test_pretraining(tmp_path):
  records = _write_records(tmp_path)
  # No predictions and no serving export: pre-training has neither.
  harness.run_task_test(
      lambda: pretraining_task(records, dropout=0.1), tmp_path / "runs",
      checks=("stats", "determinism", "fit"),
      targets=lambda f: {k: f[k] for k in ("masked_lm_ids", "masked_lm_weights",
                                           "next_sentence_labels")})


# ------------------------------------------------------------ distillation
def test_distillation(tmp_path):
  teacher = classification_teacher(tmp_path / "teacher")
  # Its loop's step (soft targets, the student's own encoder) is checked;
  # Keras `fit(teacher=...)` takes raw text (tests/tasks/distillation_test),
  # and its predictions and export are its student's, a classifier's
  # (test_classification).
  harness.run_task_test(
      lambda: DistillationTask(teacher=teacher, student="teacher_layers:0,2",
                               inputs=SMALL),
      tmp_path / "runs", checks=("stats", "determinism"))
