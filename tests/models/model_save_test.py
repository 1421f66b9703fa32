"""`save` and `save_weights` of the library's Keras models (issue 42: every
public Keras entry point that writes) go through the library's output rules
(`bert.io.output_keras`): a SavedModel folder through `atomic_folder`, a
`.keras`/`.h5` file through `atomic_file`. A save is whole or not at all (an
error, a full disk, a kill), a folder holding the user's files is never
written into, and every refusal is one line naming the path.

Before (471c388) `save` was Keras' own: it wrote into the user's folder
(merging into their `variables/`), left half a SavedModel or `.keras` file
and a TensorFlow traceback on a full disk, and gave TensorFlow's
FailedPreconditionError for an output under a file, a bare `[Errno 21]`
for a `.keras` over a folder, an interactive prompt for overwrite=False.
"""

import contextlib
import gc
import os
import re
import shutil
import stat
import subprocess
import tempfile

import numpy as np
import pytest
import tf_keras

from bert import BertEncoder, EncoderScaffold
from bert.models import (BertClassifier, BertMultipleChoice, BertPretrainer,
                         BertSpanLabeler, BertTokenClassifier)
from bert.models.distiller import Distiller
from conftest import one_line, random_inputs, small_config
from output_checks import (HOST, RECORD, dead_pid, file_size_limit, tree,
                           unprivileged)

X = random_inputs(2, 8)
# Fast saves: a SavedModel without traced functions still loads back
# (the classes are registered); the traced default is keras_api_test's.
FORMATS = {"saved_model": ("model", dict(save_traces=False)),
           "keras": ("model.keras", {})}
WEIGHTS = ("weights/ckpt", "model.weights.h5", "model.h5")


def model(seed):
  tf_keras.utils.set_random_seed(seed)
  m = BertClassifier(BertEncoder(small_config()), num_classes=2)
  m(X)
  return m


def logits(m):
  return m(X, training=False)["logits"].numpy()


# ------------------------------------------------------------ the wiring
@pytest.mark.parametrize("cls", [BertClassifier, BertTokenClassifier,
                                 BertSpanLabeler, BertMultipleChoice,
                                 BertPretrainer, Distiller, BertEncoder,
                                 EncoderScaffold])
def test_every_model_of_the_library_saves_through_the_output_rules(cls):
  from bert.io import AtomicSave  # pylint: disable=g-import-not-at-top
  assert issubclass(cls, AtomicSave)
  assert cls.save is AtomicSave.save
  assert cls.save_weights is AtomicSave.save_weights


# ------------------------------------------------- the positive controls
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_save_over_an_earlier_save_replaces_it_and_loads_back(tmp_path,
                                                                fmt):
  name, kwargs = FORMATS[fmt]
  path = str(tmp_path / name)
  first, second = model(1), model(2)
  first.save(path, **kwargs)
  second.save(path, **kwargs)
  loaded = tf_keras.models.load_model(path)
  assert type(loaded) is BertClassifier
  np.testing.assert_allclose(logits(loaded), logits(second), rtol=0, atol=1e-6)
  assert os.listdir(tmp_path) == [name]            # no temp file or folder
  if fmt == "saved_model":
    # A SavedModel Keras wrote before the library kept a record: replaced,
    # since it holds nothing but what this save writes too.
    if os.path.exists(os.path.join(path, RECORD)):
      os.unlink(os.path.join(path, RECORD))
    first.save(path, **kwargs)
    np.testing.assert_allclose(logits(tf_keras.models.load_model(path)),
                               logits(first), rtol=0, atol=1e-6)
    assert os.listdir(tmp_path) == [name]


@pytest.mark.parametrize("name", WEIGHTS)
def test_save_weights_over_earlier_weights_replaces_them(tmp_path, name):
  path = str(tmp_path / name)
  first, second = model(1), model(2)
  first.save_weights(path)
  second.save_weights(path)
  first.load_weights(path)
  np.testing.assert_allclose(logits(first), logits(second), rtol=0, atol=0)
  folder = os.path.dirname(path)
  left = sorted(os.listdir(folder))
  if name == "weights/ckpt":       # Keras' files, its `checkpoint` state too
    assert left == ["checkpoint", "ckpt.data-00000-of-00001", "ckpt.index"]
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    assert tf.train.latest_checkpoint(folder) == path
  else:
    assert left == [name]


# ------------------------------------------- a folder of the user's files
def test_a_folder_holding_user_files_is_never_written_into(tmp_path):
  """Before: Keras wrote the SavedModel into the folder, among the user's
  files (and into their `variables/`), without a word."""
  m = model(1)
  users = tmp_path / "mine"
  (users / "variables").mkdir(parents=True)
  (users / "notes.txt").write_text("keep")
  (users / "variables" / "mine.txt").write_text("keep")
  before = tree(users)
  with pytest.raises(FileExistsError) as e:
    m.save(str(users), save_traces=False)
  one_line(e, str(users), "'notes.txt'", "is not a SavedModel folder")
  assert tree(users) == before
  # An earlier save of the library with a file of the user's put in it.
  saved = str(tmp_path / "saved")
  m.save(saved, save_traces=False)
  (tmp_path / "saved" / "notes.txt").write_text("keep")
  before = tree(saved)
  with pytest.raises(FileExistsError) as e:
    model(2).save(saved, save_traces=False)
  one_line(e, saved, "'notes.txt'", "which the library did not write")
  assert tree(saved) == before
  assert sorted(os.listdir(tmp_path)) == ["mine", "saved"]
  np.testing.assert_allclose(logits(tf_keras.models.load_model(saved)),
                             logits(m), rtol=0, atol=1e-6)


# -------------------------------------------- an output in the wrong place
def test_an_output_in_the_wrong_place_is_one_line_and_changes_nothing(
    tmp_path):
  """Before: TensorFlow's FailedPreconditionError for a SavedModel under a
  file, a bare `[Errno 20]`/`[Errno 21]` for a `.keras` file under a file
  or over a folder, Keras writing TensorFlow weights under a file."""
  m = model(1)
  (tmp_path / "file").write_text("keep")
  (tmp_path / "folder.keras").mkdir()
  (tmp_path / "folder.keras" / "mine.txt").write_text("keep")
  (tmp_path / "model").write_text("keep")
  before = tree(tmp_path)
  under = str(tmp_path / "file")
  cases = [
      (lambda p: m.save(p, save_traces=False), "file/model",
       NotADirectoryError, f"{under} is a file"),
      (m.save, "file/model.keras", NotADirectoryError, f"{under} is a file"),
      (m.save_weights, "file/ckpt", NotADirectoryError, f"{under} is a file"),
      (m.save_weights, "file/w.weights.h5", NotADirectoryError,
       f"{under} is a file"),
      (m.save, "folder.keras", IsADirectoryError, "is a folder"),
      (m.save_weights, "folder.keras", IsADirectoryError, "is a folder"),
      (lambda p: m.save(p, save_traces=False), "model", FileExistsError,
       "is a file, not a folder"),
  ]
  for save, name, error, fragment in cases:
    with pytest.raises(error) as e:
      save(str(tmp_path / name))
    one_line(e, str(tmp_path / name), fragment)
  assert tree(tmp_path) == before


def test_a_read_only_parent_is_one_line():
  """Before: TensorFlow's PermissionDeniedError traceback (SavedModel), a
  bare `[Errno 13]` (`.keras`)."""
  root = tempfile.mkdtemp(prefix="model_save_test-")
  try:
    os.chmod(root, 0o777)
    parent = os.path.join(root, "ro")
    os.mkdir(parent, 0o555)
    os.chmod(parent, 0o555)
    m = model(1)
    for name in ("model", "model.keras"):
      out = os.path.join(parent, name)
      with unprivileged(), pytest.raises(PermissionError) as e:
        m.save(out, save_traces=False) if name == "model" else m.save(out)
      one_line(e, out, f"cannot write it in {parent}")
    assert os.listdir(parent) == []
  finally:
    os.chmod(os.path.join(root, "ro"), 0o777)
    shutil.rmtree(root)


def test_overwrite_false_refuses_in_one_line(tmp_path):
  """Before: Keras asked on the terminal (`input()`: under a server or a
  test, an error from deep inside Keras)."""
  m = model(1)
  for name, save in (("model.keras", m.save),
                     ("model", lambda p, **k: m.save(p, save_traces=False,
                                                     **k)),
                     ("w.weights.h5", m.save_weights),
                     ("ckpt", m.save_weights)):
    path = str(tmp_path / name)
    save(path)
    before = tree(tmp_path)
    with pytest.raises(FileExistsError) as e:
      save(path, overwrite=False)
    one_line(e, path, "overwrite=False")
    assert tree(tmp_path) == before


# ------------------------------------------------------------- a full disk
@pytest.mark.parametrize("what", ["saved_model", "keras", "weights/ckpt"])
def test_a_full_disk_keeps_the_previous_save(tmp_path, what):
  """Before: TensorFlow's multi-line OutOfRangeError (SavedModel, TF
  weights), a bare `[Errno 27] File too large` and a truncated `.keras`
  file in place of the previous one."""
  first, second = model(1), model(2)
  if what == "weights/ckpt":
    path = str(tmp_path / what)
    save = lambda m: m.save_weights(path)  # noqa: E731
  else:
    name, kwargs = FORMATS[what]
    path = str(tmp_path / name)
    save = lambda m: m.save(path, **kwargs)  # noqa: E731
  save(first)
  before = tree(tmp_path)
  with file_size_limit(20000), pytest.raises(OSError) as e:
    save(second)
  one_line(e, path, "File too large", "previous content is kept")
  assert tree(tmp_path) == before
  if what == "weights/ckpt":
    second.load_weights(path)
    np.testing.assert_allclose(logits(second), logits(first), rtol=0, atol=0)
  else:
    np.testing.assert_allclose(logits(tf_keras.models.load_model(path)),
                               logits(first), rtol=0, atol=1e-6)


@contextlib.contextmanager
def small_filesystem(folder, size):
  """A `size` tmpfs mounted at `folder` (root only): a real ENOSPC. h5py
  crashes the process on the EFBIG of `file_size_limit`."""
  os.makedirs(folder)
  done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                         "tmpfs", folder], capture_output=True, check=False)
  if done.returncode:
    pytest.skip("cannot mount a small file system here: "
                f"{done.stderr.decode().strip()}")
  try:
    yield folder
  finally:
    subprocess.run(["umount", "-l", folder], check=False)   # even if busy


# h5py reports the failed write again when Keras' unclosed file is freed.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("name", ["model.weights.h5", "model.h5",
                                  "model.keras"])
def test_a_full_file_system_keeps_the_previous_file(tmp_path, name):
  """h5 weights (and a `.keras` model) on a file system that fills up:
  before, the previous file was truncated in place and the error was
  h5py's (or a bare `[Errno 28]`)."""
  small = model(1)
  tf_keras.utils.set_random_seed(2)
  big = BertClassifier(BertEncoder(small_config(vocab_size=8000)),
                       num_classes=2)
  big(X)
  save = (lambda m, p: m.save(p)) if name.endswith(".keras") else (
      lambda m, p: m.save_weights(p))
  with small_filesystem(str(tmp_path / "fs"), "1m") as folder:
    path = os.path.join(folder, name)
    save(small, path)
    before = tree(folder)
    with pytest.raises(OSError) as e:
      save(big, path)
    one_line(e, path, "No space left on device", "previous content is kept")
    assert tree(folder) == before
    del e
    gc.collect()          # (h5py's message, in this test)


# ---------------------------------------------------- a killed writer
@pytest.mark.parametrize("name", ["model.keras", "model"])
def test_a_killed_savers_temp_is_removed_by_the_next_save(tmp_path, name):
  """What a save killed mid-write (SIGKILL) leaves beside its output (a
  temp folder named for its process) is removed by the next save of that
  output; a live writer's is kept. Before: left for ever."""
  inner = name if name.endswith(".keras") else "saved_model.pb"
  dead = tmp_path / f"{name}.tmp-{HOST}-{dead_pid()}-abcd1234"
  live = tmp_path / f"{name}.tmp-{HOST}-{os.getpid()}-efgh5678"
  for folder in (dead, live):
    folder.mkdir()
    (folder / inner).write_bytes(b"half")
  m = model(1)
  m.save(str(tmp_path / name), save_traces=False) if name == "model" else (
      m.save(str(tmp_path / name)))
  assert sorted(os.listdir(tmp_path)) == sorted([name, live.name])
  np.testing.assert_allclose(
      logits(tf_keras.models.load_model(str(tmp_path / name))), logits(m),
      rtol=0, atol=1e-6)


# -------------------------------------------- atomic_file(keep_name=True)
def test_atomic_file_can_keep_the_outputs_name_on_its_temp_file(tmp_path):
  """For a writer that goes by the name's suffix (Keras' `.keras`): the
  temp file is `<output>.tmp-<host>-<pid>-<random>/<output's name>`, and
  `f.name` is its path, which a writer opening files by name writes."""
  from bert import io as _io  # pylint: disable=g-import-not-at-top
  out = tmp_path / "m.keras"
  out.write_text("old")
  os.chmod(out, 0o640)
  with _io.atomic_file(str(out), "wb", keep_name=True) as f:
    assert isinstance(f.name, str) and os.path.basename(f.name) == "m.keras"
    assert re.fullmatch(rf"m\.keras\.tmp-{re.escape(HOST)}-{os.getpid()}-"
                        r"[a-z0-9_]{8}", os.path.basename(
                            os.path.dirname(f.name)))
    with open(f.name, "wb") as by_name:
      by_name.write(b"new")
    assert out.read_text() == "old"
  assert out.read_text() == "new" and os.listdir(tmp_path) == ["m.keras"]
  assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
  with pytest.raises(RuntimeError):
    with _io.atomic_file(str(out), "wb", keep_name=True) as f:
      f.write(b"half")
      raise RuntimeError("the writer fails")
  assert out.read_text() == "new" and os.listdir(tmp_path) == ["m.keras"]
  # Without keep_name, f.name is the temp file's path too (it was the fd).
  with _io.atomic_file(str(tmp_path / "t.txt")) as f:
    assert isinstance(f.name, str) and os.path.dirname(f.name) == str(
        tmp_path)
    f.write("x")
  assert (tmp_path / "t.txt").read_text() == "x"


def test_a_model_with_its_preprocessor_round_trips_through_a_keras_file(
    tmp_path):
  """`from_pretrained`'s model (with its preprocessor, in get_config) is
  written under a temp name and read back the same from its own name."""
  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "dog"]
  (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
  config = small_config(vocab_size=len(words))
  from bert import checkpoints  # pylint: disable=g-import-not-at-top
  ckpt = checkpoints.save(BertEncoder(config), str(tmp_path / "ckpt"),
                          vocab_file=str(tmp_path / "vocab.txt"),
                          lower_case=True)
  m = BertClassifier.from_pretrained(ckpt, seq_length=8, labels=["x", "y"])
  m.preprocessor.text_pairs = False
  path = str(tmp_path / "m.keras")
  m.save(path)
  loaded = tf_keras.models.load_model(path)
  assert loaded.preprocessor.get_config() == m.preprocessor.get_config()
  # (The encoded texts through the model: `predict`'s tracing takes seconds.)
  texts = ["the dog", "a dog the"]
  got, want = (other(other.preprocessor.model_inputs(
      other.preprocessor.encode(texts)), training=False)["logits"].numpy()
               for other in (loaded, m))
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
