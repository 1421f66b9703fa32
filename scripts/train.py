"""bert-train: pre-train or fine-tune with a gin config and the one training loop.

  bert-train --task=glue_mrpc --init_checkpoint=CKPT --data_dir=glue/MRPC \\
      --model_dir=/tmp/mrpc --mode=train_and_eval
  bert-train --gin_file=pretrain_tiny.gin --model_dir=/tmp/tiny \\
      --gin_param='PretrainingInputs.train_files="/data/*.tfrecord"'

--task=NAME reads the bundled NAME.gin (glue_cola, glue_sst2, glue_mrpc,
glue_qqp, glue_stsb, glue_mnli, glue_qnli, glue_rte, glue_wnli, squad_v1,
squad_v2, ner_wnut17, swag, distill, pretrain_tiny ... pretrain_large);
--init_checkpoint and --data_dir set the configs' INIT_CHECKPOINT and
DATA_DIR. Distillation takes its task from a trained teacher run:

  bert-train --task=distill --model_dir=/tmp/student \
      --gin_param='DistillationTask.teacher="/tmp/mrpc"' \
      --gin_param='DistillationTask.student="teacher_layers:0,2,4"'
 --mode=predict writes the task's
predictions (GLUE: test_results.tsv) into --model_dir.

Gin files are paths or the names of bundled configs (bert/configs: for
pre-training pretrain_{tiny,mini,small,medium,base,large}.gin). The task is
`build_task.task_class` (default in the bundled files: PretrainingTask),
configured by concern (`EncoderSource.*`, `FinetuningInputs.*`,
`ClassificationData.*`, ...: bert/tasks/configs/), the run
`RuntimeConfig.*`, the optimiser `OptimizerConfig.*`. The flags
--strategy, --mixed_precision, --jit_compile, --train_steps override the
gin values. Running the same command again resumes from the newest
checkpoint in --model_dir. The final gin config is written there as
operative_config.gin.
"""

import contextlib
import os

from absl import app
from absl import flags
from absl import logging

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_multi_string("gin_file", [], "Gin config file(s): paths or "
                          "names of bundled configs.")
flags.DEFINE_multi_string("gin_param", [], "Gin bindings, e.g. "
                          "'RuntimeConfig.train_steps=100'.")
flags.DEFINE_string("task", None, "A bundled config by name (NAME.gin), "
                    "e.g. glue_mrpc; combined with any --gin_file.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint folder to start "
                    "from (any format bert.checkpoints.load reads).")
flags.DEFINE_string("data_dir", None, "The task's data folder.")
flags.DEFINE_enum("mode", "train", ["train", "eval", "train_and_eval", "predict"],
                  "What to run.")
flags.DEFINE_string("model_dir", None, "Checkpoints, summaries, config.")
flags.DEFINE_enum("strategy", None, ["auto", "one_device", "mirrored",
                                     "multi_worker_mirrored", "tpu"],
                  "Distribution strategy (multi_worker_mirrored reads "
                  "TF_CONFIG); overrides RuntimeConfig.strategy.")
flags.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
flags.DEFINE_enum("mixed_precision", None,
                  ["float32", "mixed_float16", "mixed_bfloat16"],
                  "Precision policy; overrides RuntimeConfig.mixed_precision.")
flags.DEFINE_bool("jit_compile", None, "XLA-compile the train step; "
                  "overrides RuntimeConfig.jit_compile.")
flags.DEFINE_integer("train_steps", None,
                     "Overrides RuntimeConfig.train_steps.")
flags.mark_flags_as_required(["model_dir"])


def _bindings():
  overrides = dict(strategy=FLAGS.strategy, tpu=FLAGS.tpu,
                   mixed_precision=FLAGS.mixed_precision,
                   jit_compile=FLAGS.jit_compile, train_steps=FLAGS.train_steps)
  macros = dict(INIT_CHECKPOINT=FLAGS.init_checkpoint, DATA_DIR=FLAGS.data_dir)
  return ([f"{k} = {v!r}" for k, v in macros.items() if v is not None]
          + list(FLAGS.gin_param)
          + [f"RuntimeConfig.{k} = {v!r}"
             for k, v in overrides.items() if v is not None])


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


def main(argv):
  del argv
  import gin  # pylint: disable=g-import-not-at-top
  from bert import tasks  # pylint: disable=g-import-not-at-top,unused-import
  from bert import configs  # pylint: disable=g-import-not-at-top
  from bert.training import run as runner  # pylint: disable=g-import-not-at-top
  from bert.validation import ConfigError, gin_error_line  # pylint: disable=g-import-not-at-top

  gin.add_config_file_search_path(os.path.dirname(configs.__file__))
  files = []
  bundled = os.path.dirname(configs.__file__)
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
  # Parsed one source at a time, so that any failure (syntax, an unknown
  # name, an import in a gin file) is named with its source even when gin
  # gives no line.
  for source, parse in [(f, lambda f=f: gin.parse_config_file(f))
                        for f in files] + [
                            ("--gin_param", lambda: gin.parse_config(_bindings())),
                            ("gin config", gin.finalize)]:
    try:
      with _gin_logs_off():
        parse()
    except Exception as e:  # pylint: disable=broad-except
      line = gin_error_line(e)
      raise ConfigError(line if source in line else f"{source}: {line}"
                        ) from None
  runtime = runner.RuntimeConfig()
  # The strategy first: a multi-worker one must start before TensorFlow's
  # runtime, which building the task (a checkpoint, tokenized data) starts.
  strategy = runner.setup(runtime)
  try:
    task = runner.build_task()
  except RuntimeError as e:
    if "Required bindings" not in str(e):
      raise
    raise ConfigError(f"gin config: {gin_error_line(e)} (set "
                      "build_task.task_class, or use --task)") from None
  _, results = runner.run_experiment(task, FLAGS.model_dir, FLAGS.mode,
                                     runtime, runner.OptimizerConfig(),
                                     strategy=strategy)
  with open(os.path.join(FLAGS.model_dir, "operative_config.gin"), "w") as f:
    f.write(gin.operative_config_str())
  if results:
    print("final: " + " | ".join(f"{k} {v:.4f}" for k, v in results.items()))


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
