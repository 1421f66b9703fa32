"""bert-train: pre-train or fine-tune with a gin config and the one training loop.

  bert-train --task=glue_mrpc --init_checkpoint=CKPT --data_dir=glue/MRPC \\
      --model_dir=/tmp/mrpc --mode=train_and_eval
  bert-train --gin_file=pretrain_tiny.gin --model_dir=/tmp/tiny \\
      --gin_param='PretrainingInputs.train_files="/data/*.tfrecord"'

--task=NAME reads the bundled NAME.gin (glue_cola, glue_sst2, glue_mrpc,
glue_qqp, glue_stsb, glue_mnli, glue_qnli, glue_rte, glue_wnli, squad_v1,
squad_v2, ner_wnut17, swag, embedding, embedding_squad, distill,
pretrain_tiny ... pretrain_large);
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

import os

from absl import flags

from bert.scripts import _cli
from bert.scripts import _gin_config

FLAGS = flags.FLAGS
_gin_config.define_task_flags()
flags.DEFINE_enum("mode", "train", ["train", "eval", "train_and_eval", "predict"],
                  "What to run.")
flags.DEFINE_string("model_dir", None, "Checkpoints, summaries, config.")
flags.DEFINE_enum("strategy", None, ["auto", "one_device", "mirrored",
                                     "multi_worker_mirrored", "tpu"],
                  "Distribution strategy (multi_worker_mirrored reads "
                  "TF_CONFIG); overrides RuntimeConfig.strategy.")
flags.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
flags.DEFINE_enum("mixed_precision", None,
                  ["auto", "fp32", "bf16", "fp16",
                   # earlier names, still read
                   "float32", "mixed_float16", "mixed_bfloat16"],
                  "Precision (auto: bf16 where the CPU or GPU runs it fast, "
                  "else fp32, with XLA by what is faster); overrides "
                  "RuntimeConfig.mixed_precision.")
flags.DEFINE_bool("jit_compile", None, "XLA-compile the train step; "
                  "overrides RuntimeConfig.jit_compile (default: off, or what "
                  "--mixed_precision=auto chose).")
flags.DEFINE_integer("train_steps", None,
                     "Overrides RuntimeConfig.train_steps.")
flags.mark_flags_as_required(["model_dir"])


def _overrides():
  overrides = dict(strategy=FLAGS.strategy, tpu=FLAGS.tpu,
                   mixed_precision=FLAGS.mixed_precision,
                   jit_compile=FLAGS.jit_compile, train_steps=FLAGS.train_steps)
  return [f"RuntimeConfig.{k} = {v!r}" for k, v in overrides.items()
          if v is not None]


def main(argv):
  del argv
  import gin  # pylint: disable=g-import-not-at-top
  from bert import io as _io  # pylint: disable=g-import-not-at-top
  from bert.training import run as runner  # pylint: disable=g-import-not-at-top

  _gin_config.parse(_overrides())
  # Checked now, not after the training: written before the first step
  # and, complete, when it ends.
  config_file = _io.check_output_file(
      os.path.join(FLAGS.model_dir, "operative_config.gin"))
  runtime = runner.RuntimeConfig()
  # The strategy first: a multi-worker one must start before TensorFlow's
  # runtime, which building the task (a checkpoint, tokenized data) starts.
  strategy = runner.setup(runtime)
  task = _gin_config.build_task()
  _, results = runner.run_experiment(task, FLAGS.model_dir, FLAGS.mode,
                                     runtime, runner.OptimizerConfig(),
                                     strategy=strategy,
                                     run_config=gin.operative_config_str)
  # Whole or not at all: a run folder is read through this file.
  with _io.atomic_file(config_file) as f:
    f.write(runner.run_config_text(gin.operative_config_str,
                                   runtime.precision()))
  if results:
    print("final: " + " | ".join(f"{k} {v:.4f}" for k, v in results.items()))


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
