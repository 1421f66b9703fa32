"""The gin set-up that `bert-train` and `bert-create-finetuning-data` share:
--task (a bundled NAME.gin), --gin_file and --gin_param, with
--init_checkpoint and --data_dir as the configs' INIT_CHECKPOINT and
DATA_DIR, so one command line names the same task in both."""

import contextlib
import os

from absl import app
from absl import flags
from absl import logging

FLAGS = flags.FLAGS


def define_task_flags():
  """The flags that name and configure a task."""
  flags.DEFINE_multi_string("gin_file", [], "Gin config file(s): paths or "
                            "names of bundled configs.")
  flags.DEFINE_multi_string("gin_param", [], "Gin bindings, e.g. "
                            "'RuntimeConfig.train_steps=100'.")
  flags.DEFINE_string("task", None, "A bundled config by name (NAME.gin), "
                      "e.g. glue_mrpc; combined with any --gin_file.")
  flags.DEFINE_string("init_checkpoint", None, "Checkpoint folder to start "
                      "from (any format bert.checkpoints.load reads).")
  flags.DEFINE_string("data_dir", None, "The task's data folder.")


@contextlib.contextmanager
def _gin_logs_off():
  """gin logs an ERROR ("Path not found") for each search path an `include`
  is not found on before the one it is; what really fails, it raises."""
  level = logging.get_verbosity()
  logging.set_verbosity(logging.FATAL)
  try:
    yield
  finally:
    logging.set_verbosity(level)


def sources(extra_bindings=()):
  """(gin files, bindings) the flags name: the bundled --task config, the
  --gin_file's, then the macros, --gin_param and `extra_bindings`."""
  from bert import configs  # pylint: disable=g-import-not-at-top
  bundled = os.path.dirname(configs.__file__)
  files = []
  if FLAGS.task:
    f = os.path.join(bundled, f"{FLAGS.task}.gin")
    if not os.path.exists(f):
      names = sorted(n[:-4] for n in os.listdir(bundled) if n.endswith(".gin"))
      raise app.UsageError(f"--task={FLAGS.task}: no bundled config of that "
                           f"name; known: {', '.join(names)}")
    files.append(f)
  for f in FLAGS.gin_file:
    if not os.path.exists(f) and os.path.exists(os.path.join(bundled, f)):
      f = os.path.join(bundled, f)
    if not os.path.exists(f):
      raise FileNotFoundError(f"--gin_file={f}: no such file (and no bundled "
                              f"config of that name)")
    files.append(f)
  if not files:
    raise app.UsageError("give --task or --gin_file")
  macros = dict(INIT_CHECKPOINT=FLAGS.init_checkpoint, DATA_DIR=FLAGS.data_dir)
  bindings = ([f"{k} = {v!r}" for k, v in macros.items() if v is not None]
              + list(FLAGS.gin_param) + list(extra_bindings))
  return files, bindings


def parse_sources(files, bindings):
  """Parses gin `files` then `bindings`; a failure is a ConfigError naming
  its source."""
  import gin  # pylint: disable=g-import-not-at-top
  # pylint: disable=g-import-not-at-top
  # Imported for their gin configurables: the tasks and their configs, and
  # the runtime's (RuntimeConfig, OptimizerConfig).
  from bert import tasks, training  # noqa: F401 pylint: disable=unused-import
  from bert import configs
  from bert.validation import ConfigError, gin_error_line
  gin.add_config_file_search_path(os.path.dirname(configs.__file__))
  # Parsed one source at a time, so that any failure (syntax, an unknown
  # name, an import in a gin file) is named with its source even when gin
  # gives no line.
  for source, step in [(f, lambda f=f: gin.parse_config_file(f))
                       for f in files] + [
                           ("--gin_param", lambda: gin.parse_config(bindings)),
                           ("gin config", gin.finalize)]:
    try:
      with _gin_logs_off():
        step()
    except Exception as e:  # pylint: disable=broad-except
      line = gin_error_line(e)
      raise ConfigError(line if source in line else f"{source}: {line}"
                        ) from None


def parse(extra_bindings=()):
  """Parses the gin config the flags name (`sources`)."""
  parse_sources(*sources(extra_bindings))


def task_from_sources(files, bindings):
  """The task of gin `files` and `bindings`, built in a fresh process (a
  worker of bert-create-finetuning-data --num_processes)."""
  parse_sources(files, bindings)
  return build_task()


def build_task():
  """`build_task()` of the parsed config."""
  from bert.tasks import build_task as build  # pylint: disable=g-import-not-at-top
  return build()
