"""`run_experiment`: the one way to train and evaluate a task.

Sets up strategy, precision, model, optimiser, input pipelines, checkpoints
(every `checkpoint_interval` steps, keeping `max_checkpoints`, automatic resume
from `model_dir`, including the input iterator so data order resumes too),
TensorBoard summaries and the orbit `Controller`.
"""

import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
import threading
from typing import Callable, Dict, Optional, Tuple

import orbit
import tensorflow as tf
import tf_keras

from bert.models._keras_training import dropout_generators
from bert import io as _io
from bert import precision as precision_lib
from bert.data import record_integrity
from bert.data.errors import DataError
from bert.tasks.base import Task
from bert.training import distribute
from bert.training import multi_worker
from bert.checkpoints import model_dir as model_dir_lib
from bert.training.model_dir_lock import model_dir_lock
from bert.optimization import OptimizerConfig, build_optimizer
from bert.training.runtime import RuntimeConfig, setup
from bert.training.trainer import NonFiniteLossError, Trainer, TrainingStopped

MODES = ("train", "eval", "train_and_eval", "predict")


class _StopRequest:
  """Set by SIGTERM: the loop saves a checkpoint and returns at the end of
  the current loop of `steps_per_loop` steps."""

  def __init__(self, log_fn):
    self.requested = False
    self.log_fn = log_fn
    self._previous = None

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    return self

  def _handle(self, signum, frame):
    del signum, frame
    self.requested = True
    if self.log_fn:
      self.log_fn("SIGTERM: saving a checkpoint at the end of this loop, then "
                  "stopping")

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


def _describe_batch(task: Task, strategy, batch_step: int) -> str:
  """Where the training batch of 0-based step `batch_step` came from (the
  data order is a function of the step, so the batch is rebuilt)."""
  replicas = strategy.num_replicas_in_sync
  pipelines = getattr(strategy.extended, "_num_workers", 1) or 1
  context = tf.distribute.InputContext(pipelines, 0, replicas)
  try:
    ds = task.build_inputs(context, training=True, start_step=batch_step)
    batches = list(ds.take(max(replicas // pipelines, 1)))
    where = "; ".join(task.describe_batch(b) for b in batches)
  except Exception as e:  # pylint: disable=broad-except
    return f"(the batch of step {batch_step + 1} could not be rebuilt: {e})"
  worker = " (worker 0's share)" if pipelines > 1 else ""
  return f"The batch of step {batch_step + 1}{worker} came from: {where}."


def _damaged_records(task: Task, message: str) -> DataError:
  """A DataError naming the damaged TFRecord file and record, for the
  `tf.errors.DataLossError` (which names no file; `message` is its text)
  that reading the task's records raised."""
  return record_integrity.damaged_record_error(task.record_files(), message)


def _floats(d):
  return {k: float(v) for k, v in (d or {}).items()}


def run_experiment(task: Task, model_dir: str, mode: str = "train",
                   runtime: Optional[RuntimeConfig] = None,
                   optimizer_config: Optional[OptimizerConfig] = None,
                   log_fn=print, strategy: Optional[tf.distribute.Strategy] = None,
                   run_config: Optional[Callable[[], str]] = None
                   ) -> Tuple[tf_keras.Model, Dict[str, float]]:
  """Trains and/or evaluates `task`; returns (the model, the last metrics).

  The model holds the newest weights and, for tasks with a Keras-path
  preprocessor (classification, tagging), `model.preprocessor`: so
  `model.predict` takes raw inputs and `model.export(path)` writes the
  serving SavedModel that `bert-export` writes for a `bert-train` run.

  Resumes from the newest checkpoint in `model_dir` if there is one, else
  calls `task.initialize(model)` (e.g. a distillation student from its
  teacher's layers; `task.build_model` gives a pre-trained encoder its
  weights).
  Raises NonFiniteLossError if the loss becomes NaN/Inf (the last good
  checkpoint stays the newest one in model_dir). On SIGTERM, saves a
  checkpoint at the end of the current loop and returns (with
  `stopped_at_step`). An unreadable newest checkpoint (interrupted write) is
  set aside and the one before it used. `strategy`: from `setup(runtime)`
  (made here when not given). `run_config`: gives the text of the run's
  operative_config.gin, written into model_dir before the first step (what
  makes it a run folder; `bert-train` writes the final one when it ends).
  """
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
  if (mode in ("eval", "predict")
      and model_dir_lib.newest_checkpoint(model_dir) is None):
    raise FileNotFoundError(f"mode={mode}: no checkpoint in {model_dir}")
  runtime = runtime or RuntimeConfig()
  strategy = strategy or setup(runtime, log_fn)
  if runtime.train_steps is None:
    runtime = dataclasses.replace(runtime, train_steps=task.num_train_steps())
  optimizer_config = (optimizer_config or OptimizerConfig()).with_steps(
      runtime.train_steps)
  created = not tf.io.gfile.exists(model_dir)
  model_dir_lib.check_writable(model_dir)
  try:
    chief = distribute.is_chief(strategy)
    # One run per model_dir (non-chief workers write elsewhere).
    with (model_dir_lock(model_dir, log_fn) if chief
          else contextlib.nullcontext()):
      return _run(task, model_dir, mode, runtime, optimizer_config, strategy,
                  chief, log_fn, run_config)
  except (ValueError, OSError):
    # Bad data, config or checkpoint found while setting up: a model_dir
    # this run created holds nothing worth keeping (no checkpoint), so it
    # is removed rather than left to look like a run.
    if created and model_dir_lib.newest_checkpoint(model_dir) is None:
      tf.io.gfile.rmtree(model_dir)
    raise


def run_config_text(run_config: Callable[[], str],
                    precision: precision_lib.PrecisionChoice) -> str:
  """The text of a run's operative_config.gin: `run_config()` and, as a
  comment, the precision that ran and why (the config may leave it to the
  default, whose choice depends on the machine)."""
  return f"{run_config().rstrip()}\n\n# {precision.describe()}\n"


def _run(task, model_dir, mode, runtime, optimizer_config, strategy, chief,
         log_fn, run_config):
  """`run_experiment` once the strategy is set up (and model_dir locked)."""
  precision = runtime.precision()   # the policy set by `setup`, and its XLA
  replicas = strategy.num_replicas_in_sync
  per_replica = task.global_batch_size // replicas
  if task.global_batch_size % replicas or per_replica % runtime.grad_accumulation_steps:
    raise ValueError(
        f"global_batch_size={task.global_batch_size} must divide into "
        f"{replicas} replica(s) x grad_accumulation_steps="
        f"{runtime.grad_accumulation_steps} equal micro-batches")

  with strategy.scope():
    model = task.build_model()
    if getattr(model, "preprocessor", False) is None and hasattr(task, "preprocessor"):
      model.attach_preprocessor(task.preprocessor())
    optimizer = build_optimizer(optimizer_config)
    if precision.policy == "mixed_float16":
      optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
  # Checkpointed: a resumed run continues the dropout masks.
  dropout_rng = dropout_generators(model)
  checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                   dropout_rng=dropout_rng)
  if chief and mode != "predict":
    model_dir_lib.remove_interrupted_writes(model_dir, log_fn)
    latest = model_dir_lib.recover_checkpoint_state(model_dir, log_fn)
  else:
    # Predictions and non-chief workers only read: the newest readable
    # checkpoint, with nothing on disk changed.
    latest = next(model_dir_lib.readable_checkpoints(model_dir, log_fn), None)
    if latest is None and mode == "predict":
      raise FileNotFoundError(f"mode=predict: no readable checkpoint in "
                              f"{model_dir}")
  # Non-chief workers must take part in saving (collectives) but write to a
  # scratch folder that is deleted afterwards; they restore from the chief's
  # folder below, never initialise through their manager.
  ckpt_dir = model_dir if chief else tempfile.mkdtemp(prefix="worker_ckpt_")
  manager = tf.train.CheckpointManager(
      checkpoint, ckpt_dir, max_to_keep=runtime.max_checkpoints,
      step_counter=optimizer.iterations,
      checkpoint_interval=runtime.checkpoint_interval or None,
      init_fn=(lambda: task.initialize(model)) if chief else None)
  multi = multi_worker.is_multi_worker(strategy)
  if mode in ("eval", "predict") or not chief:
    # Restored here: eval needs no optimizer slots (expect_partial), and
    # non-chief workers resume from the chief's folder.
    if latest:   # (eval and predict have one: checked in run_experiment)
      with model_dir_lib.explain_restore_errors(latest):
        checkpoint.restore(latest).expect_partial()
    else:
      task.initialize(model)
  if mode == "predict":
    damage = None
    try:
      path = model_dir_lib.write_predictions(task, model, model_dir)
    except tf.errors.DataLossError as e:
      damage = e.message   # (the traceback would keep the iterator alive)
    if damage is not None:
      raise _damaged_records(task, damage)
    if log_fn:
      log_fn(f"predictions of {latest} written to {path}")
    return model, {}
  # Multi-worker: SIGTERM on any worker stops all at the same step, each
  # with a checkpoint (TensorFlow's PreemptionCheckpointHandler; it also
  # restores the newest checkpoint on the chief, as the Controller does).
  preemption = None
  if multi and mode != "eval":
    with model_dir_lib.explain_restore_errors(latest):
      preemption = multi_worker.Preemption(strategy, manager,
                                           optimizer.iterations)
  trainer = Trainer(task, model, optimizer, strategy,
                    grad_accumulation_steps=runtime.grad_accumulation_steps,
                    clip_norm=optimizer_config.clip_norm,
                    jit_compile=precision.jit_compile,
                    train_steps=runtime.train_steps,
                    max_skipped_steps=runtime.max_skipped_steps, log_fn=log_fn)
  # The Controller restores the newest checkpoint (or runs task.initialize).
  with model_dir_lib.explain_restore_errors(latest):
    controller = orbit.Controller(
        strategy=strategy,
        trainer=trainer if mode != "eval" else None,
        evaluator=trainer if mode != "train" else None,
        global_step=optimizer.iterations,
        steps_per_loop=runtime.steps_per_loop,
        checkpoint_manager=manager if chief and mode != "eval" else None,
        summary_interval=(runtime.summary_interval or runtime.steps_per_loop)
        if chief else None,
        summary_dir=os.path.join(model_dir, "train") if chief else None,
        eval_summary_dir=os.path.join(model_dir, "eval") if chief else None,
        train_actions=[preemption] if preemption else None)
  if not chief and mode != "eval":
    controller.checkpoint_manager = manager   # saves only; nothing to restore
  # The data pipelines are built after the restore: training data starts at
  # the restored step, so a resumed run sees what an uninterrupted one would.
  start_step = int(optimizer.iterations.numpy())
  if latest and log_fn:
    log_fn(f"resumed from {latest} at step {start_step}")
  if mode != "eval":
    trainer.train_dataset = strategy.distribute_datasets_from_function(
        lambda ctx: task.build_inputs(ctx, training=True, start_step=start_step))
  if mode != "train":
    trainer.eval_dataset = strategy.distribute_datasets_from_function(
        lambda ctx: task.build_inputs(ctx, training=False))
  # One process: our own SIGTERM handler (the handler above owns it on
  # multi-worker runs).
  stop = _StopRequest(log_fn) if not multi else contextlib.nullcontext()
  trainer.stop_requested = lambda: getattr(stop, "requested", False)
  watchdog = (multi_worker.Watchdog(log_fn=log_fn) if multi
              else contextlib.nullcontext())
  if run_config is not None and chief and mode != "eval":
    # Before the first step, so a run killed before it ends is still a run
    # folder that export, convert and distillation can load.
    config = os.path.join(model_dir, model_dir_lib.RUN_CONFIG)
    with _io.atomic_file(config) as f:
      f.write(run_config_text(run_config, precision))
  damage = None
  try:
    with stop, watchdog:
      if mode == "train":
        controller.train(steps=runtime.train_steps)   # saves at completion
        results = trainer.last_train_results
      elif mode == "eval":
        results = _floats(controller.evaluate(steps=runtime.eval_steps))
      else:
        results = _floats(controller.train_and_evaluate(
            train_steps=runtime.train_steps, eval_steps=runtime.eval_steps,
            eval_interval=runtime.eval_interval))
  except NonFiniteLossError as e:
    raise type(e)(f"{e} {_describe_batch(task, strategy, e.batch_step)}",
                  e.step) from None
  except tf.errors.DataLossError as e:
    damage = e.message     # raised below: the traceback holds the iterator
  except TrainingStopped as e:
    if not e.saved:
      manager.save(checkpoint_number=optimizer.iterations, check_interval=False)
    if log_fn:
      log_fn(f"stopped at step {e.step}: checkpoint saved in {model_dir}; run "
             "the same command to resume")
    results = dict(trainer.last_train_results, stopped_at_step=float(e.step))
  except multi_worker.CLUSTER_ERRORS as e:
    if not multi:
      raise
    raise multi_worker.WorkerLostError(multi_worker.describe_lost(
        e, runtime.peer_timeout_seconds)) from None
  except tf.errors.OpError as e:
    code = _io.disk_error(e)
    if code is None or not chief:
      raise
    raise model_dir_lib.checkpoint_write_failed(model_dir, code, log_fn) from None
  finally:
    if not chief:
      shutil.rmtree(ckpt_dir, ignore_errors=True)
  if damage is not None:
    raise _damaged_records(task, damage)
  if multi:
    multi_worker.exit_barrier(runtime.peer_timeout_seconds, log_fn)
  return model, results
