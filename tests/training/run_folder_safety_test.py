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
from bert.tasks import trained_run
from bert.validation import ConfigError
from conftest import vocab, write_run
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
  del run
  return vocab()


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
  # No checkpoint reads: refused, and nothing renamed or written over.
  model_dir = str(tmp_path / "all_unreadable")
  shutil.copytree(trained, model_dir)
  for step in (2, 4):
    _truncate(f"{model_dir}/ckpt-{step}")
  before = sorted(os.listdir(model_dir))
  with pytest.raises(CheckpointError) as e:
    train(pretraining_records, model_dir, 6)
  assert str(e.value) == (
      f"{model_dir}: no readable checkpoint (each of ckpt-2, ckpt-4 is "
      "truncated or corrupt); move them out of the model_dir to start over")
  assert sorted(os.listdir(model_dir)) == before


def test_a_shard_damaged_mid_run_is_named_and_the_new_model_dir_removed(
    pretraining_records, tmp_path, monkeypatch):
  """Finding 4 at run time: damage the start-up check does not read (beyond
  its byte budget, as in a multi-GB corpus) stops the run with one line
  naming the shard and record; the model_dir this run created is gone."""
  from bert.data import record_integrity  # pylint: disable=g-import-not-at-top
  from bert.data.errors import DataError  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  data.mkdir()
  for f in glob.glob(pretraining_records):
    shutil.copy(f, data)
  # Shards without a manifest (as the reference's tool writes them): nothing
  # says what they should hold, and the CRC pass is beyond the byte budget.
  shard = sorted(glob.glob(str(data / "*.tfrecord")))[1]
  with open(shard, "r+b") as f:       # one flipped byte inside a record
    f.seek(os.path.getsize(shard) // 2)
    byte = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([byte[0] ^ 0x10]))
  monkeypatch.setattr(record_integrity, "FULL_CHECK_BYTES", 0)
  model_dir = str(tmp_path / "run")
  with pytest.raises(DataError) as e:
    train(str(data / "*.tfrecord"), model_dir, 40)
  message = str(e.value)
  assert "\n" not in message and message.startswith(f"{shard}: record "), message
  assert not os.path.exists(model_dir)


def test_the_run_config_is_written_before_the_first_step(pretraining_records,
                                                         tmp_path):
  """A run killed before it ends (SIGKILL) is still a run folder: its
  operative_config.gin is there from the start."""
  from bert.training import OptimizerConfig, RuntimeConfig, run_experiment  # pylint: disable=g-import-not-at-top
  from conftest import pretraining_task  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path / "run")
  seen = []

  def config():
    seen.append(sorted(n for n in os.listdir(model_dir)
                       if n.startswith("ckpt-")))
    return "# the run's config\n"
  run_experiment(pretraining_task(pretraining_records, dropout=0.1), model_dir,
                 "train",
                 RuntimeConfig(train_steps=2, steps_per_loop=2,
                               strategy="one_device"),
                 OptimizerConfig(learning_rate=1e-3, num_train_steps=2),
                 log_fn=None, run_config=config)
  assert seen == [[]]               # called once, before any checkpoint
  with open(os.path.join(model_dir, "operative_config.gin")) as f:
    # The config, then the precision that ran and why (a comment).
    assert f.read() == ("# the run's config\n\n# precision: float32, XLA off "
                        "(the default, from BERT_PRECISION)\n")


class _Predicting:
  prediction_files = ("test_results.tsv",)

  def predict(self, model, output_dir):
    del model
    path = os.path.join(output_dir, "test_results.tsv")
    with open(path, "w") as f:
      f.write("new\n")
    return path


def test_predictions_replace_only_files_and_leave_no_scratch(tmp_path):
  from bert.checkpoints import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "run"
  (model_dir / ".predict-left_by_a_killed_run").mkdir(parents=True)
  (model_dir / "test_results.tsv").write_text("old\n")
  path = model_dir_lib.write_predictions(_Predicting(), None, str(model_dir))
  assert open(path).read() == "new\n"
  assert sorted(os.listdir(model_dir)) == ["test_results.tsv"]
  # A folder where a prediction file goes: one line, nothing changed.
  os.remove(path)
  (model_dir / "test_results.tsv").mkdir()
  (model_dir / "test_results.tsv" / "mine.txt").write_text("keep")
  with pytest.raises(IsADirectoryError, match=r"test_results\.tsv: is not a "
                     "file; the predictions cannot be written there"):
    model_dir_lib.write_predictions(_Predicting(), None, str(model_dir))
  assert (model_dir / "test_results.tsv" / "mine.txt").read_text() == "keep"


def test_a_full_disk_while_saving_a_checkpoint_is_one_line(
    pretraining_records, tmp_path, monkeypatch):
  model_dir = str(tmp_path / "run")
  train(pretraining_records, model_dir, 2)
  real_save = tf.train.CheckpointManager.save

  def full(self, *args, **kwargs):
    os.makedirs(os.path.join(model_dir, "ckpt-4_temp"))     # half written
    raise tf.errors.ResourceExhaustedError(
        None, None, f"{model_dir}/ckpt-4_temp/part-00000-of-00001.data; No "
        "space left on device [Op:SaveV2]")
  monkeypatch.setattr(tf.train.CheckpointManager, "save", full)
  with pytest.raises(OSError) as e:
    train(pretraining_records, model_dir, 4)
  assert str(e.value) == (
      f"{model_dir}: a checkpoint could not be written (No space left on "
      "device); the newest one is ckpt-2: free some space and run the same "
      "command to resume")
  assert not os.path.exists(os.path.join(model_dir, "ckpt-4_temp"))
  monkeypatch.setattr(tf.train.CheckpointManager, "save", real_save)
