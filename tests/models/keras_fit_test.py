"""The Keras path: `compile()` with the recipe, `fit` equal to the custom
training loop, the schedule over the steps `fit` runs."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert.tasks.configs import HeadConfig
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from tasks._tasks import INPUTS, WORDS, make_task
import harness


def _weights_after_custom_loop(task, model_dir, steps, seed):
  run_experiment(task, model_dir, "train",
                 RuntimeConfig(train_steps=steps, steps_per_loop=steps,
                               seed=seed), log_fn=None)
  model = task.build_model()
  tf.train.Checkpoint(model=model).restore(
      tf.train.latest_checkpoint(model_dir)).expect_partial()
  return model.get_weights()


def _weights_after_fit(task, steps, seed, **compile_args):
  model, history = harness.fit_on_loop_batches(
      task, steps, seed, targets=lambda f: f["label"], **compile_args)
  return model, model.get_weights(), history


def _max_relative(a, b):
  """The largest ||x - y|| / ||y|| over the weights."""
  assert len(a) == len(b)
  return max(float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12))
             for x, y in zip(a, b))


def test_eight_fit_steps_equal_eight_custom_loop_steps(tmp_path):
  """One optimizer (AdamW, epsilon on sqrt(v_hat), decay exclusions), one
  schedule (10% warmup, linear decay over the run), one clipping, one loss:
  8 steps of `fit` with `compile()`'s defaults land on the weights of 8
  steps of `run_experiment` with `OptimizerConfig()`'s."""
  task = make_task(tmp_path, head=HeadConfig(dropout_rate=0.0),
                   inputs=dataclasses.replace(INPUTS, group_by_length=False))
  task.config.hidden_dropout_prob = task.config.attention_probs_dropout_prob = 0.0
  expected = _weights_after_custom_loop(task, str(tmp_path / "loop"), 8, seed=3)
  model, got, history = _weights_after_fit(task, 8, seed=3)
  assert model.optimizer.iterations.numpy() == 8
  parity = _max_relative(got, expected)
  print(f"fit vs bert-train after 8 steps without dropout: {parity:.3g}")
  assert parity <= 1e-5
  assert set(history.history) == {"loss", "accuracy", "f1"}
  # Negative control: another learning rate moves the weights elsewhere.
  _, other, _ = _weights_after_fit(
      task, 8, seed=3, optimizer=OptimizerConfig(learning_rate=1e-4))
  assert _max_relative(other, expected) > 1e-3


def test_schedule_spans_the_steps_fit_runs(tmp_path):
  task = make_task(tmp_path, epochs=1)
  model = task.build_model()
  model.compile()
  x = task.model_inputs(task.features("train"))                # 256 rows
  y = task.features("train")["label"]
  model.fit(x, y, batch_size=16, epochs=2, verbose=0)            # 32 steps
  schedule = model.optimizer.learning_rate
  rates = [float(schedule(s)) for s in (0, 3, 32)]
  assert rates[0] == 0.0                                         # warmup from 0
  assert rates[1] == pytest.approx(5e-5)                         # peak at 10%
  assert rates[2] == pytest.approx(0.0, abs=1e-12)               # decayed at the end
  assert model.optimizer.iterations.numpy() == 32


def _write_varied_rows(path, n=256):
  """Labelled rows of 3 to 24 words: they fall into several buckets."""
  rng = np.random.RandomState(7)
  rows = ["text\tlabel"]
  for _ in range(n):
    words = list(rng.choice(WORDS, rng.randint(2, 24)))
    good = rng.rand() < 0.5
    words.insert(rng.randint(0, len(words)), "good" if good else "bad")
    rows.append(" ".join(words) + "\t" + ("pos" if good else "neg"))
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(rows) + "\n")


def _raw_rows(path):
  with open(path, encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
  return [r[0] for r in rows], [r[1] for r in rows]


def _weights_after_raw_fit(task, path, seed, shuffle=True):
  """`fit` on the raw strings of `path`, as a user would after seeding."""
  tf_keras.utils.set_random_seed(seed)
  model = task.build_model()
  model.attach_preprocessor(task.preprocessor())
  model.compile()
  texts, labels = _raw_rows(path)
  model.fit(texts, labels, epochs=1, batch_size=task.global_batch_size,
            shuffle=shuffle, verbose=0)
  return model.optimizer.iterations.numpy(), model.get_weights()


@pytest.mark.heavy
def test_same_seed_same_run_on_raw_strings(tmp_path):
  """With dropout on, shuffling and length buckets: `fit` on raw strings
  and `run_experiment` at one global seed draw the same batches, head and
  dropout masks, so they end on the same weights. A different data order
  (`shuffle=False`) ends elsewhere."""
  task = make_task(tmp_path, epochs=1, inputs=dataclasses.replace(
      INPUTS, length_buckets=(8, 16, 32)))
  path = str(tmp_path / "data0.tsv")         # the task's train file
  _write_varied_rows(path)                   # 256 rows: 16 steps of 16
  lengths = task.features("train")["input_mask"].sum(-1)
  assert len(set(np.searchsorted([8, 16, 32], lengths))) == 3
  assert task.config.hidden_dropout_prob > 0 and task.head.dropout_rate > 0
  expected = _weights_after_custom_loop(task, str(tmp_path / "loop"), 16, seed=5)
  steps, got = _weights_after_raw_fit(task, path, seed=5)
  assert steps == 16
  parity = _max_relative(got, expected)
  print(f"fit vs bert-train after 16 steps with dropout: {parity:.3g}")
  assert parity <= 1e-5
  _, other = _weights_after_raw_fit(task, path, seed=5, shuffle=False)
  assert _max_relative(other, expected) > 1e-3
