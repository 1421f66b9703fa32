"""ClassificationTask end to end: train, evaluate, predict, initialise."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert import checkpoints
from bert.tasks import ClassificationTask
from bert.training import (NonFiniteLossError, OptimizerConfig, RuntimeConfig,
                           run_experiment)
from conftest import minilm_dir, small_config

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


def make_task(tmp_path, regression=False, epochs=4, labels=("neg", "pos"),
              task_class=ClassificationTask, **kwargs):
  vocab = os.path.join(minilm_dir(), "vocab.txt")
  return task_class(
      bert_config=small_config(vocab_size=30522, max_position_embeddings=32),
      vocab_file=vocab, do_lower_case=True, seq_length=32, global_batch_size=16,
      eval_batch_size=32, train_file=write_data(str(tmp_path), 256, 0, regression),
      eval_file=write_data(str(tmp_path), 96, 1, regression),
      predict_file=write_data(str(tmp_path), 40, 2, regression),
      text_a_column="text", label_column="label",
      labels=None if regression else list(labels), regression=regression,
      num_train_epochs=epochs, **kwargs)


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
      init_checkpoint=minilm_dir(), train_file=write_data(str(tmp_path), 8, 0),
      text_a_column="text", label_column="label", labels=["neg", "pos"])
  assert task.tokenizer.lower_case is True
  model = task.build_model()
  task.initialize(model)
  reference = checkpoints.load(minilm_dir()).encoder
  for a, b in zip(model.encoder.get_weights(), reference.get_weights()):
    np.testing.assert_array_equal(a, b)


def test_bad_settings_are_named(tmp_path):
  with pytest.raises(ValueError, match="labels"):
    ClassificationTask(bert_config=small_config(), vocab_file="v", do_lower_case=True)
  with pytest.raises(ValueError, match="unknown GLUE task"):
    ClassificationTask(glue_task="squad", bert_config=small_config())
  with pytest.raises(ValueError, match="vocab .* has 30522 tokens but the "
                     "model.s vocab_size=100"):
    ClassificationTask(bert_config=small_config(), labels=["a", "b"],
                       vocab_file=os.path.join(minilm_dir(), "vocab.txt"),
                       do_lower_case=True, seq_length=32)


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


@pytest.mark.parametrize("field,value", [
    ("global_batch_size", 0), ("global_batch_size", -8), ("eval_batch_size", 0),
    ("seq_length", 0), ("num_train_epochs", 0), ("dropout_rate", 1.0),
    ("max_per_row", 0), ("global_batch_size", 2.5)])
def test_bad_numeric_fields_name_the_class_and_field(tmp_path, field, value):
  args = dict(bert_config=small_config(vocab_size=30522, max_position_embeddings=32),
              vocab_file=os.path.join(minilm_dir(), "vocab.txt"),
              do_lower_case=True, seq_length=32,
              train_file=write_data(str(tmp_path), 8, 0),
              text_a_column="text", label_column="label", labels=["neg", "pos"])
  ClassificationTask(**args)                     # control: the rest is fine
  args[field] = value
  with pytest.raises(ValueError, match=rf"^ClassificationTask\.{field} must be"):
    ClassificationTask(**args)


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
