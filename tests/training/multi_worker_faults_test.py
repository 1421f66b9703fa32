"""Faults of a two-worker `bert-train` run (MultiWorkerMirroredStrategy on
127.0.0.1): a preempted worker stops the run at one step on both workers,
each with a checkpoint, and the same command resumes to the weights of an
uninterrupted run; a killed worker makes the survivor fail within the peer
timeout, naming it, and the same command resumes and finishes."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_ROOT
from _runs import free_ports, saved_steps, weights, write_gin

STEPS = 200
PEER_TIMEOUT = 10   # seconds (RuntimeConfig.peer_timeout_seconds; default 60)

pytestmark = pytest.mark.slow


def start_workers(gin_file, model_dir):
  ports = free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  procs = []
  for index in range(2):
    worker_env = dict(env, TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))
    procs.append(subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "bert-train"),
         f"--gin_file={gin_file}", f"--model_dir={model_dir}",
         "--strategy=multi_worker_mirrored",
         f"--gin_param=RuntimeConfig.peer_timeout_seconds={PEER_TIMEOUT}"],
        env=worker_env, cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True))
  return procs


def finish(procs, timeout=600):
  outs = [p.communicate(timeout=timeout) for p in procs]
  return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def start_and_wait_for_checkpoint(gin_file, model_dir, step=20):
  """Two workers started, once the chief has saved `step` (mid-run)."""
  procs = start_workers(gin_file, model_dir)
  wait_for_checkpoint(procs, model_dir, step)
  return procs


def resume(gin_file, model_dir, step):
  """Both workers run the same command again: they resume and finish."""
  for code, out, err in finish(start_workers(gin_file, model_dir)):
    assert code == 0, (out[-2000:], err[-3000:])
    assert f"resumed from {model_dir}/ckpt-{step} at step {step}" in out
  assert max(saved_steps(model_dir)) == STEPS


def wait_for_checkpoint(procs, model_dir, step):
  deadline = time.time() + 300
  while max(saved_steps(model_dir), default=0) < step:
    assert all(p.poll() is None for p in procs), "a worker ended early"
    assert time.time() < deadline
    time.sleep(0.05)


@pytest.fixture(scope="module")
def gin_and_reference(pretraining_records, tmp_path_factory):
  folder = str(tmp_path_factory.mktemp("mw_faults"))
  gin_file = write_gin(folder, pretraining_records)
  reference = os.path.join(folder, "reference")
  results = finish(start_workers(gin_file, reference))
  for code, out, err in results:
    assert code == 0, (out[-2000:], err[-3000:])
  assert max(saved_steps(reference)) == STEPS
  return gin_file, weights(reference)[1]


def test_sigterm_to_one_worker_stops_both_at_one_step_and_resumes_exactly(
    gin_and_reference, tmp_path):
  gin_file, reference = gin_and_reference
  model_dir = str(tmp_path / "run")
  procs = start_and_wait_for_checkpoint(gin_file, model_dir)
  procs[1].send_signal(signal.SIGTERM)
  results = finish(procs)
  steps = []
  for code, out, err in results:
    assert code == 0, (out[-2000:], err[-3000:])
    stopped = [l for l in out.splitlines() if l.startswith("stopped at step")]
    assert stopped, out[-2000:]
    steps.append(int(stopped[0].split()[3].rstrip(":")))
  assert steps[0] == steps[1] and 20 <= steps[0] < STEPS, steps
  assert tf.train.latest_checkpoint(model_dir).endswith(f"ckpt-{steps[0]}")
  print(f"SIGTERM to worker 1: both workers saved at step {steps[0]}")

  resume(gin_file, model_dir, steps[0])
  resumed = weights(model_dir)[1]
  diff = max(float(np.max(np.abs(resumed[k] - reference[k]))) for k in reference)
  print(f"resumed vs uninterrupted: max |w diff| {diff:.2e}")
  assert sorted(resumed) == sorted(reference)
  assert diff <= 1e-6


def test_sigkill_of_one_worker_fails_the_other_naming_it_then_resumes(
    gin_and_reference, tmp_path):
  gin_file, _ = gin_and_reference
  model_dir = str(tmp_path / "run")
  procs = start_and_wait_for_checkpoint(gin_file, model_dir)
  killed_at = time.time()
  procs[1].send_signal(signal.SIGKILL)
  code, out, err = finish(procs[:1], timeout=PEER_TIMEOUT + 30 + 60)[0]
  seconds = time.time() - killed_at
  print(f"SIGKILL to worker 1: worker 0 exited {code} after {seconds:.1f} s: "
        f"{err.strip().splitlines()[-1] if err.strip() else ''}")
  procs[1].wait()
  assert code != 0
  assert seconds <= PEER_TIMEOUT + 30
  last = err.strip().splitlines()[-1]
  assert last.startswith("error: ") and "task:1" in last, err[-3000:]
  assert "Traceback" not in err
  saved = max(saved_steps(model_dir))
  assert saved < STEPS
  resume(gin_file, model_dir, saved)
