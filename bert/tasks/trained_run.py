"""Re-creates a trained `bert-train` run (task and weights) from its model_dir.

The run's operative_config.gin (read as data: no import or include in it is
followed) rebuilds its task exactly as trained (same vocabulary, casing,
sequence length, labels), and the newest readable checkpoint in the model_dir
restores the model. `export_trained` then writes the task's serving
SavedModel with the graphs of `bert.export`.
"""

import contextlib
import copy
import os
import sys
import tokenize
from typing import NamedTuple, Optional

from absl import logging
import gin
from gin import config_parser
import tensorflow as tf

# A run's config names its task class: every task registers with gin when
# the bert.tasks package is initialised, which Python does before this module.
from bert.tasks.base import build_task
from bert.tasks.classification import ClassificationTask
from bert.tasks.embedding import EmbeddingTask
from bert.tasks.question_answering import QuestionAnsweringTask
from bert.tasks.token_classification import TokenClassificationTask
from bert import checkpoints
from bert import networks
from bert.checkpoints import CheckpointError
from bert.errors import DataError
from bert import io as _io
from bert import precision as precision_lib
from bert.errors import UserError
from bert.checkpoints import model_dir as model_dir_lib
from bert.validation import ConfigError, error_type, gin_error_line

RUN_CONFIG = model_dir_lib.RUN_CONFIG
# What restoring a truncated or corrupt checkpoint raises.
_RESTORE_ERRORS = (tf.errors.OpError, ValueError, AssertionError, IndexError)


class TrainedRun(NamedTuple):
  task: object        # the run's Task, rebuilt from its operative_config.gin
  model: object       # its model, restored (a distillation run: the student)
  checkpoint: str     # the checkpoint the weights came from


def load_trained_task(model_dir: str):
  """(task, model) of a `bert-train` run: the task rebuilt from the run's
  operative_config.gin, the model with the newest readable checkpoint's
  weights (see `load_trained_run`)."""
  run_ = load_trained_run(model_dir)
  return run_.task, run_.model


def load_trained_run(model_dir: str, log_fn=logging.warning) -> TrainedRun:
  """A `bert-train` run as it was trained: its task rebuilt from its
  operative_config.gin (read as data: `read_run_config`), its model restored
  from the newest checkpoint on disk that reads; an unreadable newer one (an
  interrupted write) is skipped with a log line, as `bert-train` skips it.
  Nothing in model_dir is changed."""
  config = os.path.join(model_dir, RUN_CONFIG)
  if not os.path.exists(config):
    raise FileNotFoundError(f"{config}: not a bert-train model_dir (no "
                            f"{RUN_CONFIG})")
  candidates = model_dir_lib.checkpoints_on_disk(model_dir)
  if not candidates:
    raise FileNotFoundError(f"{model_dir}: no checkpoint")
  text = read_run_config(config)
  with _gin_config_of_its_own():
    try:
      gin.parse_config(text, skip_unknown=True)
      # A loaded run needs its model, not its pre-training data (which may
      # have moved since): the task must not look for the files.
      gin.bind_parameter("PretrainingInputs.train_files", "")
      gin.bind_parameter("PretrainingInputs.eval_files", "")
      gin.finalize()   # references to configurables checked now, not in use
    except (ValueError, TypeError, SyntaxError, tokenize.TokenError) as e:
      raise ConfigError(f"{config}: {gin_error_line(e)}") from None
    try:
      task = build_task()
    except (UserError, OSError) as e:
      # Named with the config it came from, on one line (gin appends where
      # the call was on lines of its own).
      raise error_type(e)(f"{config}: {gin_error_line(e)}") from None
  model = task.build_model()
  for prefix in reversed(candidates):
    try:
      status = tf.train.Checkpoint(model=model).restore(prefix)
      # Every weight of the model must come from the checkpoint (the
      # optimizer's slots and the step counter need not).
      status.expect_partial().assert_existing_objects_matched()
    except _RESTORE_ERRORS as e:
      why = model_dir_lib.unreadable(prefix)
      if why is None:   # it reads: it is another model's checkpoint
        raise CheckpointError(
            f"{prefix}: not this run's model ({type(e).__name__}: "
            f"{str(e).strip().splitlines()[0][:300]})") from None
      if log_fn:
        log_fn(f"checkpoint {prefix} is unreadable ({why}); trying the one "
               "before it")
      continue
    # A distillation run serves (and teaches) as its student.
    task, model = task.trained_model(model)
    return TrainedRun(task, model, prefix)
  raise CheckpointError(f"{model_dir}: no readable checkpoint (each of "
                        f"{', '.join(os.path.basename(c) for c in candidates)}"
                        " is truncated or corrupt)")


def run_checkpoint(folder: str, with_heads: bool = False):
  """A `bert-train` model_dir's encoder, rebuilt and restored as the run
  left it, as a `BertCheckpoint` (the "run" format of `bert.checkpoints.load`,
  registered by the front door, bert/__init__.py)."""
  try:
    task, model = load_trained_task(folder)
  except (FileNotFoundError, ConfigError, DataError) as e:
    raise CheckpointError(f"{folder}: a bert-train run that cannot be "
                          f"loaded: {e}") from None
  encoder = getattr(model, "encoder", None)
  if not isinstance(encoder, networks.BertEncoder):
    raise CheckpointError(f"{folder}: the run's {type(model).__name__} has no "
                          "BertEncoder")
  result = checkpoints.BertCheckpoint(config=encoder.config, encoder=encoder,
                          vocab_file=task.vocab_file,
                          lower_case=task.lower_case, format="run")
  heads = [getattr(model, name, None) for name in ("masked_lm", "next_sentence")]
  if with_heads and all(h is not None for h in heads):
    result.masked_lm, result.next_sentence = heads
  kept = {id(w) for part in (encoder, result.masked_lm, result.next_sentence)
          if part is not None for w in part.weights}
  result.ignored_variables = sorted(
      {w.name for w in model.weights if id(w) not in kept})
  return result


def read_run_config(path: str) -> str:
  """The text of a run's operative_config.gin, made safe to parse: loading a
  run never executes code from it. gin would run every `import` line (any
  module, including a .py shipped beside the config) and follow every
  `include`; here an import of a module that is already loaded (a no-op) is
  blanked out, and any other import, an include, or gin's dynamic
  registration is a ConfigError naming the line. Line numbers are kept, so
  gin's own errors still point at the file's lines."""
  text = _io.read_text(path)
  lines = text.split("\n")
  try:
    statements = list(config_parser.ConfigParser(text, _Delegate()))
  except (SyntaxError, ValueError, tokenize.TokenError) as e:
    raise ConfigError(f"{path}: not a valid gin config "
                      f"({gin_error_line(e)})") from None
  for statement in statements:
    if isinstance(statement, config_parser.IncludeStatement):
      raise ConfigError(
          f"{path}:{statement.location.line_num}: includes "
          f"{statement.filename!r}; a run's config is read as data and "
          "never includes other files")
    if isinstance(statement, config_parser.ImportStatement):
      module = statement.module
      if module.startswith("__gin__") or module not in sys.modules:
        raise ConfigError(
            f"{path}:{statement.location.line_num}: imports {module!r}; "
            "loading a run never executes code from its config (import the "
            "module yourself first if you trust it)")
      number = statement.location.line_num
      lines[number - 1] = ""
  return "\n".join(lines)


class _Delegate(config_parser.ParserDelegate):
  """Parses values without resolving references: the scan only looks at
  the statements' kinds (gin resolves them when it binds)."""

  def configurable_reference(self, scoped_name, evaluate):
    return scoped_name

  def macro(self, macro_name):
    return macro_name


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
                   precision: Optional[str] = None,
                   max_accuracy_drop: Optional[float] = None,
                   gate=None, runtime: Optional[str] = None) -> dict:
  """Exports the serving model of a fine-tuned `bert-train` run, by its task:
  classifier, span_labeler, tagger or embedder, at `precision` (fp32, bf16,
  int8; None, the default, is "auto" unless BERT_PRECISION says otherwise:
  the fastest export here that passes the gate), its network run by
  `runtime` (`bert.export.write_serving`). A
  reduced precision, or a network converted to another runtime, must pass
  the accuracy gate (`gate`, default the task's eval split,
  `max_accuracy_drop` points below fp32; default per task, see
  `bert.serving.gate`) or nothing is written. Returns the export's manifest
  (its `kind`, `precision`, the gate's figures); a `kind` given that the run
  is not is an error, before anything is written."""
  from bert import export  # pylint: disable=g-import-not-at-top
  precision = export.check_precision(precision_lib.default(precision))
  task, model = load_trained_task(model_dir)
  kinds = ((ClassificationTask, "classifier"),
           (TokenClassificationTask, "tagger"),
           (QuestionAnsweringTask, "span_labeler"),
           (EmbeddingTask, "embedder"))
  for task_class, run_kind in kinds:
    if isinstance(task, task_class):
      if kind is not None and kind != run_kind:
        raise ConfigError(f"{model_dir} is a {run_kind} run, not a {kind}; "
                          f"use --kind={run_kind}")
      # The same export as a model trained from Python (`model.export`).
      model.attach_preprocessor(task.preprocessor())
      if gate is None and (precision != "fp32" or
                           runtime not in (None, "saved_model")):
        gate = task.serving_gate(max_drop=max_accuracy_drop)
      return model.export(path, precision=precision, gate=gate,
                          runtime=runtime)
  raise ConfigError(f"{model_dir} trained a {type(task).__name__}, which has no "
                   "serving export (classification, QA, tagging and embedding do)")
