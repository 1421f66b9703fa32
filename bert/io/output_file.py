"""Output files written atomically: whole or not at all, never over a folder.

A writer fills a temp file beside the output, `X.tmp-<host>-<pid>-<random>`
(so that it can be renamed into place, and so that a later write can tell a
killed writer's leftover from a live one's); once the writer is done the
file is flushed to disk and renamed over the output. So:

- a failed or killed write (an error, a full disk, SIGKILL) leaves the
  previous file as it was, and no half-written one; a killed writer's temp
  file is removed by the next write of the same output;
- an output that is a folder is refused (never replaced by a file), as is a
  read-only existing file; a symlink is followed (the file it points to is
  replaced), a dangling one refused; a parent that is a file or a folder
  one cannot write to: one line naming the path, before anything is written;
- an output that is a device or a pipe (`/dev/stdout`, a FIFO) is written
  into as it is (a rename would replace the device node with a file).
"""

import contextlib
import os
import shutil
import stat
import tempfile
from typing import IO, Dict, Iterable, Iterator, Optional, Tuple, Union

from bert.io.output_record import (cannot_write_in, check_parent,
                                      disk_error, os_error, output_path,
                                      remove_leftovers, sync_folder,
                                      this_host, write_failed)


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", encoding: Optional[str] = "utf-8",
                keep_name: bool = False) -> Iterator[IO]:
  """Yields a file open for writing (`mode` "w" or "wb"); when the block
  ends without an error, its content replaces `path` whole, else `path`
  stays as it was. Errors about the output are OSErrors (IsADirectoryError,
  PermissionError, NotADirectoryError, ...) whose one-line message names
  `path`. A writer that opens files by name (say, a TFRecordWriter) writes
  to `f.name`, the temp file. `keep_name`: the temp file has the output's
  own name, in a temp folder beside it (`X.tmp-<host>-<pid>-<random>/X`),
  for a writer that goes by the name's suffix (Keras' `.keras`)."""
  if mode not in ("w", "wb"):
    raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
  encoding = None if "b" in mode else encoding
  path = check_output_file(path)
  if os.path.exists(path) and not os.path.isfile(path):
    with _in_place(path, mode, encoding) as f:   # a device or a pipe
      yield f
    return
  existed = os.path.exists(path)
  remove_leftovers(path)
  fd, tmp = _temp_file(path, keep_name)
  try:
    # Opened on `fd`, under the temp file's name (`f.name`: a path).
    with open(tmp, mode, encoding=encoding, opener=lambda *_: fd) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())   # on disk before it takes the output's name
    os.chmod(tmp, _mode(path if existed else None))
    os.replace(tmp, path)
  except BaseException as e:
    _discard(tmp, keep_name)
    if isinstance(e, OSError) and e.filename == tmp:   # the rename, say
      kept = ("its previous content is kept" if existed
              else "nothing was written")
      raise os_error(e, f"{path}: could not be written ({e.strerror}); "
                     f"{kept}") from None
    if _disk_error(e, tmp) is not None:
      raise write_failed(path, _disk_error(e, tmp), existed) from e
    raise
  if keep_name:
    _discard(tmp, keep_name)   # the temp folder, now empty
  sync_folder(os.path.dirname(path))


def check_output_file(path: str, in_place: bool = True) -> str:
  """What `atomic_file(path)` checks before it writes, for a command to
  check before a long computation; returns the output's absolute path (a
  symlink followed). `in_place=False`: a device or a pipe is refused too
  (for a writer that can only write beside the output and rename)."""
  path = output_path(path)
  if os.path.isdir(path):
    raise IsADirectoryError(f"{path}: is a folder; refusing to replace it "
                            "with a file (choose a file name)")
  if os.path.exists(path) and not os.path.isfile(path):
    if not in_place:
      raise FileExistsError(f"{path}: is a device or a pipe, not a file; "
                            "refusing to replace it (choose a file name)")
    return path                    # written in place
  check_parent(path)
  effective = os.access in os.supports_effective_ids
  if os.path.exists(path) and not os.access(path, os.W_OK,
                                            effective_ids=effective):
    raise PermissionError(f"{path}: is read-only; refusing to replace it "
                          "(make it writable, or choose another file)")
  parent = _existing_ancestor(path)
  if not os.access(parent, os.W_OK | os.X_OK, effective_ids=effective):
    raise PermissionError(f"{path}: cannot write it in {parent} (permission "
                          "denied); choose a folder you can write to")
  return path


def check_not_an_input(output: str, inputs: Union[
    Dict[str, Optional[str]], Iterable[Tuple[str, Optional[str]]]]) -> None:
  """Refuses an output that would replace what a command reads: one of its
  `inputs` ({what: path} or (what, path) pairs, e.g. {"--input_file": ...};
  a None path skipped), a folder that holds one, or an existing file in an
  input folder (say, a checkpoint's vocab.txt)."""
  out = os.path.realpath(output)
  for what, path in (inputs.items() if isinstance(inputs, dict) else inputs):
    if not path or not os.path.exists(path):
      continue
    source = os.path.realpath(path)
    if os.path.exists(out) and os.path.samefile(out, source):
      why = f"is {what} ({path})"
    elif source.startswith(out + os.sep):
      why = f"holds {what} ({path})"
    elif out.startswith(source + os.sep) and os.path.isfile(out):
      why = f"is a file in {what} ({path})"
    else:
      continue
    raise FileExistsError(f"{output}: {why}, which this command reads; "
                          "choose another output")


def _existing_ancestor(path: str) -> str:
  folder = os.path.dirname(path)
  while not os.path.exists(folder):
    folder = os.path.dirname(folder)
  return folder


@contextlib.contextmanager
def _in_place(path: str, mode: str, encoding: Optional[str]) -> Iterator[IO]:
  """An existing device or pipe, opened and written as it is."""
  try:
    f = open(path, mode, encoding=encoding)  # pylint: disable=consider-using-with
  except OSError as e:
    raise os_error(e, f"{path}: cannot be written ({e.strerror})") from None
  try:
    with f:
      yield f
      f.flush()
  except OSError as e:
    if _disk_error(e, path) is None:
      raise
    raise os_error(e, f"{path}: could not be written ({e.strerror})") from None


def _temp_file(path: str, keep_name: bool = False):
  """(fd, path) of a new temp file beside `path`, named for its writer (or
  named as `path`, in a temp folder named for its writer: a killed
  writer's is removed as its temp file would be)."""
  parent, base = os.path.split(path)
  prefix = f"{base}.tmp-{this_host()}-{os.getpid()}-"
  try:
    os.makedirs(parent, exist_ok=True)
    if not keep_name:
      return tempfile.mkstemp(dir=parent, prefix=prefix)
    folder = tempfile.mkdtemp(dir=parent, prefix=prefix)
    tmp = os.path.join(folder, base)
    try:
      return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), tmp
    except OSError:
      os.rmdir(folder)
      raise
  except OSError as e:
    raise cannot_write_in(e, path, parent) from None


def _discard(tmp: str, keep_name: bool) -> None:
  """Removes the temp file (and with `keep_name`, its temp folder)."""
  if keep_name:
    shutil.rmtree(os.path.dirname(tmp), ignore_errors=True)
  else:
    with contextlib.suppress(OSError):
      os.unlink(tmp)


def _disk_error(e: BaseException, written: str) -> Optional[int]:
  """The errno of a disk-full-like failure of the output's own write (not
  of, say, another file the writer wrote), else None."""
  if isinstance(e, OSError) and e.filename not in (None, written):
    return None
  return disk_error(e)


def _mode(existing: Optional[str]) -> int:
  """The permissions a plain write would give: the existing file's, or
  the umask's for a new one (mkstemp makes it private, 0600)."""
  if existing is not None:
    return stat.S_IMODE(os.stat(existing).st_mode) & 0o777
  umask = os.umask(0)
  os.umask(umask)
  return 0o666 & ~umask
