"""What the training-run tests share: a small pre-training run as a gin file,
the bert-train command that runs it, and readers of what a run leaves in its
model_dir (checkpoint steps, saved weights, TensorBoard losses)."""

import os
import socket
import sys

import tensorflow as tf

from conftest import PRETRAIN_PRED, PRETRAIN_SEQ, tiny_pretraining_config, vocab

STEPS = 200


def write_gin(folder, records):
  config_file = os.path.join(folder, "bert_config.json")
  tiny_pretraining_config(dropout=0.1).to_json_file(config_file)
  gin_file = os.path.join(folder, "run.gin")
  with open(gin_file, "w") as f:
    f.write(f"""
build_task.task_class = @PretrainingTask
EncoderSource.bert_config = "{config_file}"
PretrainingInputs.train_files = "{records}"
PretrainingInputs.seq_length = {PRETRAIN_SEQ}
PretrainingInputs.max_predictions_per_seq = {PRETRAIN_PRED}
PretrainingInputs.global_batch_size = 8
PretrainingInputs.shuffle_buffer = 100
PretrainingInputs.seed = 5
PretrainingInputs.dynamic_masking = True
EncoderSource.vocab_file = "{vocab()}"
RuntimeConfig.train_steps = {STEPS}
RuntimeConfig.steps_per_loop = 10
RuntimeConfig.checkpoint_interval = 20
RuntimeConfig.max_checkpoints = 3
OptimizerConfig.learning_rate = 1e-3
OptimizerConfig.warmup_steps = 10
""")
  return gin_file


def command(gin_file, model_dir, strategy="mirrored"):
  """The bert-train command line of a run (the worktree's code: `python -m`,
  not the installed console script)."""
  return [sys.executable, "-m", "bert.scripts.train", f"--gin_file={gin_file}",
          f"--model_dir={model_dir}", f"--strategy={strategy}"]


def saved_steps(model_dir):
  names = os.listdir(model_dir) if os.path.isdir(model_dir) else []
  return [int(n[5:-6]) for n in names if n.startswith("ckpt-") and n.endswith(".index")]


def weights(model_dir):
  path = tf.train.latest_checkpoint(model_dir)
  reader = tf.train.load_checkpoint(path)
  return path, {n: reader.get_tensor(n) for n, _ in tf.train.list_variables(path)
                if n.startswith(("model/", "optimizer/", "dropout_rng/"))}


def free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("localhost", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


def summaries(folder, tag):
  """step -> value of the scalar `tag` in the TensorBoard event files of
  `folder` (a run's model_dir/train or model_dir/eval)."""
  out = {}
  for f in tf.io.gfile.glob(os.path.join(folder, "events.*")):
    for event in tf.compat.v1.train.summary_iterator(f):
      for v in event.summary.value:
        if v.tag == tag:
          out[event.step] = float(tf.make_ndarray(v.tensor))
  return out


def losses(model_dir):
  """step -> training loss from the run's TensorBoard event files."""
  return summaries(os.path.join(model_dir, "train"), "loss")
