"""Faults during training: SIGTERM, an interrupted checkpoint write."""

import os
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from conftest import REPO_ROOT, pretraining_task
from _runs import STEPS, command, saved_steps, write_gin


# bert-train processes: 30-75 s on a loaded 2-core CI machine, so outside the
# default suite like resume_test and multi_worker_test (run with -m slow).
@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_exits_cleanly(pretraining_records, tmp_path):
  gin_file = write_gin(str(tmp_path), pretraining_records)
  model_dir = str(tmp_path / "run")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.Popen(command(gin_file, model_dir), env=env, cwd=REPO_ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True)
  deadline = time.time() + 300
  while max(saved_steps(model_dir), default=0) < 10:
    assert proc.poll() is None and time.time() < deadline, "run ended early"
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=300)
  assert proc.returncode == 0, out[-2000:]
  stopped = [l for l in out.splitlines() if l.startswith("stopped at step")]
  assert stopped, out[-2000:]
  step = int(stopped[0].split()[3].rstrip(":"))
  assert 10 <= step < STEPS and step % 10 == 0        # at a loop boundary
  assert tf.train.latest_checkpoint(model_dir).endswith(f"ckpt-{step}")
  resumed = subprocess.run(command(gin_file, model_dir), env=env, cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=600)
  assert f"resumed from {model_dir}/ckpt-{step} at step {step}" in resumed.stdout
  assert tf.train.latest_checkpoint(model_dir).endswith(f"ckpt-{STEPS}")


def train(records, model_dir, steps, log=None):
  run_experiment(pretraining_task(records, dropout=0.1), model_dir, "train",
                 RuntimeConfig(train_steps=steps, steps_per_loop=2,
                               checkpoint_interval=2, strategy="one_device", seed=1),
                 OptimizerConfig(learning_rate=1e-3, num_train_steps=8),
                 log_fn=log.append if log is not None else None)
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
  return {n: reader.get_tensor(n) for n, _ in
          tf.train.list_variables(tf.train.latest_checkpoint(model_dir))
          if n.startswith("model/")}


@pytest.mark.slow
def test_unreadable_newest_checkpoint_falls_back_to_the_previous(
    pretraining_records, tmp_path):
  straight = train(pretraining_records, str(tmp_path / "straight"), 8)
  broken = str(tmp_path / "broken")
  train(pretraining_records, broken, 6)
  data = f"{broken}/ckpt-6.data-00000-of-00001"
  with open(data, "r+b") as f:          # a write cut short
    f.truncate(os.path.getsize(data) // 2)
  log = []
  resumed = train(pretraining_records, broken, 8, log)
  assert any("ckpt-6 is unreadable" in l for l in log), log
  assert any(l.startswith(f"resumed from {broken}/ckpt-4 at step 4") for l in log)
  assert os.path.exists(data + ".unreadable")
  assert max(float(np.abs(straight[k] - resumed[k]).max()) for k in straight) <= 1e-5
