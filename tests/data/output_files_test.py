"""Output files (`bert.io.atomic_file`, behind every command that
writes one file) and the outputs of the commands: a write is whole or not
at all (an error, a full disk, SIGKILL), a folder, device or pipe is never
replaced by a file, a command never writes over what it reads, and every
refusal is one line naming the path (issue 42: "every command that writes").
"""

import json
import os
import re
import stat
import subprocess
import sys
import threading

from absl import flags as absl_flags
import pytest

from bert import BertEncoder, checkpoints, export
from bert import io as _io
from conftest import REPO_ROOT, one_line, run_command, small_config
from output_checks import file_size_limit, kill_while_writing, unprivileged
from output_checks import shared_tmp  # noqa: F401 pylint: disable=unused-import (a fixture)



def listing(folder):
  """{name: (mode, content)} of a folder's entries (symlinks not followed)."""
  out = {}
  for name in sorted(os.listdir(folder)):
    full = os.path.join(folder, name)
    mode = os.lstat(full).st_mode
    content = (open(full, "rb").read() if stat.S_ISREG(mode) else
               os.readlink(full) if stat.S_ISLNK(mode) else None)
    out[name] = (stat.S_IFMT(mode), content)
  return out


# --------------------------------------------------------- atomic_file
def test_a_file_is_replaced_whole_keeping_its_mode(tmp_path):
  out = tmp_path / "out.txt"
  out.write_text("old")
  os.chmod(out, 0o640)
  with _io.atomic_file(str(out)) as f:
    f.write("new")
    assert out.read_text() == "old"      # not visible before it is whole
  assert out.read_text() == "new" and stat.S_IMODE(os.stat(out).st_mode) == 0o640
  with pytest.raises(RuntimeError):
    with _io.atomic_file(str(out), "wb") as f:
      f.write(b"half")
      raise RuntimeError("the writer fails")
  assert out.read_text() == "new" and os.listdir(tmp_path) == ["out.txt"]
  # A symlink is followed: the file it points to is the output.
  os.symlink(out, tmp_path / "link")
  with _io.atomic_file(str(tmp_path / "link")) as f:
    f.write("via link")
  assert out.read_text() == "via link" and os.path.islink(tmp_path / "link")


def test_a_full_disk_leaves_the_previous_file(tmp_path):
  out = tmp_path / "out.jsonl"
  out.write_text("previous\n")
  with file_size_limit(1000), pytest.raises(OSError) as e:
    with _io.atomic_file(str(out)) as f:
      for _ in range(1000):
        f.write("x" * 99 + "\n")
  one_line(e, str(out), "File too large", "previous content is kept")
  assert out.read_text() == "previous\n" and os.listdir(tmp_path) == [
      "out.jsonl"]


def test_an_output_in_the_wrong_place_is_one_line_and_changes_nothing(
    shared_tmp):
  """A folder, a path under a file, a dangling symlink, a read-only folder
  or file: refused before anything is written (before the fix the features
  writer named its temp file, after the whole extraction; a dangling
  symlink was replaced by a file)."""
  root = shared_tmp
  os.mkdir(f"{root}/folder")
  with open(f"{root}/folder/mine.txt", "w") as f:
    f.write("keep")
  with open(f"{root}/file", "w") as f:
    f.write("keep")
  os.symlink(f"{root}/gone/x.jsonl", f"{root}/dangling")
  os.mkdir(f"{root}/ro", 0o555)
  os.chmod(f"{root}/ro", 0o555)
  with open(f"{root}/ro_file", "w") as f:
    f.write("keep")
  os.chmod(f"{root}/ro_file", 0o444)
  before = listing(root)
  cases = [("folder", IsADirectoryError, "is a folder"),
           ("file/out.jsonl", NotADirectoryError, f"{root}/file is a file"),
           ("dangling", FileNotFoundError, "which does not exist"),
           ("dangling/operative_config.gin", NotADirectoryError,
            f"{root}/dangling is a symlink to '{root}/gone/x.jsonl', which "
            "does not exist"),
           ("ro/out.jsonl", PermissionError, f"cannot write it in {root}/ro"),
           ("ro_file", PermissionError, "is read-only")]
  for name, error, fragment in cases:
    for check in (lambda p: _io.check_output_file(p),
                  lambda p: _io.atomic_file(p).__enter__()):
      with unprivileged(), pytest.raises(error) as e:
        check(f"{root}/{name}")
      one_line(e, f"{root}/{name}", fragment)
  assert listing(root) == before
  assert listing(f"{root}/folder") == {"mine.txt": (stat.S_IFREG, b"keep")}


def test_a_device_or_a_pipe_is_written_in_place_never_replaced(tmp_path):
  """Before the fix, `bert-extract-features --output_file=/dev/null` run as
  root replaced the device node with a file (the temp file renamed over it)."""
  fifo = str(tmp_path / "fifo")
  os.mkfifo(fifo)
  received = []
  reader = threading.Thread(target=lambda: received.append(
      open(fifo, "rb").read()), daemon=True)   # blocks if nothing writes
  reader.start()
  with _io.atomic_file(fifo) as f:
    f.write("through the pipe\n")
  reader.join(10)
  assert received == [b"through the pipe\n"]
  assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
  with pytest.raises(FileExistsError) as e:   # a writer that must rename
    _io.check_output_file(fifo, in_place=False)
  one_line(e, fifo, "a device or a pipe")
  if os.geteuid() != 0:
    return
  full = str(tmp_path / "full")             # a /dev/full of our own
  os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
  with pytest.raises(OSError) as e:
    with _io.atomic_file(full) as f:
      f.write("x" * 10000)
  one_line(e, full, "No space left on device")
  assert stat.S_ISCHR(os.lstat(full).st_mode)
  assert sorted(os.listdir(tmp_path)) == ["fifo", "full"]


# A writer of one file, killed mid-write; it imports the I/O module alone
# (not `bert`, hence not TensorFlow).
WRITER = """
import os, sys, time, types
for name in ("bert", "bert.data"):
  sys.modules[name] = types.ModuleType(name)
  sys.modules[name].__path__ = [name.replace(".", os.sep)]
from bert import io as _io
with _io.atomic_file(sys.argv[1]) as f:
  f.write("half")
  f.flush()
  print("writing", flush=True)
  time.sleep(60)
"""


def test_a_killed_writer_leaves_the_previous_file_and_the_next_cleans_up(
    tmp_path):
  """SIGKILL mid-write (say, of a run's operative_config.gin, which a plain
  `open(..., "w")` left truncated): the output keeps its previous content,
  and the next write of it removes the killed writer's temp file."""
  out = str(tmp_path / "operative_config.gin")
  with open(out, "w") as f:
    f.write("previous")
  kill_while_writing(WRITER, out)
  left = sorted(os.listdir(tmp_path))
  assert len(left) == 2 and re.fullmatch(
      r"operative_config\.gin\.tmp-.+-\d+-\w{8}", left[1]), left
  assert open(out).read() == "previous"
  with _io.atomic_file(out) as f:
    f.write("next")
  assert os.listdir(tmp_path) == ["operative_config.gin"]
  assert open(out).read() == "next"


# ------------------------------------------------- outputs and inputs
def test_an_output_that_would_replace_an_input_is_refused(tmp_path):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("text")
  (tmp_path / "ckpt").mkdir()
  (tmp_path / "ckpt" / "vocab.txt").write_text("[PAD]")
  os.link(corpus, tmp_path / "hard_link")
  os.symlink(corpus, tmp_path / "soft_link")
  inputs = {"--input_file": str(corpus), "--init_checkpoint":
            str(tmp_path / "ckpt"), "--vocab_file": None}
  for output, fragment in [(corpus, "is --input_file"),
                           (tmp_path / "hard_link", "is --input_file"),
                           (tmp_path / "soft_link", "is --input_file"),
                           (tmp_path / "ckpt", "is --init_checkpoint"),
                           (tmp_path / "ckpt" / "vocab.txt",
                            "is a file in --init_checkpoint"),
                           (tmp_path, "holds --input_file")]:
    with pytest.raises(FileExistsError) as e:
      _io.check_not_an_input(str(output), inputs)
    one_line(e, str(output), fragment, "which this command reads")
  # Negative controls: a new file beside or in an input folder, an existing
  # folder in one (say, an earlier export in a run folder).
  _io.check_not_an_input(str(tmp_path / "features.jsonl"), inputs)
  _io.check_not_an_input(str(tmp_path / "ckpt" / "features.jsonl"), inputs)
  (tmp_path / "ckpt" / "export").mkdir()
  _io.check_not_an_input(str(tmp_path / "ckpt" / "export"), inputs)


# ------------------------------------------ a full disk under a folder
def test_a_full_disk_during_a_save_or_export_is_one_line(tmp_path):
  """Before: TensorFlow's multi-line OutOfRangeError (safetensors'
  SafetensorError for format="hf") naming the temp folder, which the
  command-line wrapper printed as a traceback (neither is a user error)."""
  encoder = BertEncoder(small_config())
  checkpoints.save(encoder, str(tmp_path / "ckpt"))
  before = listing(tmp_path / "ckpt")
  writes = {"ckpt": lambda p: checkpoints.save(encoder, p),
            "hf": lambda p: checkpoints.save(encoder, p, format="hf"),
            "export": lambda p: export.export_encoder(encoder, p)}
  for name, write in writes.items():
    with file_size_limit(20000), pytest.raises(OSError) as e:
      write(str(tmp_path / name))
    kept = "previous content is kept" if name == "ckpt" else "nothing was"
    one_line(e, str(tmp_path / name), "File too large", kept)
  assert os.listdir(tmp_path) == ["ckpt"]
  assert listing(tmp_path / "ckpt") == before


def test_a_folder_is_on_disk_before_it_replaces_the_previous(tmp_path,
                                                             monkeypatch):
  """Every file of a new output folder, and the folder, are fsynced before
  it is renamed into place (before: none was, so a power loss after the
  rename could leave empty files where the replaced checkpoint had been)."""
  synced, renamed = set(), {}
  real_fsync, real_rename = os.fsync, os.rename

  def fsync(fd):
    synced.add(os.fstat(fd).st_ino)
    real_fsync(fd)

  def rename(src, dst):
    if ".tmp-" in os.path.basename(src):
      renamed.update({os.stat(os.path.join(root, f)).st_ino: f
                      for root, dirs, files in os.walk(src)
                      for f in files + dirs + ["."]})
    real_rename(src, dst)

  monkeypatch.setattr(os, "fsync", fsync)
  monkeypatch.setattr(os, "rename", rename)
  checkpoints.save(BertEncoder(small_config()), str(tmp_path / "ckpt"))
  assert renamed and not set(renamed) - synced, sorted(
      renamed[i] for i in set(renamed) - synced)


# ------------------------------------------------ the commands' wiring
def test_no_command_writes_a_file_with_a_plain_open():
  """Every single-file writer of the commands goes through atomic_file (a
  plain `open(path, "w")` truncates the file first: a failed or killed
  write leaves it half-written; before: scripts/train.py's
  operative_config.gin)."""
  sources = [os.path.join(REPO_ROOT, "scripts", f) for f in sorted(
      os.listdir(os.path.join(REPO_ROOT, "scripts"))) if f.endswith(".py")]
  sources.append(os.path.join(REPO_ROOT, "bert", "export.py"))
  plain = re.compile(r"""\bopen\(.*["'][wax]b?\+?["']""")
  # Files written inside atomic_folder's temp folder, replaced whole with it
  # (bert/export.py: a serving export's manifest and TFLite model).
  in_a_folder = {'with open(os.path.join(extra, manifest["network"]), "wb") '
                 'as f:', 'with open(os.path.join(tmp, MANIFEST), "w", '
                 'encoding="utf-8") as f:'}
  found = []
  for path in sources:
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, start=1):
        if plain.search(line) and line.strip() not in in_a_folder:
          found.append(f"{os.path.relpath(path, REPO_ROOT)}:{number}: "
                       f"{line.strip()}")
  assert not found, found


def test_pretraining_output_files_never_replace_an_input(tmp_path):
  """`bert-create-pretraining-data --output_file=` naming the corpus, the
  vocab or a pipe is refused before any work (before: the corpus was
  replaced by TFRecords). In process: the module is imported by
  pretraining_data_test already, and another interpreter costs 10 s."""
  from bert.scripts import create_pretraining_data as script  # pylint: disable=g-import-not-at-top
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("the dog runs .\nthe cat ran .\n\na man .\n")
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                              "the", "dog", "runs", "cat", "ran", "a", "man",
                              "."]) + "\n")
  os.mkfifo(tmp_path / "fifo")
  before = listing(tmp_path)
  for output, fragment in [(corpus, "is --input_file"),
                           (vocab, "is --vocab_file"),
                           (tmp_path / "fifo", "a device or a pipe")]:
    argv = ["bert-create-pretraining-data", f"--input_file={corpus}",
            f"--output_file={tmp_path / 'ok.tfrecord'},{output}",
            f"--vocab_file={vocab}", "--dupe_factor=1"]
    try:
      absl_flags.FLAGS(argv)
      with pytest.raises(FileExistsError) as e:
        script.main([])
    finally:
      absl_flags.FLAGS.unparse_flags()
    one_line(e, str(output), fragment)
    assert listing(tmp_path) == before


def test_features_go_through_atomic_file(tmp_path):
  """`write_features` (bert-extract-features' writer): a pipe or device is
  written in place (before: replaced by a file: `--output_file=/dev/null`
  run as root replaced the device node), and a bad output is refused
  before the first feature is computed."""
  from bert.tasks import feature_extraction as fe  # pylint: disable=g-import-not-at-top
  fifo = str(tmp_path / "fifo")
  os.mkfifo(fifo)
  received = []
  reader = threading.Thread(target=lambda: received.append(
      open(fifo, "rb").read()), daemon=True)   # blocks if nothing writes
  reader.start()
  assert fe.write_features(fifo, iter([(1, {"b": 1}), (0, {"a": 0})])) == 2
  reader.join(10)
  assert received == [b'{"a": 0}\n{"b": 1}\n']
  assert stat.S_ISFIFO(os.lstat(fifo).st_mode)

  def never():
    raise AssertionError("a feature computed for an output that is refused")
    yield  # pylint: disable=unreachable
  os.mkdir(tmp_path / "folder")
  with pytest.raises(IsADirectoryError) as e:
    fe.write_features(str(tmp_path / "folder"), never())
  one_line(e, str(tmp_path / "folder"), "is a folder")
  if os.geteuid() == 0:                      # a /dev/full of our own
    full = str(tmp_path / "full")
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    with pytest.raises(OSError) as e:
      fe.write_features(full, iter([(0, {"a": "x" * 10000})]))
    one_line(e, full, "No space left on device")
    assert stat.S_ISCHR(os.lstat(full).st_mode)
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["fifo", "folder"] + (["full"] if os.geteuid() == 0 else []))


# ------------------------------------------------ the commands, end to end
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
    "the a man dog cat runs ran is".split())


@pytest.fixture
def checkpoint(tmp_path_factory):
  """A tiny checkpoint with its vocab (one per test: a test that fails may
  have written over it)."""
  root = tmp_path_factory.mktemp("output_files_ckpt")
  (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  return checkpoints.save(
      BertEncoder(small_config(vocab_size=len(VOCAB))), str(root / "ckpt"),
      format="hf", vocab_file=str(root / "vocab.txt"), lower_case=True)


def assert_one_line(proc, *fragments):
  report = f"exit {proc.returncode}\nstderr:\n{proc.stderr[-3000:]}"
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert proc.returncode == 2 and len(lines) == 1, report
  for fragment in fragments:
    assert fragment in lines[0], (fragment, lines[0])


# Runs bert-extract-features' main once per case in one interpreter (each
# command would start TensorFlow anew), through the CLI's error handling.
EXTRACT = """
import contextlib, io, json, sys
from absl import flags
from bert.scripts import _cli, extract_features
for argv in json.loads(sys.argv[1]):
  err, code = io.StringIO(), 0
  try:
    flags.FLAGS(["bert-extract-features"] + argv)
    with contextlib.redirect_stderr(err):
      _cli._guarded(extract_features.main)([])
  except SystemExit as e:
    code = e.code
  finally:
    flags.FLAGS.unparse_flags()
  print(json.dumps([code, err.getvalue()]), flush=True)
"""


def test_extract_features_never_writes_over_what_it_reads(checkpoint,
                                                          tmp_path):
  """Before: --output_file naming the input file or the checkpoint's vocab
  replaced it with features (exit 0); a folder failed after the whole
  extraction, naming a temp file."""
  lines = tmp_path / "lines.txt"
  lines.write_text("the dog runs\nthe cat ran ||| a man\n")
  os.mkdir(tmp_path / "folder")
  ckpt_before, before = listing(checkpoint), listing(tmp_path)
  outputs = [(lines, "is --input_file"),
             (os.path.join(checkpoint, "vocab.txt"),
              "is a file in --init_checkpoint"),
             (tmp_path / "folder", "is a folder"),
             (tmp_path / "ok.jsonl", None)]                # the control
  cases = [[f"--input_file={lines}", f"--init_checkpoint={checkpoint}",
            f"--output_file={out}", "--layers=-1", "--max_seq_length=16"]
           for out, _ in outputs]
  proc = subprocess.run([sys.executable, "-c", EXTRACT, json.dumps(cases)],
                        cwd=str(tmp_path), capture_output=True, text=True,
                        timeout=600, env=dict(os.environ,
                                              TF_CPP_MIN_LOG_LEVEL="3"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = [json.loads(line) for line in proc.stdout.splitlines()
             if line.startswith("[")]
  assert len(results) == len(outputs), proc.stdout[-3000:]
  for (out, fragment), (code, stderr) in zip(outputs, results):
    if fragment is None:
      assert code == 0, stderr
      continue
    assert code == 2 and stderr.count("\n") == 1, (out, code, stderr)
    assert f"error: {out}: {fragment}" in stderr, (out, stderr)
  assert listing(checkpoint) == ckpt_before
  after = listing(tmp_path)
  features = after.pop("ok.jsonl")[1].decode().splitlines()
  assert after == before and len(features) == 2
  assert json.loads(features[1])["linex_index"] == 1


def test_export_and_convert_never_replace_their_input(checkpoint, tmp_path):
  """Before: `bert-export --kind=preprocessor --checkpoint=E --output=E`
  replaced the user's encoder export E by a preprocessor (exit 0);
  `bert-convert --input=C --output=C` replaced the checkpoint it read."""
  encoder = checkpoints.load(checkpoint).encoder
  export.export_encoder(encoder, str(tmp_path / "encoder"),
                        vocab_file=os.path.join(checkpoint, "vocab.txt"),
                        lower_case=True)
  before = listing(tmp_path / "encoder")
  proc = run_command(["bert-export", "--kind=preprocessor",
                      f"--checkpoint={tmp_path / 'encoder'}",
                      f"--output={tmp_path / 'encoder'}"], str(tmp_path),
                     TF_CPP_MIN_LOG_LEVEL="3")
  assert_one_line(proc, f"{tmp_path / 'encoder'}: is --checkpoint")
  assert listing(tmp_path / "encoder") == before
  ckpt_before = listing(checkpoint)
  proc = run_command(["bert-convert", f"--input={checkpoint}",
                      f"--output={checkpoint}", "--to=tf1"], str(tmp_path),
                     TF_CPP_MIN_LOG_LEVEL="3")
  assert_one_line(proc, f"{checkpoint}: is --input")
  assert listing(checkpoint) == ckpt_before
  assert os.listdir(tmp_path) == ["encoder"]
