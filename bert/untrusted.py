"""Files that came with a checkpoint, a preset, a config or an export: their
JSON, and the files they name.

Every JSON file the library reads from such a folder goes through
`read_json`, and every file name written inside one (a safetensors index's
shards, a tokenizer's `config_file`, a serving manifest's network, a
checkpoint's prefix) goes through `named_path`. So a damaged or hostile file
gives one line naming it, in the caller's error type, never a
JSONDecodeError, an AttributeError on a list where an object belongs, or a
read outside the folder. Imports nothing heavy: every module may use it.
"""

import json
import os
from typing import Any, Type

_KINDS = {dict: "an object", list: "an array", str: "a string",
          bool: "true or false", int: "an integer", float: "a number",
          type(None): "null"}


def kind(value: Any) -> str:
  """What a JSON value is, in words ("an array")."""
  return _KINDS.get(type(value), type(value).__name__)


def read_json(path: str, error: Type[Exception], expect: type = dict) -> Any:
  """The JSON value in `path`, which must be of type `expect` (a top-level
  object by default); anything else is `error` naming the file: unreadable,
  not UTF-8, not JSON, or JSON of another kind. A missing file is a
  FileNotFoundError naming it."""
  try:
    with open(path, "rb") as f:
      data = f.read()
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: no such file") from None
  except OSError as e:
    raise error(f"{path}: unreadable ({e.strerror or e})") from None
  try:
    value = json.loads(data.decode("utf-8-sig"))
  except UnicodeDecodeError as e:
    raise error(f"{path}: unreadable: not UTF-8 text (byte "
                f"0x{data[e.start]:02x} at offset {e.start})") from None
  except RecursionError:
    raise error(f"{path}: unreadable: JSON nested too deeply") from None
  except json.JSONDecodeError as e:
    raise error(f"{path}: unreadable: not valid JSON ({e.msg}: line "
                f"{e.lineno}, column {e.colno})") from None
  except ValueError as e:    # an integer of more than 4,300 digits
    raise error(f"{path}: unreadable: not valid JSON ({first_line(e)})"
                ) from None
  if not isinstance(value, expect):
    raise error(f"{path}: expected a JSON {_kind_of_type(expect)}, found "
                f"{kind(value)}")
  return value


def named_path(folder: str, name: Any, error: Type[Exception],
               source: str) -> str:
  """`folder`/`name` for a file that `source` (a file in `folder`) names.

  The name must be a relative path that stays inside `folder`: an absolute
  path, or one that climbs out with "..", is `error` naming `source`. The
  rule is on the name as written, not on where symlinks in the folder lead:
  a Hugging Face cache snapshot is a folder of symlinks into `../../blobs`,
  put there by the user's own tools.
  """
  if not isinstance(name, str) or not name.strip():
    raise error(f"{source}: expected a file name, found {kind(name)} "
                f"{name!r}")
  parts = os.path.normpath(name).split(os.sep)
  if ("\0" in name or os.path.isabs(name) or os.path.splitdrive(name)[0]
      or parts[0] == os.pardir):
    raise error(f"{source}: names {name!r}, which is outside {folder}; the "
                "files a checkpoint or export names must be inside its folder")
  return os.path.join(folder, name)


def _kind_of_type(expect) -> str:
  types = expect if isinstance(expect, tuple) else (expect,)
  return " or ".join(kind(t()).split(" ", 1)[-1] for t in types)


def first_line(error: BaseException) -> str:
  """An exception's message cut to its first line (TensorFlow's and
  HDF5's run on for pages), or its type's name when it has none."""
  text = str(error).strip()
  return text.splitlines()[0] if text else type(error).__name__
