"""What several test modules build tasks from: generated data, small
encoders with MiniLM's vocab, ready tasks and untrained teacher runs for
distillation (imported, never collected)."""

import dataclasses
import os

import numpy as np

from bert.tasks import ClassificationTask, TokenClassificationTask
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs, ScheduleConfig, TaggingData)
from conftest import small_config, vocab, write_run


# ------------------------------------------------ sentiment classification
WORDS = ("the movie was a story of people and places with some music and "
         "long scenes").split()


def write_data(folder, n, seed, regression=False):
  rng = np.random.RandomState(seed)
  rows = ["text\tlabel"]
  for _ in range(n):
    words = list(rng.choice(WORDS, 8))
    good = rng.rand() < 0.5
    words.insert(rng.randint(0, 8), "good" if good else "bad")
    label = (f"{4.0 if good else 1.0}" if regression
             else ("pos" if good else "neg"))
    rows.append(" ".join(words) + "\t" + label)
  path = os.path.join(folder, f"data{seed}.tsv")
  with open(path, "w") as f:
    f.write("\n".join(rows) + "\n")
  return path


def small_encoder():
  """A small random encoder (positions for seq_length 32) with MiniLM's vocab."""
  return EncoderSource(
      bert_config=small_config(vocab_size=30522, max_position_embeddings=32),
      vocab_file=vocab(), lower_case=True)


# The batching of `make_task`; a variant: dataclasses.replace(INPUTS, ...).
INPUTS = FinetuningInputs(seq_length=32, global_batch_size=16, eval_batch_size=32)


# The batching of the task-harness runs (tests/harness.py `run_task_test`):
# 4 steps of 8 rows.
SMALL = dataclasses.replace(INPUTS, global_batch_size=8, eval_batch_size=16)


def make_task(tmp_path, regression=False, epochs=4, labels=("neg", "pos"),
              task_class=ClassificationTask, inputs=INPUTS, head=None):
  data = ClassificationData(
      train_file=write_data(str(tmp_path), 256, 0, regression),
      eval_file=write_data(str(tmp_path), 96, 1, regression),
      predict_file=write_data(str(tmp_path), 40, 2, regression),
      text_a_column="text", label_column="label",
      labels=None if regression else tuple(labels), regression=regression)
  return task_class(data=data, encoder=small_encoder(), inputs=inputs,
                    head=head, schedule=ScheduleConfig(num_train_epochs=epochs))


# What a classifier answers (tests/harness.py `run_task_test`): per example,
# the class probabilities of the task's test_results.tsv, of Keras `predict`
# and of the serving export.
def _probabilities_file(task, model_dir):
  del task
  with open(os.path.join(model_dir, "test_results.tsv"), encoding="utf-8") as f:
    return [np.array([float(v) for v in line.split("\t")]) for line in f]


CLASSIFIER = dict(
    read_predictions=_probabilities_file,
    raw_inputs=lambda task: [e.text_a for e in task.read_examples("predict")],
    keras_answers=lambda out: list(out["probabilities"]),
    served_inputs=lambda texts: dict(text=texts),
    served_answers=lambda out: list(out["probabilities"].numpy()))


# ------------------------------------------------------------------- NER
SEQ = 128


def write_conll(path, n, seed):
  """Sentences of 1 to 60 words, so rows fall into several buckets."""
  rng = np.random.RandomState(seed)
  words = ["we", "went", "to", "see", "the", "show", "in", "paris", "today"]
  lines = []
  for _ in range(n):
    for _ in range(int(rng.choice([rng.randint(1, 10), rng.randint(20, 60)]))):
      word = str(rng.choice(words))
      lines.append(f"{word}\t{'B-location' if word == 'paris' else 'O'}")
    lines.append("")
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def write_entities_conll(path, n, seed):
  """Sentences of 3 to 7 words or names: locations ("paris"), persons
  ("john smith") and O words; each fits one row of 32 pieces."""
  rng = np.random.RandomState(seed)
  lines = []
  for _ in range(n):
    for _ in range(rng.randint(3, 8)):
      if rng.rand() < 0.3:
        lines += ["paris\tB-location"] if rng.rand() < 0.5 else [
            "john\tB-person", "smith\tI-person"]
      else:
        lines.append(f"{rng.choice(['we', 'went', 'to', 'see', 'the', 'show'])}\tO")
    lines.append("")
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def encoder_source(**config_overrides):
  """A small random encoder with positions for SEQ and MiniLM's vocab."""
  return EncoderSource(
      bert_config=small_config(vocab_size=30522, max_position_embeddings=SEQ,
                               **config_overrides),
      vocab_file=vocab(), lower_case=True)


# The batching of `ner_task`; a variant: dataclasses.replace(NER_INPUTS, ...).
NER_INPUTS = FinetuningInputs(seq_length=SEQ, global_batch_size=8,
                              eval_batch_size=16)


def ner_task(tmp_path, inputs=NER_INPUTS, head=None, encoder=None):
  data = write_conll(tmp_path / "d.conll", 96, 0)
  return TokenClassificationTask(
      data=TaggingData(train_file=data, eval_file=data, predict_file=data),
      encoder=encoder or encoder_source(), inputs=inputs, head=head)


# ------------------------------------------------------- teacher runs
def encoder_bindings(layers=3):
  """gin bindings of a small random encoder with MiniLM's vocab, seq 32."""
  config = small_config(vocab_size=30522, max_position_embeddings=128,
                        num_hidden_layers=layers).to_dict()
  return [f"EncoderSource.bert_config = {config!r}",
          f"EncoderSource.vocab_file = '{vocab()}'",
          "EncoderSource.do_lower_case = True",
          "FinetuningInputs.seq_length = 32",
          "FinetuningInputs.global_batch_size = 16",
          "FinetuningInputs.eval_batch_size = 32"]


def classification_teacher(tmp_path):
  """An untrained classification run folder (a teacher) under `tmp_path`."""
  tmp_path.mkdir(exist_ok=True)
  d = str(tmp_path)
  files = [write_data(d, n, seed) for n, seed in ((128, 0), (64, 1), (40, 2))]
  return write_run(str(tmp_path / "teacher"), [
      "build_task.task_class = @ClassificationTask",
      f"ClassificationData.train_file = '{files[0]}'",
      f"ClassificationData.eval_file = '{files[1]}'",
      f"ClassificationData.predict_file = '{files[2]}'",
      "ClassificationData.text_a_column = 'text'",
      "ClassificationData.label_column = 'label'",
      "ClassificationData.labels = ('neg', 'pos')"] + encoder_bindings())


def tagging_teacher(tmp_path):
  """An untrained token-classification run folder under `tmp_path`."""
  tmp_path.mkdir(exist_ok=True)
  data = write_conll(tmp_path / "d.conll", 64, 0)
  return write_run(str(tmp_path / "tagger"), [
      "build_task.task_class = @TokenClassificationTask",
      f"TaggingData.train_file = '{data}'", f"TaggingData.eval_file = '{data}'",
      f"TaggingData.predict_file = '{data}'"] + encoder_bindings(2))
