"""What the tests of the library's outputs share (atomic_folder, atomic_file,
model.save, the data writers): the record's name, this host as temp names
carry it, a folder's tree, an unprivileged user (root ignores file modes), a
full disk in one process, a writer killed mid-write, a dead process id (the
one-line check is conftest's `one_line`)."""

import contextlib
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO_ROOT

# The record of what the library wrote in a folder (part of its format).
RECORD = ".bert-tf2-files.json"
# This host as a writer's temp names carry it (`X.tmp-<host>-<pid>-<random>`).
HOST = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())


def tree(folder):
  """{relative path: content (None for a folder)} of everything under it."""
  out = {}
  for root, dirs, files in os.walk(folder):
    for d in dirs:
      out[os.path.relpath(os.path.join(root, d), folder) + "/"] = None
    for f in files:
      with open(os.path.join(root, f), "rb") as fh:
        out[os.path.relpath(os.path.join(root, f), folder)] = fh.read()
  return out


def write(folder, files):
  for name, text in files.items():
    os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
      f.write(text)


@contextlib.contextmanager
def unprivileged():
  """Runs the body as a user the file modes apply to (root ignores them)."""
  if os.geteuid() != 0:
    yield
    return
  os.seteuid(65534)
  try:
    yield
  finally:
    os.seteuid(0)


@contextlib.contextmanager
def file_size_limit(size):
  """Writes past `size` bytes fail with EFBIG: a full disk, in one process."""
  previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  limits = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (size, limits[1]))
  try:
    yield
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    signal.signal(signal.SIGXFSZ, previous)


def kill_while_writing(script, *args, **env):
  """Runs `python -c script *args` (the worktree's `bert` first on
  PYTHONPATH; `env` added to the environment), waits for the line
  "writing" it prints once it is inside its write, and kills it (SIGKILL):
  a writer killed mid-write."""
  writer = subprocess.Popen([sys.executable, "-c", script, *args],
                            stdout=subprocess.PIPE, cwd=REPO_ROOT,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT, **env))
  try:
    assert writer.stdout.readline() == b"writing\n"
    os.kill(writer.pid, signal.SIGKILL)
  finally:
    writer.kill()
    writer.wait()


def dead_pid():
  """A process id no process has, found without starting one (so the output
  tests stay in the fast tier): the free id just below the last one given
  out, which the kernel, counting upwards and wrapping around, reaches
  last."""
  with open("/proc/sys/kernel/ns_last_pid", encoding="ascii") as f:
    last = int(f.read())
  with open("/proc/sys/kernel/pid_max", encoding="ascii") as f:
    pid_max = int(f.read())
  for pid in [*range(last - 1, 1, -1), *range(pid_max - 1, last, -1)]:
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      return pid
    except PermissionError:
      continue
  raise AssertionError("no free process id")


@pytest.fixture
def shared_tmp():
  """A temp folder an unprivileged user can reach (pytest's is private)."""
  root = tempfile.mkdtemp(prefix="bert_output_test-")
  os.chmod(root, 0o777)
  yield root
  for dirpath, dirs, _ in os.walk(root):
    for d in dirs:
      os.chmod(os.path.join(dirpath, d), 0o777)
  shutil.rmtree(root)
