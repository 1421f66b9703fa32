"""Two MultiWorkerMirroredStrategy workers on localhost and one single-worker
process, fed the same global batches, log the same losses for 10 steps."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from _runs import free_ports, losses
from conftest import REPO_ROOT

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "_same_batch_run.py")


# Two or three bert-train processes: ~40 s alone, minutes on a loaded
# 2-core CI machine, so outside the default suite (run with -m slow).
@pytest.mark.slow
def test_two_workers_match_one_worker(pretraining_records, tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  env.pop("TF_CONFIG", None)
  single = str(tmp_path / "single")
  multi = str(tmp_path / "multi")
  ports = free_ports(2)
  cluster = {"worker": [f"localhost:{p}" for p in ports]}
  workers = []
  for index in range(2):
    worker_env = dict(env, TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))
    workers.append(subprocess.Popen(
        [sys.executable, HELPER, multi, pretraining_records,
         "multi_worker_mirrored"], env=worker_env, cwd=REPO_ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  subprocess.run([sys.executable, HELPER, single, pretraining_records,
                  "mirrored"], env=env, cwd=REPO_ROOT, check=True,
                 capture_output=True, timeout=600)
  for w in workers:
    out, _ = w.communicate(timeout=600)
    assert w.returncode == 0, out[-3000:]

  a, b = losses(single), losses(multi)
  assert sorted(a) == sorted(b) == list(range(1, 11))
  diff = max(abs(a[s] - b[s]) for s in a)
  print(f"10 steps, max |loss diff| single vs 2 workers: {diff:.2e}")
  assert diff <= 1e-4, (diff, a, b)
  assert a[10] < a[1]   # it trained
  # Only the chief wrote checkpoints into model_dir.
  assert tf.train.latest_checkpoint(multi).endswith("ckpt-10")
