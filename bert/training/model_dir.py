"""Preparing a run's model_dir: writable before anything is built, no
leftovers of interrupted checkpoint writes, the newest readable checkpoint as
the latest, and an error that names a checkpoint the model does not fit."""

import contextlib
import os
import re

import tensorflow as tf


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


def set_aside_unreadable_checkpoints(model_dir: str, log_fn) -> None:
  """Makes the newest *readable* checkpoint the latest one.

  A checkpoint whose files are truncated or corrupt (a write interrupted by a
  crash or a full disk) is renamed to `*.unreadable` and dropped from the
  `checkpoint` state file, so training resumes from the one before it.
  """
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None:
    return
  paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
  good = list(paths)
  for path in reversed(paths):
    try:
      reader = tf.train.load_checkpoint(path)
      for name in reader.get_variable_to_shape_map():
        reader.get_tensor(name)
      break
    except (tf.errors.OpError, ValueError, IndexError) as e:   # truncated/corrupt
      good.remove(path)
      for f in tf.io.gfile.glob(path + ".*"):
        tf.io.gfile.rename(f, f + ".unreadable", overwrite=True)
      if log_fn:
        log_fn(f"checkpoint {path} is unreadable ({type(e).__name__}: "
               f"{str(e).splitlines()[0][:200]}); set aside as *.unreadable")
  if good != paths:
    if good:
      tf.compat.v1.train.update_checkpoint_state(model_dir, good[-1],
                                                 all_model_checkpoint_paths=good)
    else:
      tf.io.gfile.remove(os.path.join(model_dir, "checkpoint"))


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
