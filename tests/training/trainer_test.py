"""The training loop: accumulation, NaN stop, precision, XLA, optimiser."""

import os

import numpy as np
import pytest
import tensorflow as tf

from _runs import summaries
from bert.tasks import PretrainingTask
from bert.tasks.configs import EncoderSource, PretrainingInputs
from bert.training import (LossScaleCollapseError, NonFiniteLossError,
                           OptimizerConfig, RuntimeConfig, build_optimizer,
                           run_experiment)
from conftest import (PRETRAIN_PRED, PRETRAIN_SEQ, pretraining_task,
                      registered_gradients, small_config)

SEQ, PRED = PRETRAIN_SEQ, PRETRAIN_PRED


@pytest.fixture
def records(pretraining_records):
  return pretraining_records


def train(task, model_dir, steps=3, log_fn=None, **runtime):
  runtime = RuntimeConfig(**dict(dict(train_steps=steps, steps_per_loop=steps,
                                      strategy="one_device", seed=1), **runtime))
  _, out = run_experiment(task, str(model_dir), "train", runtime,
                       OptimizerConfig(learning_rate=1e-3, warmup_steps=1),
                       log_fn=log_fn)
  return out, model_weights(str(model_dir))


def model_weights(model_dir, step=None):
  path = (os.path.join(model_dir, f"ckpt-{step}") if step
          else tf.train.latest_checkpoint(model_dir))
  reader = tf.train.load_checkpoint(path)
  return {n: reader.get_tensor(n) for n, _ in tf.train.list_variables(path)
          if n.startswith("model/")}


def max_diff(a, b):
  assert a.keys() == b.keys()
  return max(float(np.abs(a[k] - b[k]).max()) for k in a)


@pytest.fixture(scope="module")
def float32_weights(pretraining_records, tmp_path_factory):
  """The weights of `train`'s default run (3 float32 steps, no
  accumulation, no XLA): the reference of several tests below, trained
  once per module (the tests only read it)."""
  return train(pretraining_task(pretraining_records),
               tmp_path_factory.mktemp("float32"))[1]


def test_grad_accumulation_equals_one_large_batch(records, tmp_path,
                                                  float32_weights):
  # 4 micro-batches of 2 == one batch of 8: the masked-LM loss is normalised
  # by the real predictions of the whole batch, not of each micro-batch.
  # Also sparse == dense clipping: one micro-batch keeps the embeddings'
  # gradients IndexedSlices through the global-norm clip (repeated ids must
  # be summed first), four sum them densely.
  one = float32_weights
  _, accumulated = train(pretraining_task(records), tmp_path / "acc",
                         grad_accumulation_steps=4)
  assert max_diff(one, accumulated) <= 1e-5
  # The run moved the weights (the comparison is not between two no-ops).
  _, other = train(pretraining_task(records), tmp_path / "shorter", steps=1)
  assert max_diff(one, other) > 1e-3


def test_training_lowers_the_loss_and_evaluates(records, tmp_path):
  task = pretraining_task(records, dropout=0.1, batch=16)
  runtime = RuntimeConfig(train_steps=60, steps_per_loop=20, eval_interval=60,
                          eval_steps=4, strategy="mirrored", seed=1)
  lines = []
  _, results = run_experiment(task, str(tmp_path), "train_and_eval", runtime,
                           OptimizerConfig(learning_rate=2e-3, warmup_steps=5),
                           log_fn=lines.append)
  # The losses the run wrote to TensorBoard, one per loop of 20 steps.
  loss = summaries(str(tmp_path / "train"), "loss")
  assert sorted(loss) == [20, 40, 60], loss
  assert loss[60] < loss[20] - 1.0, loss
  assert {"masked_lm_accuracy", "next_sentence_accuracy", "masked_lm_loss",
          "next_sentence_loss", "loss"} <= results.keys()
  # Evaluation ran at step 60 and reported what it returned.
  eval_loss = summaries(str(tmp_path / "eval"), "loss")
  assert list(eval_loss) == [60]
  assert abs(eval_loss[60] - results["loss"]) < 1e-5
  # The precision that runs and why, then a line per loop.
  assert lines[0] == "precision: float32, XLA off (the default, from BERT_PRECISION)"
  assert "ETA" in lines[1] and "ex/s" in lines[1]
  for tag in ("learning_rate", "examples_per_second", "masked_lm_accuracy"):
    assert summaries(str(tmp_path / "train"), tag), tag
  # Eval mode alone restores the final checkpoint and gives the same metrics.
  _, again = run_experiment(task, str(tmp_path), "eval", runtime, log_fn=None)
  assert abs(again["loss"] - results["loss"]) < 1e-4


class _NanAtStep5(PretrainingTask):
  """Training data whose 5th batch has NaN loss weights."""

  def build_inputs(self, input_context, training, start_step=0):
    ds = super().build_inputs(input_context, training, start_step)
    if not training:
      return ds

    def poison(i, batch):
      batch = dict(batch)
      bad = tf.equal(i + start_step, 4)
      batch["masked_lm_weights"] = tf.where(
          bad, batch["masked_lm_weights"] * np.nan, batch["masked_lm_weights"])
      return batch

    return ds.enumerate().map(poison)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(records, tmp_path):
  task = pretraining_task(records, task_class=_NanAtStep5)
  # The error names the step and the record files of that step's batch.
  with pytest.raises(NonFiniteLossError, match=r"at step 5; .*The batch of "
                     r"step 5 came from: records of .*pretraining_records.*"
                     r"\.tfrecord"):
    train(task, tmp_path, steps=8, steps_per_loop=2, checkpoint_interval=2)
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")
  weights = model_weights(str(tmp_path))
  assert all(np.isfinite(w).all() for w in weights.values())


class _OverflowAt(PretrainingTask):
  """Finite losses, but NaN gradients (as an fp16 overflow gives) in the
  batches of the 0-based steps in `bad_steps` (all steps if None)."""

  bad_steps = None

  def build_inputs(self, input_context, training, start_step=0):
    ds = super().build_inputs(input_context, training, start_step)
    bad = self.bad_steps
    return ds.enumerate().map(lambda i, b: dict(b, poison=tf.constant(True) if
                                                bad is None else tf.reduce_any(
                                                    tf.equal(i + start_step, bad))))

  def compute_stats(self, features, outputs):
    stats = dict(super().compute_stats(features, outputs))
    logits = tf.cast(outputs["next_sentence_logits"], tf.float32)
    # sqrt(0) has an infinite derivative: value 0, gradient NaN.
    spike = tf.cond(features["poison"], lambda: tf.sqrt(tf.reduce_sum(
        tf.zeros_like(logits) * logits)), lambda: tf.constant(0.0))
    num, den = stats["next_sentence_loss"]
    stats["next_sentence_loss"] = (num + spike, den)
    return stats


def test_overflow_steps_are_skipped_and_logged(records, tmp_path):
  task = pretraining_task(records, task_class=_OverflowAt)
  task.bad_steps = [2]
  lines = []
  out, _ = train(task, tmp_path, steps=8, steps_per_loop=4,
                 mixed_precision="mixed_float16", log_fn=lines.append)
  assert np.isfinite(out["loss"])
  assert out["loss_scale"] == 32768 / 2      # halved once by the skipped step
  assert "mixed_float16: 1 of the last 4 steps skipped (NaN/Inf gradients); " \
      "loss scale now 1.64e+04" in lines


def test_loss_scale_collapse_stops_with_bounded_retries(records, tmp_path):
  task = pretraining_task(records, task_class=_OverflowAt)    # every step overflows
  lines = []
  with pytest.raises(LossScaleCollapseError, match=(
      r"mixed_float16: the gradients of 30 steps in a row \(from step 1\) "
      r"were NaN/Inf, more than max_skipped_steps=20; .* loss scale, now "
      r"1\. .*The batch of step 1 came from: records of")):
    train(task, tmp_path, steps=40, steps_per_loop=10, checkpoint_interval=10,
          mixed_precision="mixed_float16", log_fn=lines.append)
  assert "mixed_float16: 10 of the last 10 steps skipped (NaN/Inf gradients); " \
      "loss scale now 32" in lines
  # (tf_keras keeps the dynamic loss scale >= 1.) Stopped at the end of
  # the third loop, before writing its checkpoint.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-20")


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains_close_to_float32(records, tmp_path, policy,
                                                 float32_weights):
  f32 = float32_weights
  out, mixed = train(pretraining_task(records), tmp_path / policy,
                     mixed_precision=policy)
  assert np.isfinite(out["loss"])
  if policy == "mixed_float16":
    assert out["loss_scale"] > 1   # dynamic loss scaling is on
  # Variables stay float32; 3 updates of lr 1e-3 land near the fp32 ones.
  assert all(w.dtype == np.float32 for w in mixed.values())
  assert max_diff(f32, mixed) < 5e-3


def test_xla_matches_eager_graph(records, tmp_path, float32_weights):
  plain = float32_weights
  _, xla = train(pretraining_task(records), tmp_path / "xla", jit_compile=True)
  assert max_diff(plain, xla) <= 1e-5


def test_optimizer_schedule_and_weight_decay_exclusions():
  opt = build_optimizer(OptimizerConfig(learning_rate=1e-3, num_train_steps=100,
                                        warmup_steps=10))
  lr = opt.learning_rate
  # Linear warmup from 0 to the full 1e-3 at step 10, then linear decay to
  # 0 at step 100 (Hugging Face's get_linear_schedule_with_warmup).
  np.testing.assert_allclose([float(lr(s)) for s in (0, 5, 10, 55, 100)],
                             [0.0, 5e-4, 1e-3, 5e-4, 0.0], rtol=1e-6)
  assert opt.weight_decay_rate == 0.01 and opt.gradient_clip_norm == 0.0
  names = ["embeddings/layer_norm/gamma:0", "transformer/layer_0/qkv/bias:0",
           "transformer/layer_0/attention_layer_norm/beta:0",
           "transformer/layer_0/qkv/kernel:0", "embeddings/word_embeddings:0"]
  assert [opt._do_use_weight_decay(n) for n in names] == [
      False, False, False, True, True]
  lamb = build_optimizer(OptimizerConfig(optimizer="lamb", num_train_steps=10))
  assert type(lamb).__name__ == "LAMB"
  with pytest.raises(ValueError, match="OptimizerConfig.optimizer"):
    OptimizerConfig(optimizer="sgd")
  with pytest.raises(ValueError, match="warmup_steps"):
    OptimizerConfig(num_train_steps=10, warmup_steps=20)


def test_adamw_update_equals_algorithm_1_with_decoupled_weight_decay():
  """Five steps of our AdamW against NumPy: epsilon is added to the
  bias-corrected sqrt(v_hat) (Kingma & Ba, Algorithm 1; PyTorch's AdamW),
  weight decay is lr * rate * w, and names in `no_decay` are not decayed.
  Tiny gradients make the epsilon placement visible: Keras' "epsilon hat"
  would move these weights over 10x less at step 1."""
  rng = np.random.RandomState(0)
  w0 = rng.normal(size=(4, 3)).astype(np.float32)
  b0 = rng.normal(size=(3,)).astype(np.float32)
  grads = [(rng.normal(size=(4, 3)) * 1e-6, rng.normal(size=(3,)) * 1e-6)
           for _ in range(5)]
  lr, eps, wd = 1e-3, 1e-6, 0.01
  opt = build_optimizer(OptimizerConfig(learning_rate=lr, num_train_steps=1000,
                                        epsilon=eps, weight_decay=wd,
                                        end_learning_rate=lr, warmup_steps=0))
  w = tf.Variable(w0, name="dense/kernel")
  b = tf.Variable(b0, name="dense/bias")
  for gw, gb in grads:
    opt.apply_gradients([(tf.constant(gw, tf.float32), w),
                         (tf.constant(gb, tf.float32), b)])
  for var, start, g_all, decay in ((w, w0, [g[0] for g in grads], True),
                                   (b, b0, [g[1] for g in grads], False)):
    x, m, v = start.astype(np.float64), 0.0, 0.0
    for t, g in enumerate(g_all, 1):
      m = 0.9 * m + 0.1 * g
      v = 0.999 * v + 0.001 * g * g
      m_hat, v_hat = m / (1 - 0.9 ** t), v / (1 - 0.999 ** t)
      x = x - lr * wd * x * decay - lr * m_hat / (np.sqrt(v_hat) + eps)
    np.testing.assert_allclose(var.numpy(), x, rtol=0, atol=1e-6)
    assert np.abs(var.numpy() - start).max() > 1e-3   # the updates are real


def test_bad_runtime_settings_fail_before_training(records, tmp_path):
  with pytest.raises(ValueError, match="grad_accumulation_steps=3"):
    train(pretraining_task(records), tmp_path / "a", grad_accumulation_steps=3)
  with pytest.raises(ValueError, match="RuntimeConfig.strategy"):
    RuntimeConfig(strategy="gpu")
  blocker = tmp_path / "file"
  blocker.write_text("not a folder")
  with pytest.raises(OSError, match="not writable"):
    train(pretraining_task(records), blocker / "model")
  with pytest.raises(ValueError, match=r"PretrainingInputs\.seq_length=128 "
                     r"exceeds max_position_embeddings=32"):
    PretrainingTask(encoder=EncoderSource(bert_config=small_config()),
                    inputs=PretrainingInputs(seq_length=128))


def test_a_finished_run_leaves_no_gradient_holding_its_step(records, tmp_path):
  """A run's step sums over replicas through `train_step.replica_sum`,
  which on one replica calls no `all_reduce`: each traced `all_reduce`
  registers a custom gradient for good, holding the step's graph and every
  variable of the model and optimizer (a process that trained models one
  after another grew by each)."""
  train(pretraining_task(records), tmp_path / "first", steps=1)
  before = registered_gradients()
  train(pretraining_task(records), tmp_path / "second", steps=1)
  assert registered_gradients() == before
  # Negative control: a sum over replicas by `all_reduce` in a traced step,
  # on the same one-replica strategy, registers one gradient per trace.
  strategy = tf.distribute.get_strategy()

  @tf.function
  def step(x):
    return strategy.run(lambda v: tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, v), args=(x,))

  step(tf.constant(1.0))
  step(tf.constant([1.0, 2.0]))      # a new shape: traced again
  assert registered_gradients() == before + 2
