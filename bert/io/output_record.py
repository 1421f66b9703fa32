"""What the library wrote in an output folder (its record), the folders and
files a killed writer left beside an output, and the checks of an output's
path (`bert.io.output_folder` and `_output_file` use them).

The record (`RECORD`, written last into every output folder) lists every
file and folder the library wrote there; nothing it does not list is ever
deleted. A writer's temp and set-aside folders are named
`<output>.tmp-<host>-<pid>-<random>` and `<output>.old-<host>-<pid>-<random>`
(the temp file of an output file like the first), so a later write can tell
whether their writer still runs.
"""

import contextlib
import errno
import json
import os
import re
import shutil
import socket
from typing import List, Optional, Set

from absl import logging

RECORD = ".bert-tf2-files.json"   # what the library wrote in the folder
_RECORD_FORMAT = "bert-tf2 output folder"


# ----------------------------------------------------------- the record
def tree(folder: str) -> List[str]:
  """Every entry under `folder` but its record, as relative paths ("a/"
  for a folder; symlinks not followed), each folder before its contents."""
  out = []

  def walk(rel):
    try:
      with os.scandir(os.path.join(folder, rel)) as it:
        entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
      raise os_error(e, f"{os.path.join(folder, rel)}: cannot be read "
                     f"({e.strerror})") from None
    for entry in entries:
      if not rel and entry.name == RECORD:
        continue
      if entry.is_dir(follow_symlinks=False):
        out.append(rel + entry.name + "/")
        walk(rel + entry.name + "/")
      else:
        out.append(rel + entry.name)

  walk("")
  return out


def write_record(folder: str, entries: List[str]) -> None:
  with open(os.path.join(folder, RECORD), "w", encoding="utf-8") as f:
    json.dump(dict(format=_RECORD_FORMAT, entries=entries), f, indent=0)
    f.write("\n")


def read_record(folder: str) -> Optional[Set[str]]:
  """The entries `folder`'s record lists; None if it has none (or one this
  library cannot read: then nothing in it counts as the library's)."""
  try:
    with open(os.path.join(folder, RECORD), encoding="utf-8") as f:
      record = json.load(f)
    entries = record["entries"]
    if record.get("format") != _RECORD_FORMAT or not all(
        isinstance(e, str) for e in entries):
      return None
    return set(entries)
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return None


def delete_recorded(folder: str) -> List[str]:
  """Deletes the entries `folder`'s record lists, then the record and the
  folder if nothing else is left; what is left (never deleted)."""
  own = read_record(folder) or set()
  for entry in reversed(tree(folder)):   # contents before their folder
    if entry in own:
      with contextlib.suppress(OSError):
        full = os.path.join(folder, entry)
        os.rmdir(full) if entry.endswith("/") else os.unlink(full)
  left = tree(folder)
  if not left:
    with contextlib.suppress(OSError):
      os.unlink(os.path.join(folder, RECORD))
      os.rmdir(folder)
  return left


# ---------------------------------------------------------------- paths
def output_path(path: str) -> str:
  """The absolute output path; a symlink is followed (the file or folder it
  points to is the output), a dangling one is an error naming it."""
  path = os.path.abspath(path)
  if os.path.islink(path):
    try:
      return os.path.realpath(path, strict=True)
    except OSError:
      raise FileNotFoundError(f"{path}: a symlink to {os.readlink(path)!r}, "
                              "which does not exist; choose another "
                              "output path") from None
  return path


def check_parent(path: str) -> None:
  """The nearest existing ancestor of `path` must be a folder."""
  ancestor = os.path.dirname(path)
  while not os.path.lexists(ancestor):
    ancestor = os.path.dirname(ancestor)
  if not os.path.isdir(ancestor):
    kind = ("a file" if os.path.isfile(ancestor) else
            f"a symlink to {os.readlink(ancestor)!r}, which does not exist"
            if os.path.islink(ancestor) else "not a folder")
    raise NotADirectoryError(f"{path}: cannot be created, since {ancestor} is "
                             f"{kind}; choose another output path")


def sync_tree(folder: str, entries: List[str]) -> None:
  """Puts the files and folders `entries` of `folder` (and the folder) on
  disk: a folder renamed into place must not turn out, after a power loss,
  to hold empty files when the one it replaced is gone."""
  for entry in entries + [""]:
    full = os.path.join(folder, entry)
    if entry.endswith("/") or not entry:
      sync_folder(full)
    elif os.path.isfile(full) and not os.path.islink(full):
      try:
        fd = os.open(full, os.O_RDONLY)
      except OSError:      # unreadable to us (its writer's mode): skipped
        continue
      try:
        os.fsync(fd)       # an error here (EIO) is the write's own
      finally:
        os.close(fd)


def sync_folder(folder: str) -> None:
  """Puts a folder's entries on disk (after a rename in it); best effort:
  some file systems cannot open or sync a folder."""
  with contextlib.suppress(OSError):
    fd = os.open(folder, os.O_RDONLY)
    try:
      os.fsync(fd)
    finally:
      os.close(fd)


# ------------------------------------------------------------ leftovers
def remove_leftovers(path: str) -> None:
  """Removes the temp and set-aside folders (and temp files) beside `path`
  of writers that no longer run (killed mid-write); names those it cannot
  judge."""
  parent, base = os.path.split(path)
  pattern = re.compile(re.escape(base) + r"\.(tmp|old)-(?:(.+)-(\d+)-)?"
                       r"[a-z0-9_]{8}")
  try:
    names = sorted(os.listdir(parent))
  except OSError:
    return
  for name in names:
    match = pattern.fullmatch(name)
    full = os.path.join(parent, name)
    if (not match or os.path.islink(full) or not (
        os.path.isdir(full) or match.group(1) == "tmp" and
        os.path.isfile(full))):
      continue
    try:
      _remove_leftover(path, full, *match.groups())
    except OSError as e:   # never a reason not to write the output
      logging.warning("%s: not removed (%s)", full, e)


def _remove_leftover(path, full, kind, on_host, pid) -> None:
  """Removes (or restores) one folder `full` a writer of `path` left."""
  if pid is None:
    logging.warning("%s: left beside %s by an earlier version of this library;"
                    " not removed, since its name does not say which process "
                    "wrote it: delete it yourself once no process is writing "
                    "it", full, path)
  elif on_host != this_host():
    logging.warning("%s: left beside %s by a process on host %s; not removed "
                    "from here", full, path, on_host)
  elif not _alive(int(pid)):
    if kind == "old" and _restorable(full, path):
      logging.warning("%s: put back from %s, where process %s (killed while "
                      "replacing it) had moved it", path, full, pid)
      return
    if kind == "tmp" and not os.path.isdir(full):   # a temp file
      os.unlink(full)
      left = []
    elif kind == "tmp":     # all of it was being written by the library
      shutil.rmtree(full, ignore_errors=True)
      left = [os.path.basename(full)] if os.path.lexists(full) else []
    else:
      left = delete_recorded(full)
    if left:
      logging.warning("%s: left by process %s, which no longer runs; kept, "
                      "since it holds %s, which the library did not write",
                      full, pid, left[0])
    else:
      logging.warning("removed %s, left by process %s (killed while writing "
                      "%s)", full, pid, path)


def _restorable(old: str, path: str) -> bool:
  """Puts `old` back at `path` if the writer was killed between moving it
  aside and putting the new folder in place: `path` is missing and `old`
  is whole (every entry its record lists is there)."""
  own = read_record(old)
  if os.path.lexists(path) or own is None or set(tree(old)) != own:
    return False
  try:
    os.rename(old, path)
  except OSError:
    return False
  return True


def _alive(pid: int) -> bool:
  """Whether process `pid` (on this host), or a helper in the process group
  it leads (a pool worker outlives a killed parent), may still be writing.
  Killed processes not yet reaped (zombies) write nothing more."""
  if pid == os.getpid():
    return True
  if not os.path.isdir("/proc/self"):
    try:
      os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
      return False
    except OSError:
      pass
    return True
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
      continue
    if (int(entry) == pid or fields[2] == str(pid)) and fields[0] not in "ZX":
      return True
  return False


def this_host() -> str:
  """This host's name as it goes into temp folder names."""
  return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


# A write that failed for want of room (or of a writable file system): the
# output's failure, whichever writer (Python, TensorFlow, safetensors) met it.
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def disk_error(e: BaseException) -> Optional[int]:
  """The errno of `e` if it is a disk-full-like failure, else None. Other
  writers' exceptions say it in their message: TensorFlow's `File too
  large`, safetensors' `(os error 28)`."""
  if isinstance(e, OSError):
    return e.errno if e.errno in DISK_ERRORS else None
  text = str(e)
  for code in DISK_ERRORS:
    if os.strerror(code) in text or f"os error {code})" in text:
      return code
  return None


def write_failed(path: str, code: int, existed: bool) -> OSError:
  """The one-line error of an output that could not be written (`code`, a
  disk error): the output is as it was."""
  kept = "its previous content is kept" if existed else "nothing was written"
  error = type(OSError(code, ""))(
      f"{path}: could not be written ({os.strerror(code)}); {kept}")
  error.errno = code
  return error


def cannot_write_in(e: OSError, path: str, folder: str) -> OSError:
  """The error of a temp file or folder for `path` that could not be made
  in `folder`, with what to do about it."""
  advice = ("choose a shorter name" if e.errno == errno.ENAMETOOLONG
            else "choose a folder you can write to")
  return os_error(e, f"{path}: cannot write it in {folder} ({e.strerror}); "
                  f"{advice}")


def os_error(e: OSError, message: str) -> OSError:
  """`message` as the OSError subclass of `e`'s errno (PermissionError,
  NotADirectoryError...), printed as the message alone."""
  error = type(OSError(e.errno, e.strerror or ""))(message)
  error.errno = e.errno
  return error
