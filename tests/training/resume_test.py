"""A bert-train run killed with SIGKILL and started again with the same
command ends with the same weights as an uninterrupted run: weights, optimizer
state, data order, dynamic masks and dropout masks all resume."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

from conftest import (PRETRAIN_PRED, PRETRAIN_SEQ, REPO_ROOT, minilm_dir,
                      tiny_pretraining_config)

STEPS = 200


def write_gin(folder, records):
  config_file = os.path.join(folder, "bert_config.json")
  tiny_pretraining_config(dropout=0.1).to_json_file(config_file)
  gin_file = os.path.join(folder, "run.gin")
  with open(gin_file, "w") as f:
    f.write(f"""
build_task.task_class = @PretrainingTask
PretrainingTask.bert_config = "{config_file}"
PretrainingTask.train_files = "{records}"
PretrainingTask.seq_length = {PRETRAIN_SEQ}
PretrainingTask.max_predictions_per_seq = {PRETRAIN_PRED}
PretrainingTask.global_batch_size = 8
PretrainingTask.shuffle_buffer = 100
PretrainingTask.seed = 5
PretrainingTask.dynamic_masking = True
PretrainingTask.vocab_file = "{os.path.join(minilm_dir(), "vocab.txt")}"
RuntimeConfig.train_steps = {STEPS}
RuntimeConfig.steps_per_loop = 10
RuntimeConfig.checkpoint_interval = 20
RuntimeConfig.max_checkpoints = 3
OptimizerConfig.learning_rate = 1e-3
OptimizerConfig.warmup_steps = 10
""")
  return gin_file


def command(gin_file, model_dir):
  return [sys.executable, "-m", "bert.scripts.train", f"--gin_file={gin_file}",
          f"--model_dir={model_dir}", "--strategy=mirrored"]


def saved_steps(model_dir):
  names = os.listdir(model_dir) if os.path.isdir(model_dir) else []
  return [int(n[5:-6]) for n in names if n.startswith("ckpt-") and n.endswith(".index")]


def weights(model_dir):
  path = tf.train.latest_checkpoint(model_dir)
  reader = tf.train.load_checkpoint(path)
  return path, {n: reader.get_tensor(n) for n, _ in tf.train.list_variables(path)
                if n.startswith(("model/", "optimizer/", "dropout_rng/"))}


def test_sigkill_then_same_command_resumes_to_identical_weights(
    pretraining_records, tmp_path):
  gin_file = write_gin(str(tmp_path), pretraining_records)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
  subprocess.run(command(gin_file, straight), check=True, env=env, cwd=REPO_ROOT,
                 capture_output=True, timeout=600)

  proc = subprocess.Popen(command(gin_file, killed), env=env, cwd=REPO_ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + 300
  while max(saved_steps(killed), default=0) < 50:
    assert proc.poll() is None and time.time() < deadline, "run ended early"
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert proc.returncode == -signal.SIGKILL
  interrupted_at, _ = weights(killed)
  assert not interrupted_at.endswith(f"ckpt-{STEPS}")   # killed mid-run

  resumed = subprocess.run(command(gin_file, killed), check=True, env=env,
                           cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=600)
  assert "resumed from" in resumed.stdout, resumed.stdout[-2000:]
  path_a, a = weights(straight)
  path_b, b = weights(killed)
  assert path_a.endswith(f"ckpt-{STEPS}") and path_b.endswith(f"ckpt-{STEPS}")
  assert a.keys() == b.keys() and any(k.startswith("dropout_rng/") for k in a)
  diff = max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)
  print(f"max |diff| killed+resumed vs uninterrupted: {diff:.2e}")
  assert diff <= 1e-5, diff
  # The final config was written beside the checkpoints.
  assert "PretrainingTask.seed = 5" in open(
      os.path.join(killed, "operative_config.gin")).read()
