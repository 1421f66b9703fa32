"""A task's model gets its checkpoint from `build_model`: the task reads and
checks the checkpoint when it is built (no variable made), and builds one
encoder from it in the caller's distribution scope; nothing is copied into a
second encoder afterwards."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert import checkpoints
from bert.networks.bert_encoder import BertEncoder
from bert.networks.pretraining_heads import build_pretraining_heads
from bert.tasks import ClassificationTask, PretrainingTask
from bert.tasks.configs import ClassificationData, EncoderSource
from conftest import REPO_ROOT, small_config, vocab
from _tasks import write_data


def _created(fn):
  """(fn(), the tf.Variables made while it ran)."""
  made = []

  def creator(next_creator, **kwargs):
    made.append(next_creator(**kwargs))
    return made[-1]

  with tf.variable_creator_scope(creator):
    return fn(), made


def _checkpoint(folder, fmt, heads=False):
  """A small encoder (MiniLM's vocab) saved as `fmt`: (folder, its weights)."""
  encoder = BertEncoder(small_config(vocab_size=30522,
                                    max_position_embeddings=512))
  saved = checkpoints.BertCheckpoint(config=encoder.config, encoder=encoder)
  if heads:
    saved.masked_lm, saved.next_sentence = build_pretraining_heads(encoder)
  checkpoints.save(saved, folder, fmt, vocab_file=vocab(), lower_case=True)
  return folder, saved


def _task(tmp_path, folder, **source):
  return ClassificationTask(
      data=ClassificationData(train_file=write_data(str(tmp_path), 8, 0),
                              text_a_column="text", label_column="label",
                              labels=("neg", "pos")),
      encoder=EncoderSource(init_checkpoint=folder, **source))


def _only_the_models(made, model):
  """Every weight made (dropout's int64 seed counters aside) is one of
  `model`'s, and every one of its weights was made: no second encoder."""
  weights = {id(v) for v in made if v.dtype != tf.int64}
  return weights == {id(v) for v in model.variables} and weights


def _equal(a, b):
  return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("fmt", ["tf2", "hf"])
def test_a_task_builds_one_encoder_from_its_checkpoint(tmp_path, fmt):
  folder, saved = _checkpoint(str(tmp_path / "ckpt"), fmt)
  task, made = _created(lambda: _task(tmp_path, folder))
  assert made == []            # read and checked, nothing built
  assert task.initial_checkpoint.format == fmt
  model, made = _created(task.build_model)
  assert _only_the_models(made, model)
  assert _equal(model.encoder.get_weights(), saved.encoder.get_weights())
  before = model.get_weights()
  task.initialize(model)       # nothing left to copy
  assert _equal(model.get_weights(), before)
  # Negative control: a task without the checkpoint starts elsewhere.
  plain = ClassificationTask(data=task.data, encoder=EncoderSource(
      bert_config=saved.config, vocab_file=vocab(), lower_case=True))
  assert not _equal(plain.build_model().encoder.get_weights(),
                    saved.encoder.get_weights())


def test_a_replacing_config_is_the_built_encoders(tmp_path):
  folder, saved = _checkpoint(str(tmp_path / "ckpt"), "tf1")
  other = dataclasses.replace(saved.config, hidden_dropout_prob=0.3)
  model = _task(tmp_path, folder, bert_config=other).build_model()
  assert model.encoder.config == other
  assert _equal(model.encoder.get_weights(), saved.encoder.get_weights())
  # Other weight shapes fail when the task is built, before any data.
  wider = dataclasses.replace(saved.config, intermediate_size=256)
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match="intermediate_size"):
    _created(lambda: _task(tmp_path, folder, bert_config=wider))


def test_a_damaged_checkpoint_fails_when_the_task_is_built(tmp_path):
  """Our format is restored by `build_model`; its values are read (and
  dropped) when the task is built, so a damaged file fails then."""
  folder, _ = _checkpoint(str(tmp_path / "ckpt"), "tf2")
  data, = [f for f in os.listdir(folder) if ".data-" in f]
  path = os.path.join(folder, data)
  os.truncate(path, os.path.getsize(path) // 2)
  with pytest.raises(checkpoints.CheckpointError, match="cannot read"):
    _task(tmp_path, folder)


def test_pretraining_starts_from_the_checkpoints_heads(tmp_path):
  folder, saved = _checkpoint(str(tmp_path / "ckpt"), "tf1", heads=True)
  task, made = _created(lambda: PretrainingTask(
      encoder=EncoderSource(init_checkpoint=folder)))
  assert made == []
  model, made = _created(task.build_model)
  assert _only_the_models(made, model)
  for name in ("encoder", "masked_lm", "next_sentence"):
    assert _equal(getattr(model, name).get_weights(),
                  getattr(saved, name).get_weights()), name


MIRRORED = """
import sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from bert import checkpoints
from bert.tasks import ClassificationTask
from bert.tasks.configs import ClassificationData, EncoderSource
folder, data = sys.argv[1:]
task = ClassificationTask(
    data=ClassificationData(train_file=data, text_a_column="text",
                            label_column="label", labels=("neg", "pos")),
    encoder=EncoderSource(init_checkpoint=folder))
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
  model = task.build_model()
saved = checkpoints.load(folder).encoder.get_weights()
assert len(model.encoder.weights) == len(saved)
for v, value in zip(model.encoder.weights, saved):
  assert isinstance(v, tf.distribute.DistributedValues), type(v)
  copies = v.values
  assert len(copies) == 2, copies
  for copy in copies:
    assert np.array_equal(copy.numpy(), value), v.name
print("mirrored", len(saved))
"""


def test_build_model_in_a_mirrored_scope_gets_the_checkpoint(tmp_path):
  """Two logical CPUs (set before TensorFlow starts: a process of its own)."""
  folder, saved = _checkpoint(str(tmp_path / "ckpt"), "hf")
  data = write_data(str(tmp_path), 8, 0)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [REPO_ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  done = subprocess.run([sys.executable, "-c", MIRRORED, folder, data],
                        env=env, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  assert f"mirrored {len(saved.encoder.weights)}" in done.stdout
