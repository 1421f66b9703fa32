"""The custom training loop: an orbit trainer/evaluator for any `Task`.

Each train step, per replica, is `bert.train_step`'s (as `fit`'s):
  1. the task's loss denominators (e.g. real masked positions) are summed over
     the replica's batch and all-reduced over replicas: the global batch's;
  2. the batch is split into `grad_accumulation_steps` micro-batches; for each,
     a forward/backward pass of `train_step.loss` (the loss stats' numerators
     over the global denominators); gradients are summed (so N micro-batches
     == one batch of N*B exactly);
  3. `train_step.apply_gradients`: the summed gradients are all-reduced,
     unscaled (mixed_float16), clipped to global norm `clip_norm`, and applied
     once.
The per-step loss is checked: the first step with a NaN/Inf loss is recorded
and training stops at the end of the loop (before any checkpoint is written).
Under mixed_float16 a step whose gradients overflow is skipped and the loss
scale halved (dynamic loss scaling); skipped steps are counted and logged,
and more than `max_skipped_steps` of them in a row (a collapsed loss scale:
the overflow is not a passing spike) stops training the same way.
"""

import time
from typing import Dict, Optional

import numpy as np
import orbit
import tensorflow as tf
import tf_keras

from bert import train_step
from bert.tasks.base import Task


class NonFiniteLossError(RuntimeError):
  """The training loss became NaN or Inf at (1-based) `step`; `batch_step`
  is the 0-based index of that step's batch in the training data."""

  def __init__(self, message: str, step: int):
    super().__init__(message)
    self.step = step
    self.batch_step = step - 1


class LossScaleCollapseError(NonFiniteLossError):
  """Under mixed_float16, too many steps in a row had non-finite gradients."""


class TrainingStopped(Exception):
  """A stop was requested (SIGTERM); raised at the end of a loop. `saved`:
  the checkpoint of `step` is already written (multi-worker preemption)."""

  def __init__(self, step: int, saved: bool = False):
    super().__init__(f"stopped at step {step}")
    self.step = step
    self.saved = saved


class Trainer(orbit.StandardTrainer, orbit.StandardEvaluator):
  """Trains and evaluates `task.build_model()` under `strategy`."""

  def __init__(self, task: Task, model: tf_keras.Model, optimizer,
               strategy: tf.distribute.Strategy, *,
               train_dataset=None, eval_dataset=None,
               grad_accumulation_steps: int = 1, clip_norm: float = 1.0,
               jit_compile: bool = False, train_steps: Optional[int] = None,
               max_skipped_steps: int = 20, log_fn=print):
    if grad_accumulation_steps < 1:
      raise ValueError("grad_accumulation_steps must be >= 1, got "
                       f"{grad_accumulation_steps}")
    self.task = task
    self.model = model
    self.optimizer = optimizer
    self.strategy = strategy
    self.grad_accumulation_steps = grad_accumulation_steps
    self.clip_norm = clip_norm
    self.jit_compile = jit_compile
    self.train_steps = train_steps
    self.max_skipped_steps = max_skipped_steps
    self.log_fn = log_fn
    self._loss_scaled = train_step.loss_scaled(optimizer)
    with strategy.scope():
      self._first_bad_step = tf.Variable(
          -1, dtype=tf.int64, trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
          name="first_nonfinite_step")
      self._bad_loss = tf.Variable(
          0.0, trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
          name="first_nonfinite_loss")
      # Loss-scaled runs: steps skipped for non-finite gradients, in a row
      # (and the step where the current run of them began) and per loop.
      counter = lambda name: tf.Variable(
          0, dtype=tf.int64, trainable=False, name=name,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self._skipped_in_a_row = counter("skipped_in_a_row")
      self._skipped_in_loop = counter("skipped_in_loop")
      self._first_skipped_step = counter("first_skipped_step")
    self._loop_start = None
    self.last_train_results: Dict[str, float] = {}
    self.stop_requested = lambda: False
    # Datasets may be set later (`trainer.train_dataset = ...`), e.g. after a
    # checkpoint restore has decided where the data resumes.
    orbit.StandardTrainer.__init__(
        self, train_dataset,
        options=orbit.StandardTrainerOptions(use_tf_while_loop=True))
    orbit.StandardEvaluator.__init__(
        self, eval_dataset,
        options=orbit.StandardEvaluatorOptions(use_tf_while_loop=False))
    # Forward + backward of one micro-batch; XLA-compiled with jit_compile
    # (the cross-replica sums and the update stay outside the compiled part).
    self._grad_fn = (tf.function(self._micro_gradients, jit_compile=True)
                     if jit_compile else self._micro_gradients)
    with strategy.scope():
      self._stat_means = train_step.stat_means(task.stat_names)

  # ------------------------------------------------------------- metrics
  def _record(self, stats):
    train_step.record(self._stat_means, stats)

  def _results(self) -> Dict[str, float]:
    """Each stat's numerators / denominators over the loop; `loss` the sum
    of the loss stats'."""
    out = {name: float(self._stat_means[name].result())
           for name in self.task.stat_names}
    if self.task.loss_names:
      out["loss"] = sum(out[k] for k in self.task.loss_names if k in out)
    return out

  def _reset(self):
    for m in self._stat_means.values():
      m.reset_state()

  # --------------------------------------------------------------- train
  def train_loop_begin(self):
    self._reset()
    self._loop_start = (time.time(), int(self.optimizer.iterations.numpy()))

  def train_step(self, iterator):
    features = next(iterator)
    self.strategy.run(self._replica_train_step, args=(features,))

  def _replica_train_step(self, features):
    task, n = self.task, self.grad_accumulation_steps
    ctx = tf.distribute.get_replica_context()
    dens = train_step.global_sums(task.loss_denominators(features))
    # With one replica and one micro-batch, nothing sums the gradients
    # before clipping, so the embeddings' gradients stay IndexedSlices (the
    # looked-up rows) through the norm and the clip, and become dense only
    # for the fused Adam update below: two passes over the whole word table
    # fewer per step. (An XLA-compiled `_grad_fn` returns dense gradients.)
    sparse = (n == 1 and ctx.num_replicas_in_sync == 1
              and not self.jit_compile)

    def micro_step(micro):
      loss, grads, stats = self._grad_fn(micro, dens, dense=not sparse)
      self._record(stats)
      return loss, grads

    if n == 1:
      loss, grads = micro_step(features)
    else:
      micro = tf.nest.map_structure(
          lambda t: tf.reshape(t, tf.concat([[n, -1], tf.shape(t)[1:]], 0)),
          features)
      # Micro-batch 0 outside the loop gives the accumulators their dtypes.
      loss, grads = micro_step(tf.nest.map_structure(lambda t: t[0], micro))

      def body(i, loss, grads):
        l, g = micro_step(tf.nest.map_structure(lambda t: t[i], micro))
        return i + 1, loss + l, [a + b for a, b in zip(grads, g)]

      _, loss, grads = tf.while_loop(lambda i, *_: i < n, body,
                                     (tf.constant(1), loss, grads))
    loss = train_step.replica_sum(loss)
    finite = tf.math.is_finite(loss)
    # (Before the update: the step it records is the update's.)
    self._first_bad_step.assign(tf.where(
        (self._first_bad_step < 0) & tf.logical_not(finite),
        self.optimizer.iterations, self._first_bad_step))
    self._bad_loss.assign(tf.where(
        (self._first_bad_step == self.optimizer.iterations) & tf.logical_not(finite),
        loss, self._bad_loss))
    train_step.apply_gradients(
        self.optimizer, grads, self.model.trainable_variables, self.clip_norm,
        observe=self._count_skipped if self._loss_scaled else None)

  def _count_skipped(self, norm):
    """Counts a step that the LossScaleOptimizer will skip (its gradients'
    `norm` is not finite: an overflow)."""
    skipped = tf.cast(tf.logical_not(tf.math.is_finite(norm)), tf.int64)
    self._first_skipped_step.assign(tf.where(
        (self._skipped_in_a_row == 0) & (skipped > 0),
        self.optimizer.iterations, self._first_skipped_step))
    self._skipped_in_a_row.assign((self._skipped_in_a_row + 1) * skipped)
    self._skipped_in_loop.assign_add(skipped)

  def _micro_gradients(self, micro, dens, dense=True):
    """(loss, gradients, stats) of one micro-batch; the loss is the sum of
    the task's loss numerators over the *global* denominators `dens`.
    Gradients are dense tensors, or with `dense=False` IndexedSlices where
    the tape gives them (embedding lookups)."""
    task = self.task
    with tf.GradientTape() as tape:
      outputs = self.model(task.model_inputs(micro), training=True)
      stats = task.compute_stats(micro, outputs)
      loss = train_step.loss(stats, dens, task.loss_names, task.loss_epsilons)
    # Dense: IndexedSlices from embedding lookups cannot be summed in a loop.
    grads = train_step.gradients(tape, loss, self.model.trainable_variables,
                                 self.optimizer, dense=dense)
    return loss, grads, stats

  def train_loop_end(self):
    bad = int(self._first_bad_step.numpy())
    if bad >= 0:
      raise NonFiniteLossError(
          f"training loss is {float(self._bad_loss.numpy())} at step {bad + 1}; "
          "stopped before writing a checkpoint (the last one in model_dir is "
          "the last good state). Lower the learning rate, check the input "
          "data of that step, or use float32.", bad + 1)
    in_a_row = int(self._skipped_in_a_row.numpy())
    if self._loss_scaled and in_a_row > self.max_skipped_steps:
      first = int(self._first_skipped_step.numpy()) + 1
      raise LossScaleCollapseError(
          f"mixed_float16: the gradients of {in_a_row} steps in a row "
          f"(from step {first}) were NaN/Inf, more than max_skipped_steps="
          f"{self.max_skipped_steps}; each skipped step halved the loss scale, "
          f"now {float(self.optimizer.loss_scale):.3g}. The overflow is not a "
          "passing spike: stopped before writing a checkpoint (the last one in "
          "model_dir is the last good state). Check the input data of that "
          "step, lower the learning rate, or use mixed_bfloat16/float32.", first)
    out = self._results()
    step = int(self.optimizer.iterations.numpy())
    start_time, start_step = self._loop_start
    elapsed = max(time.time() - start_time, 1e-9)
    steps = step - start_step
    out["examples_per_second"] = steps * self.task.global_batch_size / elapsed
    out["learning_rate"] = float(self._current_learning_rate())
    if self._loss_scaled:
      out["loss_scale"] = float(self.optimizer.loss_scale)
      out["skipped_steps"] = float(self._skipped_in_loop.numpy())
      self._skipped_in_loop.assign(0)
    if self.log_fn is not None:
      self.log_fn(self._progress_line(step, out, elapsed / max(steps, 1)))
      if out.get("skipped_steps"):
        self.log_fn(f"mixed_float16: {int(out['skipped_steps'])} of the last "
                    f"{steps} steps skipped (NaN/Inf gradients); loss scale "
                    f"now {out['loss_scale']:.3g}")
    self.last_train_results = out
    if self.stop_requested():
      raise TrainingStopped(step)
    return out

  def _current_learning_rate(self):
    lr = self.optimizer.learning_rate
    if isinstance(lr, tf_keras.optimizers.schedules.LearningRateSchedule):
      return lr(self.optimizer.iterations)
    return lr

  def _progress_line(self, step, out, seconds_per_step):
    parts = [f"step {step}" + (f"/{self.train_steps}" if self.train_steps else "")]
    parts += [f"{k} {v:.4f}" for k, v in out.items()
              if k not in ("examples_per_second", "learning_rate")]
    parts.append(f"lr {out['learning_rate']:.3g}")
    parts.append(f"{out['examples_per_second']:.1f} ex/s")
    if self.train_steps:
      remaining = max(self.train_steps - step, 0) * seconds_per_step
      parts.append("ETA " + time.strftime("%H:%M:%S", time.gmtime(remaining)))
    return " | ".join(parts)

  # ---------------------------------------------------------------- eval
  def eval_begin(self):
    self._reset()
    return {}   # collected per-example outputs (Task.eval_outputs)

  def eval_step(self, iterator):
    def step(features):
      outputs = self.model(self.task.model_inputs(features), training=False)
      self._record(self.task.compute_stats(features, outputs))
      return self.task.eval_outputs(features, outputs) or {}
    return self.strategy.run(step, args=(next(iterator),))

  def eval_reduce(self, state=None, step_outputs=None):
    for name, value in (step_outputs or {}).items():
      state.setdefault(name, []).extend(
          np.asarray(v) for v in self.strategy.experimental_local_results(value))
    return state

  def eval_end(self, state=None):
    out = self._results()
    if state:
      out.update(self.task.eval_metrics(
          {k: np.concatenate(v) for k, v in state.items()}))
    if self.log_fn is not None:
      self.log_fn("eval | step " + str(int(self.optimizer.iterations.numpy()))
                  + " | " + " | ".join(f"{k} {v:.4f}" for k, v in out.items()))
    return out

