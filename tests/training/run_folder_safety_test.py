"""Issue 42, findings 1, 2 and 7: loading a run folder runs no code from it;
the `ckpt-*` files, not the `checkpoint` state file, say where a run
resumes; a run whose newest checkpoint is truncated loads from the one
before it, in every reader (bert-train, checkpoints.load, export, a
distillation teacher), or fails in one line naming the checkpoints."""

import glob
import os
import shutil
import sys

import pytest
import tensorflow as tf

from bert import checkpoints
from bert.checkpoints import CheckpointError
from bert.training import trained_run
from bert.validation import ConfigError
from conftest import write_run
from run_checkpoint_test import _pretraining_run
from reliability_test import train


@pytest.fixture
def run(tmp_path, pretraining_records):
  return _pretraining_run(str(tmp_path / "run"), pretraining_records)


def _append(path, text):
  with open(path, "a") as f:
    f.write(text)


@pytest.mark.parametrize("line", [
    "import {module}", "from {module} import thing",
    "from __gin__ import dynamic_registration\nimport os\n"])
def test_loading_a_run_never_imports_from_its_config(run, tmp_path, monkeypatch,
                                                     line):
  # A module planted beside the config: importing it leaves a marker file.
  module = f"planted_{os.getpid()}_{abs(hash(str(tmp_path)))}"
  line = line.format(module=module)
  monkeypatch.delitem(sys.modules, module, raising=False)
  marker = tmp_path / "executed"
  with open(os.path.join(run, f"{module}.py"), "w") as f:
    f.write(f"open({str(marker)!r}, 'w').write('ran')\nthing = 1\n")
  monkeypatch.syspath_prepend(run)
  config = os.path.join(run, "operative_config.gin")
  _append(config, "\n" + line + "\n")
  for load in (checkpoints.load, trained_run.load_trained_task):
    with pytest.raises((CheckpointError, ConfigError)) as e:
      load(run)
    assert not marker.exists(), "code from the run folder was executed"
    message = str(e.value)
    assert "\n" not in message and f"{config}:" in message
    assert "loading a run never executes code" in message
  # Negative control: gin itself would run it.
  import gin  # pylint: disable=g-import-not-at-top
  with trained_run._gin_config_of_its_own():  # pylint: disable=protected-access
    try:
      gin.parse_config_file(config, skip_unknown=True)
    except Exception:  # pylint: disable=broad-except
      pass
  assert marker.exists() or line.startswith("from __gin__")


def test_an_import_of_a_loaded_module_and_a_valid_run_still_load(run):
  """Positive control: `import` of a module already loaded runs nothing and
  is allowed (gin writes such lines); the run loads as before."""
  _append(os.path.join(run, "operative_config.gin"), "\nimport os\n")
  loaded = trained_run.load_trained_run(run)
  assert loaded.checkpoint == os.path.join(run, "ckpt-1")
  assert checkpoints.load(run).format == "run"


def test_an_include_in_a_run_config_is_refused(run, tmp_path):
  other = tmp_path / "other.gin"
  other.write_text("import planted_module_42\n")
  config = os.path.join(run, "operative_config.gin")
  _append(config, f"\ninclude '{other}'\n")
  with pytest.raises(ConfigError, match=r"operative_config\.gin:\d+: includes"):
    trained_run.load_trained_task(run)


def _second_checkpoint(run):
  """Saves the run's model again as ckpt-2 (beside ckpt-1)."""
  task, model = trained_run.load_trained_task(run)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), run,
                                       max_to_keep=2)
  manager.save(checkpoint_number=2)
  return task, model


def _truncate(prefix):
  data = prefix + ".data-00000-of-00001"
  with open(data, "r+b") as f:
    f.truncate(os.path.getsize(data) // 2)


def test_a_truncated_newest_checkpoint_loads_the_one_before_it(run):
  _second_checkpoint(run)
  _truncate(os.path.join(run, "ckpt-2"))
  # bert-export's and bert-convert's readers (was a raw IndexError).
  trained_run.load_trained_task(run)
  assert checkpoints.load(run).format == "run"
  log = []
  loaded = trained_run.load_trained_run(run, log_fn=log.append)
  assert loaded.checkpoint == os.path.join(run, "ckpt-1")
  assert len(log) == 1 and "ckpt-2 is unreadable" in log[0]
  # Nothing on disk changed: readers never rename a run's files.
  assert os.path.exists(os.path.join(run, "ckpt-2.data-00000-of-00001"))
  # Every checkpoint unreadable: one line naming them.
  _truncate(os.path.join(run, "ckpt-1"))
  with pytest.raises(CheckpointError) as e:
    trained_run.load_trained_task(run)
  assert str(e.value) == (f"{run}: no readable checkpoint (each of ckpt-1, "
                          "ckpt-2 is truncated or corrupt)")


def test_a_checkpoint_of_another_model_is_not_skipped(run, tmp_path):
  """A checkpoint that reads but does not fit the model is an error, not a
  reason to fall back to an older one."""
  other = write_run(str(tmp_path / "other"), [
      "build_task.task_class = @PretrainingTask",
      "EncoderSource.bert_config = " + repr(dict(
          vocab_size=30522, hidden_size=32, num_hidden_layers=1,
          num_attention_heads=2, intermediate_size=64,
          max_position_embeddings=64, type_vocab_size=2)),
      f"EncoderSource.vocab_file = '{_vocab(run)}'",
      "PretrainingInputs.train_files = ''", "PretrainingInputs.seq_length = 64",
      "PretrainingInputs.max_predictions_per_seq = 10"])
  _second_checkpoint(run)
  for name in glob.glob(os.path.join(other, "ckpt-1.*")):
    shutil.copy(name, os.path.join(run, os.path.basename(name).replace(
        "ckpt-1", "ckpt-3")))
  with pytest.raises(CheckpointError, match=r"ckpt-3: not this run's model"):
    trained_run.load_trained_task(run)


def _vocab(run):
  from conftest import minilm_dir  # pylint: disable=g-import-not-at-top
  del run
  return os.path.join(minilm_dir(), "vocab.txt")


def test_a_damaged_checkpoint_state_file_loses_no_progress(
    pretraining_records, tmp_path):
  trained = str(tmp_path / "trained")
  train(pretraining_records, trained, 4)        # ckpt-2, ckpt-4
  for damage in ("missing", "garbled", "stale"):
    model_dir = str(tmp_path / damage)
    shutil.copytree(trained, model_dir)
    kept = {n: open(os.path.join(model_dir, n), "rb").read()
            for n in os.listdir(model_dir) if n.startswith("ckpt-4")}
    state = os.path.join(model_dir, "checkpoint")
    if damage == "missing":
      os.remove(state)
    elif damage == "garbled":
      with open(state, "wb") as f:
        f.write(b"model_checkpoint_path: \x00\xff garbage {{{")
    else:       # a run folder copied from elsewhere: the paths lead nowhere
      with open(state, "w") as f:
        f.write('model_checkpoint_path: "/gone/run/ckpt-2"\n'
                'all_model_checkpoint_paths: "/gone/run/ckpt-2"\n')
    log = []
    train(pretraining_records, model_dir, 6, log)
    assert any(l.startswith(f"resumed from {model_dir}/ckpt-4 at step 4")
               for l in log), (damage, log)
    assert any("rebuilt" in l for l in log), (damage, log)
    # The real checkpoint was neither overwritten nor deleted.
    for name, data in kept.items():
      assert open(os.path.join(model_dir, name), "rb").read() == data, name
    assert tf.train.latest_checkpoint(model_dir) == f"{model_dir}/ckpt-6"
