"""Reading user text files (every decoding problem names the file and
line), and writing output files and folders atomically."""

import errno
import os
from typing import Iterator, Tuple

# Output files and folders: written atomically (a failed or killed write
# leaves the previous one); a folder replaces only the library's files.
from bert.io.output_file import (  # noqa: F401 pylint: disable=unused-import
    atomic_file, check_not_an_input, check_output_file)
from bert.io.output_folder import atomic_folder  # noqa: F401 pylint: disable=unused-import
# The library's Keras models: `save` and `save_weights` through these.
from bert.io.output_keras import AtomicSave  # noqa: F401 pylint: disable=unused-import
# Every SavedModel the library writes is traced inside this (no custom
# gradient in it: bert.io.output_saved_model).
from bert.io.output_saved_model import (  # noqa: F401 pylint: disable=unused-import
    tracing_a_savedmodel, tracing_for_savedmodel)
# For writers outside these (a training run's checkpoints): whether an
# exception is a full disk, and its one-line error naming the output.
from bert.io.output_record import (  # noqa: F401 pylint: disable=unused-import
    disk_error, write_failed)
from bert.errors import DataError


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
