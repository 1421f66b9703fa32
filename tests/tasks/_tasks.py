"""What several test modules build tasks from: generated data, small
encoders with MiniLM's vocab, and ready tasks (imported, never collected)."""

import os

import numpy as np

from bert.tasks import ClassificationTask, TokenClassificationTask
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs, ScheduleConfig, TaggingData)
from conftest import minilm_dir, small_config


def vocab():
  return os.path.join(minilm_dir(), "vocab.txt")


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
