"""ClassificationTask end to end: train, evaluate, predict, initialise."""

import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

from bert import checkpoints
from bert.tasks import ClassificationTask
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs, HeadConfig, ScheduleConfig)
from bert.training import (NonFiniteLossError, OptimizerConfig, RuntimeConfig,
                           run_experiment)
from conftest import minilm_dir, small_config, vocab
from _tasks import make_task, small_encoder, write_data

def test_classification_learns_and_predicts(tmp_path):
  task = make_task(tmp_path)
  assert task.num_train_steps() == 64          # 256 * 4 / 16
  lines = []
  _, results = run_experiment(task, str(tmp_path / "model"), "train_and_eval",
                           RuntimeConfig(steps_per_loop=16, strategy="one_device"),
                           OptimizerConfig(learning_rate=2e-3, warmup_fraction=0.1),
                           log_fn=lines.append)
  assert results["accuracy"] > 0.9 and results["f1"] > 0.9, results
  assert any(l.startswith("step 64/64") for l in lines)
  run_experiment(task, str(tmp_path / "model"), "predict",
                 RuntimeConfig(strategy="one_device"), log_fn=None)
  rows = [list(map(float, l.split("\t"))) for l in
          open(tmp_path / "model" / "test_results.tsv").read().splitlines()]
  assert len(rows) == 40 and all(len(r) == 2 for r in rows)
  assert np.allclose([sum(r) for r in rows], 1.0, atol=1e-5)
  predict_labels = [l.split("\t")[1] for l in
                    open(tmp_path / "data2.tsv").read().splitlines()[1:]]
  predicted = ["pos" if r[1] > 0.5 else "neg" for r in rows]
  assert np.mean([a == b for a, b in zip(predicted, predict_labels)]) > 0.9


@pytest.mark.heavy
def test_regression_learns(tmp_path):
  task = make_task(tmp_path, regression=True, epochs=8)
  _, results = run_experiment(task, str(tmp_path / "model"), "train_and_eval",
                           RuntimeConfig(steps_per_loop=16, strategy="one_device"),
                           OptimizerConfig(learning_rate=2e-3, warmup_fraction=0.1),
                           log_fn=None)
  assert results["pearson"] > 0.9 and results["spearman"] > 0.8, results
  assert results["loss"] < 1.0         # MSE; predicting the mean gives 2.25


def test_init_checkpoint_gives_encoder_weights_vocab_and_casing(tmp_path):
  task = ClassificationTask(
      data=ClassificationData(train_file=write_data(str(tmp_path), 8, 0),
                              text_a_column="text", label_column="label",
                              labels=("neg", "pos")),
      encoder=EncoderSource(init_checkpoint=minilm_dir()))
  assert task.tokenizer.lower_case is True
  model = task.build_model()
  task.initialize(model)
  reference = checkpoints.load(minilm_dir()).encoder
  for a, b in zip(model.encoder.get_weights(), reference.get_weights()):
    np.testing.assert_array_equal(a, b)


def test_bad_settings_are_named(tmp_path):
  # Generic data without labels: refused by the data config, and by a task
  # given none (its data then comes from the gin bindings: no labels).
  with pytest.raises(ValueError, match=r"^ClassificationData: give labels"):
    ClassificationData(train_file="t.tsv")
  with pytest.raises(ValueError, match=r"^ClassificationData: give labels"):
    ClassificationTask(encoder=EncoderSource(bert_config=small_config(),
                                             vocab_file="v", lower_case=True))
  with pytest.raises(ValueError, match="unknown GLUE task"):
    ClassificationTask(data=ClassificationData(glue_task="squad"),
                       encoder=EncoderSource(bert_config=small_config()))
  with pytest.raises(ValueError, match="vocab .* has 30522 tokens but the "
                     "model.s vocab_size=100"):
    ClassificationTask(data=ClassificationData(labels=("a", "b")),
                       encoder=EncoderSource(
                           bert_config=small_config(),
                           vocab_file=vocab(),
                           lower_case=True),
                       inputs=FinetuningInputs(seq_length=32))


@pytest.mark.heavy
def test_resuming_with_another_label_count_names_the_checkpoint(tmp_path):
  runtime = RuntimeConfig(train_steps=2, steps_per_loop=2, strategy="one_device")
  run_experiment(make_task(tmp_path), str(tmp_path / "model"), "train", runtime,
                 log_fn=None)
  three = make_task(tmp_path, labels=["neg", "pos", "meh"])
  with pytest.raises(ValueError, match=r"checkpoint .*ckpt-2 does not fit this "
                     r"model: .*another task, label count"):
    run_experiment(three, str(tmp_path / "model"), "train", runtime, log_fn=None)


class _NanLabelAtStep3(ClassificationTask):
  """Regression whose third training batch has a NaN label."""

  def build_inputs(self, input_context, training, start_step=0):
    ds = super().build_inputs(input_context, training, start_step)
    return ds.enumerate().map(lambda i, b: dict(b, label=tf.where(
        tf.equal(i + start_step, 2), np.nan, b["label"]))) if training else ds


def test_nan_loss_names_the_lines_of_its_batch(tmp_path):
  task = make_task(tmp_path, regression=True, task_class=_NanLabelAtStep3)
  with pytest.raises(NonFiniteLossError) as e:
    run_experiment(task, str(tmp_path / "model"), "train",
                   RuntimeConfig(train_steps=4, steps_per_loop=4,
                                 strategy="one_device"), log_fn=None)
  batch = next(iter(task.build_inputs(None, training=True, start_step=2)))
  data_lines = [int(r) + 2 for r in batch["example_row"].numpy()]  # + header
  expected = ", ".join(f"line {n}" for n in data_lines[:10])
  assert ("at step 3; " in str(e.value) and f"The batch of step 3 came from: "
          f"{tmp_path / 'data0.tsv'}: {expected} and 6 more." in str(e.value)), e.value
  lines = open(tmp_path / "data0.tsv").read().splitlines()
  assert all(lines[n - 1].endswith(("\t4.0", "\t1.0")) for n in data_lines)


@pytest.mark.parametrize("config_class,field,value", [
    (FinetuningInputs, "global_batch_size", 0),
    (FinetuningInputs, "global_batch_size", -8),
    (FinetuningInputs, "eval_batch_size", 0),
    (FinetuningInputs, "seq_length", 0),
    (ScheduleConfig, "num_train_epochs", 0),
    (HeadConfig, "dropout_rate", 1.0),
    (FinetuningInputs, "max_per_row", 0),
    (FinetuningInputs, "global_batch_size", 2.5)])
def test_bad_numeric_fields_name_the_class_and_field(tmp_path, config_class,
                                                     field, value):
  configs = dict(
      data=ClassificationData(train_file=write_data(str(tmp_path), 8, 0),
                              text_a_column="text", label_column="label",
                              labels=("neg", "pos")),
      encoder=small_encoder(), inputs=FinetuningInputs(seq_length=32),
      head=HeadConfig(), schedule=ScheduleConfig())
  ClassificationTask(**configs)                  # control: the rest is fine
  concern = next(k for k, c in configs.items() if isinstance(c, config_class))
  with pytest.raises(ValueError,
                     match=rf"^{config_class.__name__}\.{field} must be"):
    ClassificationTask(**dict(configs, **{concern: dataclasses.replace(
        configs[concern], **{field: value})}))


@pytest.mark.heavy
def test_failed_predict_leaves_no_earlier_predictions(tmp_path):
  """A predict run removes the previous run's file first and writes its own
  only when complete: a failed run leaves nothing to mistake for its output."""
  from bert.data.errors import DataError  # pylint: disable=g-import-not-at-top
  task = make_task(tmp_path)
  model_dir = str(tmp_path / "model")
  run_experiment(task, model_dir, "train",
                 RuntimeConfig(train_steps=1, steps_per_loop=1), log_fn=None)
  run_experiment(task, model_dir, "predict", RuntimeConfig(), log_fn=None)
  out = os.path.join(model_dir, "test_results.tsv")
  with open(out, encoding="utf-8") as f:
    assert len(f.read().splitlines()) == 40              # control
  again = make_task(tmp_path)                            # rewrites the files
  (tmp_path / "data2.tsv").write_bytes(b"text\tlabel\nbad \xff text\tpos\n")
  with pytest.raises(DataError, match=r"data2.tsv:2: not valid UTF-8"):
    run_experiment(again, model_dir, "predict", RuntimeConfig(), log_fn=None)
  assert not os.path.exists(out)
  assert not [f for f in os.listdir(model_dir) if f.startswith(".predict-")]
