"""A bert-train run killed with SIGKILL and started again with the same
command ends with the same weights as an uninterrupted run: weights, optimizer
state, data order, dynamic masks and dropout masks all resume."""

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from _runs import STEPS, command, saved_steps, weights, write_gin
from conftest import REPO_ROOT


# Two or three bert-train processes: ~40 s alone, minutes on a loaded
# 2-core CI machine, so outside the default suite (run with -m slow).
@pytest.mark.slow
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
  assert "PretrainingInputs.seed = 5" in open(
      os.path.join(killed, "operative_config.gin")).read()
