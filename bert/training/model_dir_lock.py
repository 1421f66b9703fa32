"""One run per model_dir: a lock held for the life of a run.

Two runs on one model_dir would restore checkpoints the other is deleting,
or interleave their checkpoints and summaries. The chief of a run holds an
exclusive `flock` on `model_dir/.bert_train.lock` until it returns; the
file names the holder (pid, host, start time) for the error a second run
prints. The kernel releases the lock when its process dies, so the lock of
a killed run is taken over by the next one (with a log line naming it).
Folders that are not local paths (gs://, hdfs://) have no POSIX locks and
are not locked.
"""

import contextlib
import fcntl
import json
import os
import socket
import time
from bert.errors import UserError

LOCK_FILE = ".bert_train.lock"


class ModelDirInUseError(UserError, RuntimeError):
  """Another live run holds the model_dir's lock."""


def _holder(fd) -> str:
  os.lseek(fd, 0, os.SEEK_SET)
  text = os.read(fd, 4096).decode("utf-8", "replace").strip()
  if not text:
    return ""
  try:
    info = json.loads(text)
    return (f"pid {info['pid']} on {info['host']}, started "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['started']))}")
  except (ValueError, KeyError, TypeError):
    return text[:200]


@contextlib.contextmanager
def model_dir_lock(model_dir: str, log_fn=None):
  """Holds `model_dir`'s run lock inside the `with` block, or raises
  ModelDirInUseError naming the run that holds it."""
  if "://" in model_dir:
    yield
    return
  path = os.path.join(model_dir, LOCK_FILE)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise ModelDirInUseError(
          f"model_dir {model_dir} is in use by another run "
          f"({_holder(fd) or 'unknown holder'}); wait for it to end or use "
          "another model_dir") from None
    stale = _holder(fd)
    if stale and log_fn:
      log_fn(f"model_dir {model_dir}: took over the lock of a run that is no "
             f"longer running ({stale})")
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(dict(pid=os.getpid(), host=socket.gethostname(),
                                 started=time.time())).encode())
    try:
      yield
    finally:
      os.ftruncate(fd, 0)     # a clean end leaves no holder to take over
  finally:
    os.close(fd)              # releases the lock
