"""Where `bert-create-pretraining-data` writes (`bert.data.pretraining_output`):
the run's folder appears whole or not at all, an earlier run is replaced
only with --overwrite and only if it holds nothing but the run's files (a
user's file is never deleted), `--output_file` goes through atomic_file,
and no worker of a parallel writer outlives a killed parent (issue 42,
findings 3 and 10: every command that writes)."""

import glob
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bert.data import pretraining_data as pd
from bert.data import pretraining_shards as ps
from bert.data.pretraining_dataset import list_files
from conftest import REPO_ROOT, one_line, shared_data, vocab
from output_checks import HOST, RECORD, dead_pid, tree

QUIET = dict(log=lambda *_: None)


@pytest.fixture(scope="module")
def make():
  """make(output_dir, shards=2, **kw): a small run (a second or so)."""
  vocab_file = vocab()
  text = shared_data("corpus", "sample_text.txt")
  config = pd.PretrainingDataConfig(seq_length=64, dupe_factor=1)

  def run(output_dir, shards=2, **kw):
    return ps.create_pretraining_data(text, output_dir and str(output_dir),
                                      vocab_file, config, num_shards=shards,
                                      **dict(QUIET, **kw))
  return run


def shards(folder):
  return sorted(os.path.basename(f) for f in glob.glob(f"{folder}/*.tfrecord"))


def fail_at_shard(monkeypatch, number):
  """Makes shard `number` fail once written (the run fails mid-way)."""
  create = ps.create_shard

  def failing(*args):
    summary = create(*args)
    if args[1] == number:
      raise RuntimeError(f"shard {number} failed")
    return summary
  monkeypatch.setattr(ps, "create_shard", failing)


def no_work(monkeypatch):
  def refuse(*args):
    raise AssertionError("a shard was written before the output was checked")
  monkeypatch.setattr(ps, "create_shard", refuse)


# ------------------------------------------------ finding 3: user files kept
def test_overwrite_never_deletes_a_users_file(make, tmp_path, monkeypatch):
  """Before: --overwrite deleted every `*.tfrecord` of the folder (a user's
  `mine.tfrecord` too) and wrote the new run beside the user's files."""
  folder = tmp_path / "data"
  make(folder, shards=2)
  (folder / "mine.tfrecord").write_bytes(b"the user's")
  (folder / "notes.txt").write_text("keep me")
  before = tree(folder)
  no_work(monkeypatch)
  with pytest.raises(FileExistsError) as e:
    make(folder, shards=4, overwrite=True)
  one_line(e, str(folder), "'mine.tfrecord'", "not a file of the earlier "
           "pre-training data run", "move 'mine.tfrecord' out of it")
  assert tree(folder) == before and os.listdir(tmp_path) == ["data"]
  # A folder of the user's (no run in it) is refused too: a run is written
  # and replaced whole, which it could not be beside the user's files.
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / "corpus.txt").write_text("text")
  with pytest.raises(FileExistsError) as e:
    make(tmp_path / "mine", overwrite=True)
  one_line(e, str(tmp_path / "mine"), "'corpus.txt'", "new or empty")
  assert tree(tmp_path / "mine") == {"corpus.txt": b"text"}
  # Control: the run's files alone are replaced whole.
  monkeypatch.undo()
  os.remove(folder / "mine.tfrecord")
  os.remove(folder / "notes.txt")
  first = os.stat(folder).st_ino
  make(folder, shards=4, overwrite=True)
  assert os.stat(folder).st_ino != first
  assert sorted(tree(folder)) == [RECORD, "manifest.json"] + shards(folder)
  assert len(list_files(f"{folder}/*.tfrecord")) == 4
  assert sorted(os.listdir(tmp_path)) == ["data", "mine"]


def test_a_failed_overwrite_keeps_the_earlier_run(make, tmp_path,
                                                  monkeypatch):
  """Before: --overwrite deleted the earlier run's files first, so a run
  that failed (or was killed) mid-way left the folder empty or a mix."""
  folder = tmp_path / "data"
  make(folder, shards=4)
  before = tree(folder)
  fail_at_shard(monkeypatch, 1)
  with pytest.raises(RuntimeError, match="shard 1 failed"):
    make(folder, shards=2, overwrite=True)
  assert tree(folder) == before
  assert len(list_files(f"{folder}/*.tfrecord")) == 4
  assert os.listdir(tmp_path) == ["data"]          # no temp folder left


def test_a_folder_of_the_old_writer_is_replaced_only_if_it_is_the_runs(
    make, tmp_path, monkeypatch):
  """A run written before the library kept a record of its files: its
  files are those named as the library names them (with the `.tmp` one a
  killed run of that time left); anything else keeps it, before any work."""
  folder = tmp_path / "data"
  make(folder, shards=4)
  if os.path.exists(folder / RECORD):
    os.remove(folder / RECORD)
  (folder / "pretrain-00001-of-00004.tfrecord.tmp").write_bytes(b"half")
  (folder / "notes.txt").write_text("keep me")
  before = tree(folder)
  no_work(monkeypatch)
  with pytest.raises(FileExistsError) as e:
    make(folder, shards=2, overwrite=True)
  one_line(e, str(folder), "'notes.txt'")
  assert tree(folder) == before
  monkeypatch.undo()
  os.remove(folder / "notes.txt")
  with pytest.raises(FileExistsError) as e:           # no --overwrite
    make(folder, shards=2)
  one_line(e, "holds files of an earlier run (manifest.json, pretrain-00000")
  make(folder, shards=2, overwrite=True)
  assert sorted(tree(folder)) == [RECORD, "manifest.json",
                                  "pretrain-00000-of-00002.tfrecord",
                                  "pretrain-00001-of-00002.tfrecord"]


# ----------------------------------- finding 10: outputs in the wrong place
def test_an_output_dir_in_the_wrong_place_is_one_line(make, tmp_path):
  """Before: a bare `[Errno 17] File exists` / `[Errno 20] Not a
  directory` from os.makedirs."""
  (tmp_path / "file").write_text("keep")
  with pytest.raises(FileExistsError) as e:
    make(tmp_path / "file")
  one_line(e, str(tmp_path / "file"), "is a file, not a folder")
  for out in (tmp_path / "file" / "data", tmp_path / "file" / "a" / "data"):
    with pytest.raises(NotADirectoryError) as e:
      make(out)
    one_line(e, str(out), f"{tmp_path / 'file'} is a file")
  assert os.listdir(tmp_path) == ["file"]
  assert (tmp_path / "file").read_text() == "keep"


# ------------------------------- finding 10: temp files of a killed writer
def test_output_files_never_touch_a_users_tmp_and_clean_a_killed_writers(
    make, tmp_path, monkeypatch):
  """Before: each --output_file shard was written to `path + ".tmp"`,
  replacing (then renaming away) a user's file of that name, and a killed
  run's `.tmp` stayed forever. Now a temp file named for its writer; the
  next write removes a dead writer's (and, for --output_dir, a dead
  writer's temp folder)."""
  out = tmp_path / "out"
  out.mkdir()
  (out / "a.tfrecord.tmp").write_text("the user's")
  (out / "b.tfrecord").write_text("previous")
  killed = f"a.tfrecord.tmp-{HOST}-{dead_pid()}-abcd1234"
  (out / killed).write_bytes(b"half a shard")
  outputs = [str(out / "a.tfrecord"), str(out / "b.tfrecord")]
  fail_at_shard(monkeypatch, 1)            # all or nothing: b's shard fails
  with pytest.raises(RuntimeError, match="shard 1 failed"):
    make(None, output_files=outputs)
  assert tree(out) == {"a.tfrecord.tmp": b"the user's",
                       "b.tfrecord": b"previous"}
  monkeypatch.undo()
  summaries = make(None, output_files=outputs)
  assert sorted(os.listdir(out)) == ["a.tfrecord", "a.tfrecord.tmp",
                                     "b.tfrecord"]
  assert (out / "a.tfrecord.tmp").read_text() == "the user's"
  from bert.data import record_integrity  # pylint: disable=g-import-not-at-top
  for path, summary in zip(outputs, summaries):
    assert record_integrity.fingerprint(path)["records"] == summary.instances
  # --output_dir: a killed run's temp folder beside it.
  dead = tmp_path / f"data.tmp-{HOST}-{dead_pid()}-abcd1234"
  dead.mkdir()
  (dead / "pretrain-00000-of-00001.tfrecord").write_bytes(b"half")
  make(tmp_path / "data", shards=1)
  assert sorted(os.listdir(tmp_path)) == ["data", "out"]


# ------------------------------------------------ parallel writers
@pytest.mark.slow   # each worker imports TensorFlow
@pytest.mark.subprocess   # the writer's worker pool (the test names none)
def test_shards_written_in_processes_are_those_of_one_process(make, tmp_path):
  """--num_processes: the workers write into the run's temp folder; the
  same bytes and fingerprints as one process, checked by readers."""
  one = make(tmp_path / "one", shards=2)
  two = make(tmp_path / "two", shards=2, num_processes=2)
  assert [s.file for s in one] == [s.file for s in two]
  for name in shards(tmp_path / "one"):
    assert ((tmp_path / "one" / name).read_bytes() ==
            (tmp_path / "two" / name).read_bytes())
  assert len(list_files(f"{tmp_path / 'two'}/*.tfrecord")) == 2
  assert sorted(os.listdir(tmp_path)) == ["one", "two"]


def test_every_worker_pool_ends_with_its_parent():
  """The library's process pools are made by one function, whose workers
  exit when their parent dies (before: two plain `Pool`s, in the pre-
  training and fine-tuning data writers)."""
  pool = re.compile(r"\bPool\(|get_context\(")
  found = []
  for folder in ("bert", "scripts"):
    for path in sorted(glob.glob(os.path.join(REPO_ROOT, folder, "**", "*.py"),
                                 recursive=True)):
      if path.endswith(os.path.join("bert", "data", "_workers.py")):
        continue
      with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
          if pool.search(line) and not line.lstrip().startswith("#"):
            found.append(f"{os.path.relpath(path, REPO_ROOT)}:{number}: "
                         f"{line.strip()}")
  assert not found, found


# A task_factory that never returns: each worker says it runs, and waits.
SLOW_TASK = """
import os, time
def factory(flags):
  open(os.path.join(flags, str(os.getpid())), "w").close()
  time.sleep(120)
"""

# bert-create-finetuning-data --num_processes=2, for a task whose encoding
# (in the workers) never ends: the parent waits on its pool.
PARENT = """
import functools, sys, types
import slow_task
from bert.tasks.records_writer import create_finetuning_records
task = types.SimpleNamespace(inputs=types.SimpleNamespace(records=None))
create_finetuning_records(task, sys.argv[1], ("train",), num_processes=2,
                          task_factory=functools.partial(slow_task.factory,
                                                         sys.argv[2]))
"""


def _running(pid):
  try:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
      return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
  except OSError:
    return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_workers_of_a_killed_writer_end_with_it(tmp_path):
  """SIGKILL of bert-create-finetuning-data --num_processes=2 while its
  workers encode: before, they went on until their share was done (here,
  two minutes), writing into a temp folder a later run would remove."""
  (tmp_path / "slow_task.py").write_text(textwrap.dedent(SLOW_TASK))
  flags = tmp_path / "running"
  flags.mkdir()
  log = open(tmp_path / "stderr.txt", "wb")  # pylint: disable=R1732
  parent = subprocess.Popen(
      [sys.executable, "-c", PARENT, str(tmp_path / "records"), str(flags)],
      cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=log,
      env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path),
                                                       REPO_ROOT]),
               TF_CPP_MIN_LOG_LEVEL="3"))
  try:
    deadline = time.monotonic() + 120
    while len(os.listdir(flags)) < 2 and parent.poll() is None:
      assert time.monotonic() < deadline, "the workers did not start"
      time.sleep(0.2)
    assert parent.poll() is None, (tmp_path / "stderr.txt").read_text()[-2000:]
    workers = [int(pid) for pid in os.listdir(flags)]
    assert all(_running(pid) for pid in workers)           # control
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
      time.sleep(0.1)
    alive = [pid for pid in workers if _running(pid)]
  finally:
    parent.kill()
    parent.wait()
    log.close()
    for pid in [int(p) for p in os.listdir(flags)]:
      if _running(pid):           # a worker this test started
        os.kill(pid, signal.SIGKILL)
  assert not alive, f"workers {alive} outlived their killed parent"
  # The killed run's temp folder: removed by the next write of the output.
  from bert import io as _io  # pylint: disable=g-import-not-at-top
  left = [f for f in os.listdir(tmp_path) if f.startswith("records.tmp-")]
  assert len(left) == 1, os.listdir(tmp_path)
  with _io.atomic_folder(str(tmp_path / "records"), os.path.isdir, "x"):
    pass
  assert not [f for f in os.listdir(tmp_path) if f.startswith("records.")]
