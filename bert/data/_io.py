"""Reading user text files (every decoding problem names the file and
line), and writing output folders atomically."""

import contextlib
import errno
import os
import shutil
import tempfile
from typing import Callable, Iterator, Tuple, Type

from bert.data.errors import DataError


def present(path: str) -> bool:
  """Whether a file or folder is at `path`. A symlink that leads nowhere
  (dangling, or a loop) is an error naming it, never "absent": a reader
  that skipped it would go on without the file the user put there."""
  if not os.path.lexists(path):
    return False
  try:
    os.path.realpath(path, strict=True)
  except OSError as e:
    what = ("a symlink loop" if getattr(e, "errno", None) == errno.ELOOP
            else f"a symlink to {os.readlink(path)!r}, which does not exist"
            if os.path.islink(path) else f"unreadable ({e.strerror})")
    raise FileNotFoundError(f"{path}: {what}") from None
  return True


def text_lines(path: str) -> Iterator[Tuple[int, str]]:
  """(line number, line with its newline) of a UTF-8 file (a leading BOM is
  dropped). Invalid UTF-8 is a DataError naming the file and line."""
  if not present(path):
    raise FileNotFoundError(f"{path}: no such file")
  with open(path, "rb") as f:
    for number, raw in enumerate(f, start=1):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise DataError(f"{path}:{number}: not valid UTF-8 (byte "
                        f"0x{raw[e.start]:02x} at column {e.start + 1})") from None
      if number == 1 and line.startswith("\ufeff"):
        line = line[1:]
      yield number, line


def read_text(path: str) -> str:
  """The whole UTF-8 file; invalid UTF-8 is a DataError naming the line."""
  if not present(path):
    raise FileNotFoundError(f"{path}: no such file")
  with open(path, "rb") as f:
    data = f.read()
  try:
    return data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    raise DataError(f"{path}:{line}: not valid UTF-8 (byte 0x{data[e.start]:02x})"
                    ) from None


@contextlib.contextmanager
def atomic_folder(path: str, replaceable: Callable[[str], bool], what: str,
                  error: Type[Exception] = FileExistsError):
  """Yields a temp folder beside `path`; on success it replaces `path`, on
  failure it is deleted, so `path` is never left half-written.

  An existing `path` is replaced only if `replaceable(path)` (say, an empty
  folder or one this library wrote; never a home directory given by
  mistake); otherwise `error` names it and `what` may be there.
  """
  path = os.path.abspath(path)
  parent = os.path.dirname(path)
  if os.path.lexists(path) and not replaceable(path):
    raise error(f"{path}: exists and is not {what} written here; refusing "
                "to replace it (choose an empty or new folder)")
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=os.path.basename(path) + ".tmp-", dir=parent)
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
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  old = None
  if os.path.exists(path):
    old = tempfile.mkdtemp(prefix=os.path.basename(path) + ".old-", dir=parent)
    os.rmdir(old)
    os.rename(path, old)
  os.rename(tmp, path)
  if old is not None:
    shutil.rmtree(old, ignore_errors=True)
