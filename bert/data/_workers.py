"""Worker processes that end with the process that started them.

The library's parallel writers (`bert-create-pretraining-data` and
`bert-create-finetuning-data --num_processes`) write into temp files and
folders named for the parent process (`X.tmp-<host>-<pid>-<random>`). A
later run removes those once that process is gone; a pool worker that went
on writing its share after the parent was killed (SIGKILL, out of memory)
would race that clean-up. So each worker ends as soon as its parent does:
on Linux the kernel kills it (PR_SET_PDEATHSIG), elsewhere a watcher thread
notices that its parent changed.
"""

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1     # <linux/prctl.h>
_POLL_SECONDS = 0.5


def worker_pool(processes: int):
  """A "spawn" `multiprocessing.Pool` of `processes` workers, each of which
  exits when the process that made the pool dies."""
  return multiprocessing.get_context("spawn").Pool(
      processes, initializer=exit_with_parent, initargs=(os.getpid(),))


def exit_with_parent(parent: int) -> None:
  """Makes this process exit when `parent` (its parent) does. A pool's
  initializer; also for a process started by other means."""
  watched_by_kernel = _kill_on_parent_death()
  if os.getppid() != parent:     # it died before we asked
    os._exit(1)
  if not watched_by_kernel:
    threading.Thread(target=_watch, args=(parent,), daemon=True,
                     name="exit-with-parent").start()


def _kill_on_parent_death() -> bool:
  """Asks Linux to SIGKILL this process when its parent exits; whether it
  could."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
  except (OSError, AttributeError):
    return False


def _watch(parent: int) -> None:
  """The portable fallback: an orphan is re-parented (to init or a
  subreaper), so a changed parent id means the parent is gone."""
  while os.getppid() == parent:
    time.sleep(_POLL_SECONDS)
  os._exit(1)
