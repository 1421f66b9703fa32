"""Output folders written atomically, replacing only what this library wrote.

A writer fills a temp folder beside the output, `X.tmp-<host>-<pid>-<random>`.
When it is done, a record of what it wrote goes in (`_output_record.RECORD`:
every file and folder under it) and the temp folder takes the output's
place; the folder it replaces is moved aside (`X.old-<host>-<pid>-<random>`)
and only the entries that folder's own record lists are deleted from there.
So:

- an existing output is replaced only if the caller says it is its kind (a
  checkpoint, a SavedModel, records) AND every entry in it is in its record:
  a user's `notes.txt` or `experiments/` in it make the write fail at once,
  with one line naming the folder and the entry, and nothing is changed;
- a folder written before records were kept (no record) is replaced only if
  it holds nothing but what this write produces too (known once the write is
  done; otherwise refused in the same way, the new output discarded);
- the temp and set-aside folders of a writer that was killed (SIGKILL, power
  loss) are removed by the next write of the same output once the process
  their name gives, and the helpers in the process group it leads, no longer
  run on this host (never a live writer's); a set-aside folder whose output
  is missing (killed between the two renames) is put back instead;
- a parent that is a file, a read-only parent or output folder: one-line
  OSErrors naming the path, before anything is written.
"""

import contextlib
import os
import shutil
import tempfile
from typing import Callable, Iterator, Optional, Set, Type

from absl import logging

from bert.io.output_record import (RECORD, cannot_write_in,
                                      check_parent, delete_recorded,
                                      disk_error, os_error, output_path,
                                      read_record, remove_leftovers,
                                      sync_folder, sync_tree, this_host, tree,
                                      write_failed, write_record)


@contextlib.contextmanager
def atomic_folder(path: str, replaceable: Callable[[str], bool], what: str,
                  error: Type[Exception] = FileExistsError) -> Iterator[str]:
  """Yields a temp folder beside `path`; on success it replaces `path`, on
  failure it is deleted, so `path` is never left half-written.

  An existing `path` is replaced only if `replaceable(path)` (say, an empty
  folder or one this library wrote; never a home directory given by
  mistake) and it holds nothing the library did not write there; otherwise
  `error` names it (and the first entry that is not the library's), and
  `what` may be there.
  """
  path = output_path(path)
  check_parent(path)
  remove_leftovers(path)
  _check_existing(path, replaceable, what, error)
  tmp = _make_aside(path, "tmp")
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private (0700)
  try:
    yield tmp
    # Writers that go through a private temp file (safetensors) leave 0600;
    # every file gets the mode a plain write would give it.
    for name in os.listdir(tmp):
      if os.path.isfile(os.path.join(tmp, name)):
        os.chmod(os.path.join(tmp, name), 0o666 & ~umask)
    written = tree(tmp)
    write_record(tmp, written)
    sync_tree(tmp, written + [RECORD])
    # Checked again: the folder may have changed during a long write.
    old = _set_aside(path, replaceable, what, error, set(written))
  except BaseException as e:
    shutil.rmtree(tmp, ignore_errors=True)
    if disk_error(e) is not None:   # a full disk: named, not a traceback
      raise write_failed(path, disk_error(e), os.path.lexists(path)) from e
    raise
  try:
    os.rename(tmp, path)
  except OSError as e:
    shutil.rmtree(tmp, ignore_errors=True)
    if old is not None and not os.path.lexists(path):
      os.rename(old, path)
    elif old is not None:     # another process made `path` meanwhile
      raise os_error(e, f"{path}: could not be replaced ({e.strerror}); its "
                     f"previous content is in {old}") from None
    raise os_error(e, f"{path}: could not be replaced ({e.strerror})") from None
  sync_folder(os.path.dirname(path))
  if old is not None:
    kept = delete_recorded(old)
    if kept:
      logging.warning("%s: kept %s aside: it holds %s, which was put in %s "
                      "while it was being replaced", path, old, kept[0], path)


# ---------------------------------------------------------- checks before
def _check_existing(path, replaceable, what, error) -> None:
  """Refuses an existing `path` that may not be replaced, before any work."""
  if not os.path.lexists(path):
    return
  own = _check_kind(path, replaceable, what, error)
  if own is not None:
    _refuse_foreign(path, tree(path), own, error)
  _check_writable(path)


def _check_kind(path, replaceable, what, error) -> Optional[Set[str]]:
  """The entries `path`'s record lists (None: no record); an error if it is
  a file or not the caller's kind."""
  if not os.path.isdir(path):
    raise error(f"{path}: is a file, not a folder; refusing to replace it "
                "(choose a new or empty folder)")
  if not replaceable(path):
    names = sorted(os.listdir(path))
    holds = f" (it holds {names[0]!r})" if names else ""
    raise error(f"{path}: exists and is not {what} written here{holds}; "
                "refusing to replace it (choose an empty or new folder)")
  return read_record(path)


def _refuse_foreign(path, entries, own, error, legacy=False) -> None:
  foreign = [e for e in entries if e not in own]
  if not foreign:
    return
  why = ("which this write does not produce (the folder was written before "
         "the library kept a record of its files)" if legacy else
         "which the library did not write there")
  raise error(f"{path}: holds {foreign[0]!r}, {why}; refusing to replace the "
              f"folder, which would delete it (move {foreign[0]!r} out of "
              "it, or choose another folder)")


def _check_writable(path) -> None:
  """A read-only folder among those replaced would be left half-deleted."""
  effective = os.access in os.supports_effective_ids
  folders = [path] + [os.path.join(path, e) for e in tree(path)
                      if e.endswith("/")]
  for folder in folders:
    if not os.access(folder, os.W_OK | os.X_OK, effective_ids=effective):
      raise PermissionError(
          f"{path}: cannot replace it: {folder} is read-only (permission "
          "denied); make it writable, or choose another folder")


# ------------------------------------------------------------ replacing
def _set_aside(path, replaceable, what, error, written) -> Optional[str]:
  """Moves the existing `path` (if any) aside, after checking it again; the
  folder moved aside carries a record of what may be deleted from it."""
  if not os.path.lexists(path):
    return None
  own = _check_kind(path, replaceable, what, error)
  entries = tree(path)
  if own is None:
    _refuse_foreign(path, entries, written, error, legacy=True)
    write_record(path, entries)   # so that a kill from here on loses nothing
  else:
    _refuse_foreign(path, entries, own, error)
  old = _make_aside(path, "old")
  os.rmdir(old)
  try:
    os.rename(path, old)
  except OSError as e:
    raise os_error(e, f"{path}: could not be moved aside to be replaced "
                   f"({e.strerror})") from None
  return old


def _make_aside(path: str, kind: str) -> str:
  """A new folder `<path>.<kind>-<host>-<pid>-<random>` beside `path`."""
  parent = os.path.dirname(path)
  try:
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(dir=parent, prefix=(
        f"{os.path.basename(path)}.{kind}-{this_host()}-{os.getpid()}-"))
  except OSError as e:
    raise cannot_write_in(e, path, parent) from None
