"""`FinetuningInputs(pack=True)`: each step packs its batch's examples into as
few rows as they fill; training reaches the same weights as unpacked batches
of the same examples, and packed predictions equal unpacked ones."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from bert.tasks import ClassificationTask
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs, HeadConfig,
                                MultipleChoiceData)
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from conftest import max_abs_diff, small_config, vocab
from _tasks import NER_INPUTS, SEQ, encoder_source, ner_task

NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


# The batching of `classification_task`; variants: dataclasses.replace.
CLASSIFICATION_INPUTS = FinetuningInputs(seq_length=SEQ, global_batch_size=8,
                                         eval_batch_size=4)


def classification_task(tmp_path, inputs=CLASSIFICATION_INPUTS, head=None):
  rng = np.random.RandomState(0)
  words = ["a", "good", "bad", "film", "very", "not", "plot", "actors"]
  rows = ["text\tlabel"]
  for i in range(80):
    n = int(rng.randint(1, 40))
    rows.append(" ".join(rng.choice(words, n)) + f"\t{'ab'[i % 2]}")
  (tmp_path / "d.tsv").write_text("\n".join(rows) + "\n")
  return ClassificationTask(
      data=ClassificationData(train_file=str(tmp_path / "d.tsv"),
                              predict_file=str(tmp_path / "d.tsv"),
                              text_a_column="text", label_column="label",
                              labels=("a", "b")),
      encoder=encoder_source(**NO_DROPOUT), inputs=inputs, head=head)


@pytest.mark.heavy
def test_packed_steps_hold_the_batch_examples(tmp_path):
  task = classification_task(tmp_path, inputs=dataclasses.replace(
      CLASSIFICATION_INPUTS, pack=True, max_per_row=4))
  plain = classification_task(tmp_path, inputs=dataclasses.replace(
      CLASSIFICATION_INPUTS, group_by_length=False))
  n = len(task.features("train")["input_word_ids"])
  packed_batches = list(task.build_inputs(None, training=True).take(n // 8))
  plain_batches = list(plain.build_inputs(None, training=True).take(n // 8))
  # The examples (<= 42 tokens) go into rows of the 64 bucket, not SEQ.
  longest = task.features("train")["input_mask"].sum(1).max()
  assert 32 < longest <= 64 < SEQ
  assert task.pipeline.train_pack_length() == 64
  assert "rows of 64 (chosen by estimated cost; seq_length 128)" in (
      task.pipeline.train_summary())
  seen = []
  for p, q in zip(packed_batches, plain_batches):
    slots = p["packed_example_mask"].numpy() > 0
    rows = p["example_row"].numpy()[slots]
    assert sorted(rows) == sorted(q["example_row"].numpy())   # same examples
    assert p["input_word_ids"].shape[1] == 64
    assert len(p["input_word_ids"]) < 8                        # fewer rows
    assert (slots.sum(1) <= 4).all()
    seen.extend(rows)
  assert sorted(seen) == list(range(n // 8 * 8))               # one epoch
  resumed = next(iter(task.build_inputs(None, training=True, start_step=3)))
  np.testing.assert_array_equal(resumed["input_word_ids"],
                                packed_batches[3]["input_word_ids"])


@pytest.mark.heavy
@pytest.mark.parametrize("make", ["classification", "ner"])
def test_packed_training_and_predictions_equal_unpacked(tmp_path, make):
  def build(pack):
    batching = dict(pack=pack, group_by_length=False)
    no_dropout = HeadConfig(dropout_rate=0.0)
    if make == "ner":
      return ner_task(tmp_path,
                      inputs=dataclasses.replace(NER_INPUTS, **batching),
                      head=no_dropout, encoder=encoder_source(**NO_DROPOUT))
    return classification_task(
        tmp_path, inputs=dataclasses.replace(CLASSIFICATION_INPUTS, **batching),
        head=no_dropout)

  weights, logits = {}, {}
  for pack in (False, True):
    task = build(pack)
    model_dir = str(tmp_path / f"{make}{pack}")
    run_experiment(task, model_dir, "train",
                   RuntimeConfig(train_steps=4, steps_per_loop=4,
                                 strategy="one_device"),
                   OptimizerConfig(learning_rate=1e-3, warmup_steps=1),
                   log_fn=None)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
    weights[pack] = {n: reader.get_tensor(n) for n, _ in
                     tf.train.list_variables(model_dir) if n.startswith("model/")}
    model = task.build_model()
    tf.train.Checkpoint(model=model).restore(
        tf.train.latest_checkpoint(model_dir)).expect_partial()
    logits[pack] = task.logits(model, "predict")
  assert max(max_abs_diff(weights[False][k], weights[True][k])
             for k in weights[False]) <= 1e-5
  assert logits[False].shape == logits[True].shape
  mask = np.ones(logits[False].shape[:-1], bool)
  if make == "ner":   # per-token logits: compare the real tokens
    mask = build(pack=False).features("predict")["input_mask"] > 0
  assert max_abs_diff(logits[False][mask], logits[True][mask]) <= 1e-4


def test_pack_length_sets_the_rows_or_names_what_does_not_fit(tmp_path):
  def task(**inputs):
    return classification_task(tmp_path, inputs=dataclasses.replace(
        CLASSIFICATION_INPUTS, pack=True, **inputs))

  full = task(pack_length=SEQ)
  batch = next(iter(full.build_inputs(None, training=True)))
  assert batch["input_word_ids"].shape[1] == SEQ
  assert "FinetuningInputs.pack_length" in full.pipeline.train_summary()
  longest = int(full.features("train")["input_mask"].sum(1).max())
  row = int(np.argmax(full.features("train")["input_mask"].sum(1)))
  with pytest.raises(ValueError, match=(
      rf"^ClassificationTask: FinetuningInputs\.pack_length={longest - 1} is "
      rf"shorter than training row {row} \({longest} tokens\); use >= {longest}")):
    task(pack_length=longest - 1).build_inputs(None, training=True)
  with pytest.raises(ValueError, match=(
      rf"^ClassificationTask: FinetuningInputs\.pack_length={SEQ + 1} exceeds "
      rf"seq_length={SEQ}")):
    task(pack_length=SEQ + 1)
  with pytest.raises(ValueError, match=r"FinetuningInputs\.pack_length must be "
                     r"an integer >= 1 or None, got 0"):
    FinetuningInputs(pack_length=0)


def test_tasks_without_packed_rows_refuse_pack(tmp_path):
  from bert.tasks import MultipleChoiceTask
  configs = dict(data=MultipleChoiceData(),
                 encoder=EncoderSource(
                     bert_config=small_config(vocab_size=30522,
                                              max_position_embeddings=64),
                     vocab_file=vocab(), lower_case=True))
  MultipleChoiceTask(inputs=FinetuningInputs(seq_length=64), **configs)  # control
  with pytest.raises(ValueError, match=r"^MultipleChoiceTask: "
                     r"FinetuningInputs\.pack=True, but this task does not "
                     r"support packed rows"):
    MultipleChoiceTask(inputs=FinetuningInputs(seq_length=64, pack=True),
                       **configs)
