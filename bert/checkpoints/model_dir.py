"""Preparing a run's model_dir: writable before anything is built, no
leftovers of interrupted checkpoint writes, the newest readable checkpoint as
the latest, and an error that names a checkpoint the model does not fit."""

import contextlib
import os
import re
import shutil
import tempfile
from typing import Iterator, List, Optional

import tensorflow as tf

from bert.checkpoints.errors import CheckpointError
from bert import io as _io


def check_writable(model_dir: str) -> None:
  """Fails now, not at the first checkpoint, if model_dir is not writable."""
  try:
    tf.io.gfile.makedirs(model_dir)
    probe = os.path.join(model_dir, f".write_probe_{os.getpid()}")
    with tf.io.gfile.GFile(probe, "w") as f:
      f.write("ok")
    tf.io.gfile.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise OSError(f"model_dir {model_dir!r} is not writable: {e}") from None


def remove_interrupted_writes(model_dir: str, log_fn) -> None:
  """Deletes what interrupted checkpoint writes left: TensorFlow writes each
  checkpoint's shards into `ckpt-N_temp/` and merges them into `ckpt-N.*`;
  a process killed in between leaves the folder (as large as a checkpoint),
  which nothing else would ever remove. Runs under the model_dir lock, so no
  live run is writing."""
  for name in tf.io.gfile.listdir(model_dir):
    name = name.rstrip("/")
    path = os.path.join(model_dir, name)
    if re.fullmatch(r"ckpt-\d+_temp", name) and tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
      if log_fn:
        log_fn(f"removed {path}, left by an interrupted checkpoint write")


# What makes a folder a `bert-train` run: its gin config, as the run used it.
RUN_CONFIG = "operative_config.gin"
# The checkpoints a run writes (tf.train.CheckpointManager's default name).
_CHECKPOINT = re.compile(r"ckpt-(\d+)\.index")
_READ_ERRORS = (tf.errors.OpError, ValueError, IndexError)


def checkpoints_on_disk(model_dir: str) -> List[str]:
  """The run's checkpoint prefixes (`model_dir/ckpt-N`), oldest first.

  The `ckpt-N.*` files are the truth, not the `checkpoint` state file: that
  file may be missing, garbled or name paths of another folder (a copied
  run), and TensorFlow then reports "no checkpoint" and a resumed run would
  start again at step 1, overwriting and then deleting the real ones."""
  if not tf.io.gfile.isdir(model_dir):
    return []
  numbers = sorted(int(m.group(1)) for m in map(
      _CHECKPOINT.fullmatch, tf.io.gfile.listdir(model_dir)) if m)
  return [os.path.join(model_dir, f"ckpt-{n}") for n in numbers]


def newest_checkpoint(model_dir: str) -> Optional[str]:
  """The newest checkpoint on disk (readable or not), or None."""
  found = checkpoints_on_disk(model_dir)
  return found[-1] if found else None


def unreadable(prefix: str) -> Optional[str]:
  """Why the checkpoint `prefix` cannot be read (truncated, corrupt or
  missing files), or None if every tensor reads back."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except _READ_ERRORS as e:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
  return None


def readable_checkpoints(model_dir: str, log_fn=None) -> Iterator[str]:
  """The checkpoints on disk, newest first, skipping (with a log line) those
  that cannot be read: what a reader of a run (export, evaluation, a
  teacher) tries in turn. Nothing on disk is changed."""
  for prefix in reversed(checkpoints_on_disk(model_dir)):
    why = unreadable(prefix)
    if why is None:
      yield prefix
    elif log_fn:
      log_fn(f"checkpoint {prefix} is unreadable ({why}); trying the one "
             "before it")


def recover_checkpoint_state(model_dir: str, log_fn) -> Optional[str]:
  """Makes the `checkpoint` state file list exactly the readable checkpoints
  on disk, and returns the newest (None: no checkpoint). Run by the one
  process that writes the model_dir (under its lock) before resuming.

  A checkpoint whose files are truncated or corrupt (a write interrupted by
  a crash or a full disk) is renamed to `*.unreadable`, so training resumes
  from the one before it (when none reads, a CheckpointError names them
  and nothing is changed); a missing, garbled or stale state file is written
  anew from the files, so a resumed run continues from the newest readable
  checkpoint instead of starting over and deleting them.
  """
  found = checkpoints_on_disk(model_dir)
  bad = {}
  for prefix in reversed(found):
    why = unreadable(prefix)
    if why is None:
      break
    bad[prefix] = why
  state_file = os.path.join(model_dir, "checkpoint")
  if found and len(bad) == len(found):
    # Starting over would write ckpt-N anew over the only copies of the
    # run's progress: the user decides.
    raise CheckpointError(
        f"{model_dir}: no readable checkpoint (each of "
        f"{', '.join(os.path.basename(p) for p in found)} is truncated or "
        "corrupt); move them out of the model_dir to start over")
  for prefix, why in bad.items():
    for f in tf.io.gfile.glob(prefix + ".*"):
      tf.io.gfile.rename(f, f + ".unreadable", overwrite=True)
    if log_fn:
      log_fn(f"checkpoint {prefix} is unreadable ({why}); set aside as "
             "*.unreadable")
  good = [p for p in found if p not in bad]
  if not good:
    if tf.io.gfile.exists(state_file):
      tf.io.gfile.remove(state_file)
    return None
  state = _state(model_dir)
  listed = ([] if state is None else
            [os.path.join(model_dir, os.path.basename(p))
             for p in state.all_model_checkpoint_paths])
  newest = (None if state is None else
            os.path.join(model_dir,
                         os.path.basename(state.model_checkpoint_path)))
  if listed != good or newest != good[-1]:
    if log_fn and state is None:
      log_fn(f"{state_file} is missing or unreadable; rebuilt from the "
             f"checkpoints on disk (newest {good[-1]})")
    elif log_fn and newest != good[-1]:
      log_fn(f"{state_file} named {newest}, not the newest readable "
             f"checkpoint on disk; rebuilt (newest {good[-1]})")
    tf.compat.v1.train.update_checkpoint_state(
        model_dir, good[-1], all_model_checkpoint_paths=good)
  return good[-1]


def _state(model_dir: str):
  """The parsed `checkpoint` state file, or None if missing or garbled
  (TensorFlow logs its parse error and returns None)."""
  try:
    return tf.train.get_checkpoint_state(model_dir)
  except (tf.errors.OpError, ValueError, UnicodeDecodeError):
    return None


def checkpoint_write_failed(model_dir: str, code: int, log_fn) -> OSError:
  """The one-line error of a checkpoint (or summary) write that ran out of
  space; the half-written checkpoint is removed, so the next start resumes
  from the newest complete one."""
  remove_interrupted_writes(model_dir, log_fn)
  newest = newest_checkpoint(model_dir)
  error = OSError(
      f"{model_dir}: a checkpoint could not be written ({os.strerror(code)}); "
      f"the newest one is {os.path.basename(newest) if newest else 'none'}: "
      "free some space and run the same command to resume")
  error.errno = code
  return error


def write_predictions(task, model, model_dir: str) -> str:
  """`task.predict` into a scratch folder, then its files copied into
  `model_dir` one by one, each replacing the old one whole (`atomic_file`).
  The files of an earlier predict run are removed first, so a run that fails
  leaves none that could be taken for its output; scratch folders that a
  killed predict run left are removed (the model_dir lock is held)."""
  for name in task.prediction_files:
    old = os.path.join(model_dir, name)
    if os.path.lexists(old) and not os.path.isfile(old):
      raise IsADirectoryError(f"{old}: is not a file; the predictions cannot "
                              "be written there (move it away)")
  for name in task.prediction_files:
    old = os.path.join(model_dir, name)
    if os.path.exists(old):
      os.remove(old)
  for name in os.listdir(model_dir):
    if name.startswith(".predict-"):
      shutil.rmtree(os.path.join(model_dir, name), ignore_errors=True)
  scratch = tempfile.mkdtemp(prefix=".predict-", dir=model_dir)
  try:
    path = task.predict(model, scratch)
    for name in os.listdir(scratch):
      with open(os.path.join(scratch, name), "rb") as src, _io.atomic_file(
          os.path.join(model_dir, name), "wb") as dest:
        shutil.copyfileobj(src, dest)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  return os.path.join(model_dir, os.path.basename(path))


@contextlib.contextmanager
def explain_restore_errors(path):
  """A checkpoint whose shapes do not fit the model is an error naming it."""
  try:
    yield
  except ValueError as e:
    text = str(e)
    if path and ("shape" in text or "incompatible" in text.lower()):
      raise ValueError(
          f"checkpoint {path} does not fit this model: {text.splitlines()[0]} "
          "(was this model_dir written by a run with another task, label "
          "count or config?)") from None
    raise
