"""Output folders (`bert.io.atomic_folder`, under `bert.checkpoints.save`,
`bert.export`, `bert-create-finetuning-data`): only what the library wrote is
ever replaced; environment errors are one line naming the path; the temp
folders of a killed writer are removed by the next write, never a live one's.
"""

import contextlib
import logging
import os
import shutil
import subprocess

import pytest

from bert import BertEncoder, checkpoints
from bert import io as _io
from bert.data.finetuning_records import FinetuningRecords
from bert.tasks import ClassificationTask
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs)
from bert.tasks.records_writer import create_finetuning_records
from conftest import one_line, random_inputs, shared_data, small_config, vocab
from output_checks import (HOST, RECORD, dead_pid, kill_while_writing, tree,
                           unprivileged, write)
from output_checks import shared_tmp  # noqa: F401 pylint: disable=unused-import (a fixture)


def encoder(seed):
  import tf_keras  # pylint: disable=g-import-not-at-top
  tf_keras.utils.set_random_seed(seed)
  return BertEncoder(small_config())


def output(enc):
  return enc(random_inputs(1, 5))["pooled_output"].numpy()


def mine(path):
  return os.path.isdir(path)   # a caller's "this is my kind of folder"


# ------------------------------------------------ finding 3: user files kept
def test_user_files_in_a_checkpoint_folder_are_never_deleted(tmp_path):
  """bert-convert's writer: a notes.txt and an experiments/ folder put into a
  checkpoint folder make the next save refuse, naming them; nothing in the
  folder changes (before the fix both were deleted without a word)."""
  folder = tmp_path / "ckpt"
  first = encoder(1)
  checkpoints.save(first, str(folder))
  write(folder, {"notes.txt": "keep me", "experiments/run1/log.txt": "keep"})
  before = tree(folder)
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.save(encoder(2), str(folder))
  one_line(e, str(folder), "'experiments/'", "move", "refusing")
  assert tree(folder) == before
  assert os.listdir(tmp_path) == ["ckpt"]                 # no temp left
  loaded = checkpoints.load(str(folder)).encoder
  assert (output(loaded) == output(first)).all()

  # A file of the user's inside one of the library's own folders too.
  out = tmp_path / "out"
  with _io.atomic_folder(str(out), mine, "x") as tmp:
    write(tmp, {"weights/a.bin": "1"})
  write(out, {"weights/mine.txt": "keep"})
  with pytest.raises(FileExistsError) as e:
    with _io.atomic_folder(str(out), mine, "x") as tmp:
      raise AssertionError("refused before the writer runs")
  one_line(e, str(out), "'weights/mine.txt'")
  assert tree(out)["weights/mine.txt"] == b"keep"


def test_a_folder_of_the_library_files_only_is_still_replaced(tmp_path):
  """The negative control: a checkpoint folder holding only what a save
  wrote is replaced by the next save (another format: other file names),
  with nothing left beside it."""
  folder = tmp_path / "ckpt"
  first, second = encoder(1), encoder(2)
  assert not (output(first) == output(second)).all()
  checkpoints.save(first, str(folder), format="tf1")
  checkpoints.save(second, str(folder), format="hf")
  assert (output(checkpoints.load(str(folder)).encoder) == output(second)).all()
  assert not [f for f in os.listdir(folder) if f.startswith("bert_model")]
  assert os.listdir(tmp_path) == ["ckpt"]
  # Nested and empty folders of the library's are replaced as well.
  out = tmp_path / "out"
  for content in ({"a/b/c.txt": "1", "top.txt": "1"}, {"new.txt": "2"}):
    with _io.atomic_folder(str(out), mine, "x") as tmp:
      write(tmp, content)
      os.mkdir(os.path.join(tmp, "empty"))
  assert sorted(set(tree(out)) - {RECORD}) == ["empty/", "new.txt"]
  assert sorted(os.listdir(tmp_path)) == ["ckpt", "out"]


def test_a_folder_written_before_the_record_keeps_other_files(tmp_path):
  """A folder from before the record (none in it): replaced when it holds
  only what this write produces too, refused when it holds anything else."""
  folder = tmp_path / "ckpt"
  checkpoints.save(encoder(1), str(folder))
  with contextlib.suppress(FileNotFoundError):
    os.remove(folder / RECORD)
  write(folder, {"notes.txt": "keep me"})
  before = tree(folder)
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.save(encoder(2), str(folder))
  one_line(e, str(folder), "'notes.txt'", "does not produce")
  assert tree(folder) == before and os.listdir(tmp_path) == ["ckpt"]
  os.remove(folder / "notes.txt")
  third = encoder(3)
  checkpoints.save(third, str(folder))                          # replaced
  assert (output(checkpoints.load(str(folder)).encoder) == output(third)).all()
  assert os.path.exists(folder / RECORD) and os.listdir(tmp_path) == ["ckpt"]


def test_records_overwrite_keeps_user_files(tmp_path):
  """bert-create-finetuning-data --overwrite, end to end: a records folder
  is replaced, unless the user put a file of theirs into it."""
  task = ClassificationTask(
      data=ClassificationData(glue_task="mrpc", max_train_examples=8,
                              data_dir=shared_data("glue", "MRPC")),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522),
          vocab_file=vocab(),
          lower_case=True),
      inputs=FinetuningInputs(seq_length=32, global_batch_size=4))
  folder = str(tmp_path / "records")
  quiet = dict(log=lambda *_: None, overwrite=True)
  create_finetuning_records(task, folder, ("train",), **quiet)
  first = os.stat(folder).st_ino
  create_finetuning_records(task, folder, ("train",), **quiet)  # control
  assert os.stat(folder).st_ino != first                        # replaced
  write(folder, {"notes.txt": "keep me"})
  before = tree(folder)
  with pytest.raises(FileExistsError) as e:
    create_finetuning_records(task, folder, ("train",), **quiet)
  one_line(e, folder, "'notes.txt'")
  assert tree(folder) == before
  assert FinetuningRecords(folder).num_rows("train") == 8
  assert os.listdir(tmp_path) == ["records"]


# ------------------------------------ finding 10: environment errors, one line
def test_an_output_under_a_file_is_one_line(tmp_path):
  """Before: a bare `[Errno 17] File exists` naming the file, not the output."""
  (tmp_path / "file").write_text("keep")
  for out in (tmp_path / "file" / "ckpt", tmp_path / "file" / "a" / "ckpt"):
    with pytest.raises(NotADirectoryError) as e:
      checkpoints.save(encoder(1), str(out))
    one_line(e, str(out), f"{tmp_path / 'file'} is a file")
  assert (tmp_path / "file").read_text() == "keep"


def test_an_output_that_is_a_file_is_one_line(tmp_path):
  (tmp_path / "model").write_text("keep")
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.save(encoder(1), str(tmp_path / "model"))
  one_line(e, str(tmp_path / "model"), "is a file, not a folder")
  with pytest.raises(FileExistsError) as e:
    with _io.atomic_folder(str(tmp_path / "model"), mine, "x"):
      pass
  one_line(e, str(tmp_path / "model"), "is a file")
  assert sorted(os.listdir(tmp_path)) == ["model"]
  assert (tmp_path / "model").read_text() == "keep"


def test_a_read_only_parent_is_one_line(shared_tmp):
  """A PermissionError naming the output and the parent (before: the temp
  folder's name, `[Errno 13] Permission denied: .../ckpt.tmp-x1y2z3`)."""
  parent = os.path.join(shared_tmp, "ro")
  os.mkdir(parent)
  os.chmod(parent, 0o555)
  out = os.path.join(parent, "ckpt")
  enc = encoder(1)
  with unprivileged(), pytest.raises(PermissionError) as e:
    checkpoints.save(enc, out)
  one_line(e, out, f"cannot write it in {parent}", "Permission denied")
  assert ".tmp-" not in str(e.value) and os.listdir(parent) == []


def test_a_read_only_output_folder_is_refused_unchanged(shared_tmp):
  """Refused before anything is moved (before: it was replaced, and its old
  copy, undeletable, left beside it without a word)."""
  out = os.path.join(shared_tmp, "out")
  with _io.atomic_folder(out, mine, "x") as tmp:
    write(tmp, {"sub/a.txt": "1"})
  os.chmod(out, 0o777)
  os.chmod(os.path.join(out, "sub"), 0o555)
  before = tree(out)
  with unprivileged(), pytest.raises(PermissionError) as e:
    with _io.atomic_folder(out, mine, "x") as tmp:
      write(tmp, {"b.txt": "2"})
  one_line(e, out, os.path.join(out, "sub"), "read-only")
  assert tree(out) == before
  assert os.listdir(shared_tmp) == ["out"]


# ---------------------------------------- finding 10: a SIGKILLed writer's temp
# The writer imports the I/O module alone (not `bert`, hence not TensorFlow).
WRITER = """
import os, sys, time, types
for name in ("bert", "bert.data"):
  sys.modules[name] = types.ModuleType(name)
  sys.modules[name].__path__ = [name.replace(".", os.sep)]
from bert import io as _io
with _io.atomic_folder(sys.argv[1], os.path.isdir, "x") as tmp:
  open(os.path.join(tmp, "half.bin"), "w").write("half")
  print("writing", flush=True)
  time.sleep(60)
"""


def test_temp_folders_of_a_killed_writer_are_removed_by_the_next(tmp_path,
                                                                caplog):
  out = str(tmp_path / "records")
  with _io.atomic_folder(out, mine, "x") as tmp:
    write(tmp, {"a.txt": "1"})
  kill_while_writing(WRITER, out, TF_CPP_MIN_LOG_LEVEL="3")
  dead = [f for f in os.listdir(tmp_path) if f != "records"]
  assert len(dead) == 1 and ".tmp-" in dead[0], dead
  # Folders of live writers (this process; a running one) stay.
  sleeper = subprocess.Popen(["sleep", "60"])
  live = [f"records.tmp-{HOST}-{pid}-abcd1234"
          for pid in (os.getpid(), sleeper.pid)]
  try:
    for name in live:
      write(tmp_path / name, {"part.bin": "live"})
    with caplog.at_level(logging.WARNING):
      with _io.atomic_folder(out, mine, "x") as tmp:
        write(tmp, {"a.txt": "2"})
  finally:
    sleeper.kill()
    sleeper.wait()
  assert sorted(os.listdir(tmp_path)) == sorted(["records"] + live)
  assert tree(out)["a.txt"] == b"2"
  assert f"removed {tmp_path / dead[0]}" in caplog.text


def test_set_aside_copies_of_a_killed_writer_are_judged_by_their_record(
    tmp_path, caplog):
  """A killed writer's set-aside copy of the output: put back if the output
  is missing (killed between its two renames); otherwise the entries its
  record lists are deleted, and a file of the user's in it keeps it. A temp
  folder of an earlier version (no pid in its name) is kept, and named."""
  out = str(tmp_path / "ckpt")
  with _io.atomic_folder(out, mine, "x") as tmp:
    write(tmp, {"a.txt": "1", "sub/b.txt": "2"})
  aside = str(tmp_path / f"ckpt.old-{HOST}-{dead_pid()}-abcd1234")
  os.rename(out, aside)
  with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError):
    with _io.atomic_folder(out, mine, "x"):
      raise RuntimeError("the writer fails")
  assert sorted(tree(out)) == [RECORD, "a.txt", "sub/", "sub/b.txt"]
  assert os.listdir(tmp_path) == ["ckpt"] and "put back" in caplog.text

  shutil.copytree(out, aside)
  users = str(tmp_path / f"ckpt.old-{HOST}-{dead_pid()}-efgh5678")
  shutil.copytree(out, users)
  write(users, {"mine.txt": "keep"})
  (tmp_path / "ckpt.tmp-abcd1234").mkdir()
  with caplog.at_level(logging.WARNING):
    with _io.atomic_folder(out, mine, "x") as tmp:
      write(tmp, {"a.txt": "3"})
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["ckpt", os.path.basename(users), "ckpt.tmp-abcd1234"])
  assert tree(out)["a.txt"] == b"3"
  assert tree(users)["mine.txt"] == b"keep" and "a.txt" not in tree(users)
  for fragment in (f"removed {aside}", "mine.txt", "ckpt.tmp-abcd1234"):
    assert fragment in caplog.text, fragment
