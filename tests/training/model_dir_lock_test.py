"""One run per model_dir: a second run is refused while the first lives,
and the lock of a killed run is taken over."""

import os
import signal
import subprocess
import sys

import pytest

from bert.training import RuntimeConfig, run_experiment
from bert.training.model_dir_lock import LOCK_FILE, ModelDirInUseError
from tasks._tasks import make_task

import bert.training.model_dir_lock as lock_module

# A process that takes the lock with the library's own code, says so, and
# holds it until killed (the module imports nothing of TensorFlow).
HOLDER = f"""
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("lock", {lock_module.__file__!r})
lock = importlib.util.module_from_spec(spec); spec.loader.exec_module(lock)
with lock.model_dir_lock(sys.argv[1]):
  print("locked", flush=True)
  time.sleep(600)
"""


def _hold(model_dir):
  proc = subprocess.Popen([sys.executable, "-c", HOLDER, model_dir],
                          stdout=subprocess.PIPE, text=True)
  assert proc.stdout.readline().strip() == "locked"
  return proc


def _one_step(task, model_dir, lines):
  return run_experiment(task, model_dir, "train",
                        RuntimeConfig(train_steps=1, steps_per_loop=1),
                        log_fn=lines.append)


def test_second_run_is_refused_and_a_killed_runs_lock_is_taken_over(tmp_path):
  task = make_task(tmp_path)
  model_dir = str(tmp_path / "model")
  os.makedirs(model_dir)
  holder = _hold(model_dir)
  try:
    with pytest.raises(ModelDirInUseError) as e:
      _one_step(task, model_dir, [])
    message = str(e.value)
    assert "\n" not in message
    assert f"is in use by another run (pid {holder.pid} on" in message
    assert not [f for f in os.listdir(model_dir) if f.startswith("ckpt")]
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  # The holder died without releasing: the next run takes over, and says so.
  lines = []
  _one_step(task, model_dir, lines)
  assert any(f"took over the lock of a run that is no longer running (pid "
             f"{holder.pid}" in l for l in lines), lines
  assert [f for f in os.listdir(model_dir) if f.startswith("ckpt-1")]
  # A clean end leaves no holder: the next run takes over nothing.
  lines = []
  run_experiment(task, model_dir, "eval", RuntimeConfig(), log_fn=lines.append)
  assert not any("took over" in l for l in lines)
  assert os.path.getsize(os.path.join(model_dir, LOCK_FILE)) == 0


@pytest.mark.heavy
def test_interrupted_checkpoint_write_is_cleaned_up_on_the_next_start(tmp_path):
  """TensorFlow writes a checkpoint's shards into `ckpt-N_temp/` and merges
  them; `kill -9` in between leaves that folder. The next run removes it
  (and says so); other folders are left alone."""
  task = make_task(tmp_path)
  model_dir = tmp_path / "model"
  left = model_dir / "ckpt-3_temp"
  left.mkdir(parents=True)
  (left / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x" * 1000)
  (left / "part-00000-of-00001.index").write_bytes(b"x")
  mine = model_dir / "my_notes_temp"          # not a checkpoint's: kept
  mine.mkdir()
  lines = []
  _one_step(task, str(model_dir), lines)
  assert not left.exists() and mine.exists()
  assert any(f"removed {left}, left by an interrupted checkpoint write" in l
             for l in lines), lines


def test_bert_train_on_a_model_dir_in_use_says_so_in_one_line(tmp_path):
  from conftest import minilm_dir, shared_data  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path / "model")
  os.makedirs(model_dir)
  holder = _hold(model_dir)
  try:
    out = subprocess.run(
        [sys.executable, "-m", "bert.scripts.train", "--task=glue_mrpc",
         f"--init_checkpoint={minilm_dir()}",
         f"--data_dir={os.path.dirname(shared_data('glue', 'MRPC', 'train.tsv'))}",
         f"--model_dir={model_dir}", "--gin_param=RuntimeConfig.train_steps=1"],
        capture_output=True, text=True, timeout=600)
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  assert out.returncode != 0
  assert "Traceback" not in out.stderr, out.stderr[-2000:]
  assert f"is in use by another run (pid {holder.pid} on" in out.stderr
  assert not [f for f in os.listdir(model_dir) if f.startswith("ckpt")]
