"""Fine-tuning runs that stream TFRecords (`FinetuningInputs.records`) as real
bert-train processes: killed with SIGKILL and resumed, they end at the weights
of an uninterrupted run; on two workers (each reading only its lane's shards)
they take the same steps as on one worker with the same global batch."""

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from _runs import command, free_ports, losses, saved_steps, weights
from conftest import REPO_ROOT, shared_data, small_config, vocab

STEPS = 120


def write_run(folder, steps=STEPS, dropout=0.1):
  """MRPC (first 480 training rows) as records in 4 shards, and a gin file
  that fine-tunes a small encoder on them in 2 lanes."""
  from bert.tasks import ClassificationTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import (ClassificationData, EncoderSource,  # pylint: disable=g-import-not-at-top
                                  FinetuningInputs)
  from bert.tasks.records_writer import create_finetuning_records  # pylint: disable=g-import-not-at-top
  config_file = os.path.join(folder, "bert_config.json")
  small_config(vocab_size=30522, max_position_embeddings=64,
               hidden_dropout_prob=dropout,
               attention_probs_dropout_prob=dropout).to_json_file(config_file)
  vocab_file = vocab()
  data = ClassificationData(glue_task="mrpc", data_dir=shared_data("glue", "MRPC"),
                            max_train_examples=480)
  records = os.path.join(folder, "records")
  task = ClassificationTask(
      data=data, encoder=EncoderSource(bert_config=config_file, vocab_file=vocab_file,
                                       lower_case=True),
      inputs=FinetuningInputs(seq_length=64))
  create_finetuning_records(task, records, ("train",), num_shards=4,
                            log=lambda *_: None)
  gin_file = os.path.join(folder, "run.gin")
  with open(gin_file, "w") as f:
    f.write(f"""
build_task.task_class = @ClassificationTask
ClassificationData.glue_task = "mrpc"
ClassificationData.data_dir = "{shared_data("glue", "MRPC")}"
EncoderSource.bert_config = "{config_file}"
EncoderSource.vocab_file = "{vocab_file}"
EncoderSource.lower_case = True
FinetuningInputs.records = "{records}"
FinetuningInputs.seq_length = 64
FinetuningInputs.global_batch_size = 8
FinetuningInputs.shuffle_buffer = 100
FinetuningInputs.lanes = 2
RuntimeConfig.train_steps = {steps}
RuntimeConfig.steps_per_loop = 5
RuntimeConfig.checkpoint_interval = 20
RuntimeConfig.seed = 5
HeadConfig.dropout_rate = {dropout}
OptimizerConfig.learning_rate = 1e-3
OptimizerConfig.warmup_steps = 10
""")
  return gin_file


def env():
  e = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  e.pop("TF_CONFIG", None)
  return e


# bert-train processes: minutes on a loaded 2-core CI machine, so outside
# the default suite (run with -m slow).
@pytest.mark.slow
def test_sigkill_and_resume_from_records_end_at_the_uninterrupted_weights(
    tmp_path):
  gin_file = write_run(str(tmp_path))
  straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
  subprocess.run(command(gin_file, straight), check=True, env=env(),
                 cwd=REPO_ROOT, capture_output=True, timeout=900)
  proc = subprocess.Popen(command(gin_file, killed), env=env(), cwd=REPO_ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + 600
  while max(saved_steps(killed), default=0) < 40:   # mid-epoch: 60 steps each
    assert proc.poll() is None and time.time() < deadline, "run ended early"
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  interrupted_at, _ = weights(killed)
  assert not interrupted_at.endswith(f"ckpt-{STEPS}")
  resumed = subprocess.run(command(gin_file, killed), check=True, env=env(),
                           cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=900)
  assert "resumed from" in resumed.stdout, resumed.stdout[-2000:]
  path_a, a = weights(straight)
  path_b, b = weights(killed)
  assert path_a.endswith(f"ckpt-{STEPS}") and path_b.endswith(f"ckpt-{STEPS}")
  assert a.keys() == b.keys()
  diff = max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)
  print(f"records run, max |diff| killed at step {interrupted_at.rsplit('-', 1)[-1]}"
        f" + resumed vs uninterrupted: {diff:.2e}")
  assert diff <= 1e-6, diff


@pytest.mark.slow
def test_two_workers_from_records_match_one_worker(tmp_path):
  # No dropout: a replica's dropout masks are its own.
  gin_file = write_run(str(tmp_path), steps=20, dropout=0.0)
  single, multi = str(tmp_path / "single"), str(tmp_path / "multi")
  cluster = {"worker": [f"localhost:{p}" for p in free_ports(2)]}
  workers = []
  for index in range(2):
    worker_env = dict(env(), TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))
    workers.append(subprocess.Popen(
        command(gin_file, multi, "multi_worker_mirrored"), env=worker_env,
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True))
  subprocess.run(command(gin_file, single, "one_device"), env=env(),
                 cwd=REPO_ROOT, check=True, capture_output=True, timeout=900)
  for w in workers:
    out, _ = w.communicate(timeout=900)
    assert w.returncode == 0, out[-3000:]
  a, b = losses(single), losses(multi)
  assert sorted(a) == sorted(b) and max(a) == 20
  loss_diff = max(abs(a[s] - b[s]) for s in a)
  _, wa = weights(single)
  _, wb = weights(multi)
  model = [k for k in wa if k.startswith("model/")]
  diff = max(float(np.abs(wa[k] - wb[k]).max()) for k in model)
  print(f"records run, 20 steps, 1 worker vs 2 workers: max |loss diff| "
        f"{loss_diff:.2e}, max |weight diff| {diff:.2e}")
  assert loss_diff <= 1e-5 and diff <= 1e-5, (loss_diff, diff)
  assert tf.train.latest_checkpoint(multi).endswith("ckpt-20")
