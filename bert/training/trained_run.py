"""Re-creates a trained `bert-train` run (task and weights) from its model_dir.

The run's operative_config.gin rebuilds its task exactly as trained (same
vocabulary, casing, sequence length, labels), and the newest checkpoint in the
model_dir restores the model. `export_trained` then writes the task's serving
SavedModel with the graphs of `bert.export`.
"""

import contextlib
import copy
import os
from typing import Optional

import gin
import tensorflow as tf

# Imported for its gin registrations too: the run's config names task classes.
from bert import tasks
from bert.checkpoints import CheckpointError
from bert.training import run
from bert.validation import ConfigError, gin_error_line


def load_trained_task(model_dir: str):
  """(task, model) of a `bert-train` run: the task rebuilt from the run's
  operative_config.gin, the model with the newest checkpoint's weights."""
  config = os.path.join(model_dir, "operative_config.gin")
  if not os.path.exists(config):
    raise FileNotFoundError(f"{config}: not a bert-train model_dir (no "
                            "operative_config.gin)")
  latest = tf.train.latest_checkpoint(model_dir)
  if latest is None:
    raise FileNotFoundError(f"{model_dir}: no checkpoint")
  with _gin_config_of_its_own():
    try:
      gin.parse_config_file(config, skip_unknown=True)
    except (ValueError, TypeError, SyntaxError) as e:
      raise ConfigError(f"{config}: {gin_error_line(e)}") from None
    # A loaded run needs its model, not its pre-training data (which may
    # have moved since): the task must not look for the files.
    gin.bind_parameter("PretrainingInputs.train_files", "")
    gin.bind_parameter("PretrainingInputs.eval_files", "")
    task = run.build_task()
  model = task.build_model()
  try:
    status = tf.train.Checkpoint(model=model).restore(latest)
    # Every weight of the model must come from the checkpoint (the
    # optimizer's slots and the step counter need not).
    status.expect_partial().assert_existing_objects_matched()
  except (tf.errors.OpError, ValueError, AssertionError) as e:
    raise CheckpointError(f"{latest}: unreadable or not this run's model "
                          f"({type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0][:300]})") from None
  # A distillation run serves (and teaches) as its student.
  return task.trained_model(model)


@contextlib.contextmanager
def _gin_config_of_its_own():
  """Parses a run's config with gin's global config set aside, and puts the
  caller's back afterwards: a run being configured (a distillation run
  loading its teacher run) keeps its own bindings."""
  from gin import config as gin_config  # pylint: disable=g-import-not-at-top
  names = ("_CONFIG", "_OPERATIVE_CONFIG", "_SINGLETONS", "_IMPORTS")
  saved = {name: copy.copy(getattr(gin_config, name)) for name in names}
  locked = gin_config.config_is_locked()
  gin.clear_config()
  try:
    yield
  finally:
    gin.clear_config()
    for name, value in saved.items():
      getattr(gin_config, name).update(value)
    gin_config._set_config_is_locked(locked)  # pylint: disable=protected-access


def export_trained(model_dir: str, path: str, kind: Optional[str] = None,
                   precision: str = "fp32",
                   max_accuracy_drop: Optional[float] = None) -> dict:
  """Exports the serving model of a fine-tuned `bert-train` run, by its task:
  classifier, span_labeler or tagger, at `precision` (fp32, bf16, int8).
  A reduced precision must pass the accuracy gate on the task's eval split
  (`max_accuracy_drop` points below fp32; default per task, see
  `bert.serving.gate`) or nothing is written. Returns the export's manifest
  (its `kind`, `precision`, the gate's figures); a `kind` given that the run
  is not is an error, before anything is written."""
  from bert import export  # pylint: disable=g-import-not-at-top
  export.check_precision(precision)
  task, model = load_trained_task(model_dir)
  kinds = ((tasks.ClassificationTask, "classifier"),
           (tasks.TokenClassificationTask, "tagger"),
           (tasks.QuestionAnsweringTask, "span_labeler"))
  for task_class, run_kind in kinds:
    if isinstance(task, task_class):
      if kind is not None and kind != run_kind:
        raise ConfigError(f"{model_dir} is a {run_kind} run, not a {kind}; "
                          f"use --kind={run_kind}")
      # The same export as a model trained from Python (`model.export`).
      model.attach_preprocessor(task.preprocessor())
      gate = (None if precision == "fp32"
              else task.serving_gate(max_drop=max_accuracy_drop))
      return model.export(path, precision=precision, gate=gate)
  raise ConfigError(f"{model_dir} trained a {type(task).__name__}, which has no "
                   "serving export (classification, QA and tagging do)")
