"""The preset registry: what a named checkpoint is, and the table of names.

`RemoteFile` and `Preset` check their fields when made, so a wrong entry in
the release table or in a test's `register_preset` fails at once rather than
mid-download. `PRESETS` and `ALIASES` start empty here; `bert.pretrained`
fills them with `bert.pretrained.releases` on import.
"""

import dataclasses
import re
import urllib.parse
from typing import Dict, List, Optional, Tuple

from bert.pretrained.cache import MANIFEST, OWNER

_SHA256 = re.compile(r"[0-9a-f]{64}")
# Names become cache folder and file names: no separators, no leading dot.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclasses.dataclass(frozen=True)
class RemoteFile:
  """One file to download.

  Attributes:
    url: where it is.
    sha256: lowercase hex digest stated by the publisher; None if none is
      stated (then it is recorded at first download and checked afterwards).
    size: size in bytes where the publisher states it, else None.
    name: local file name; default the last component of the URL path.
    optional: a 404 skips the file instead of failing.
  """
  url: str
  sha256: Optional[str] = None
  size: Optional[int] = None
  name: Optional[str] = None
  optional: bool = False

  def __post_init__(self):
    if urllib.parse.urlparse(self.url).scheme not in ("http", "https", "file"):
      raise ValueError(f"RemoteFile.url must be http(s) or file, got {self.url!r}")
    if self.sha256 is not None and not _SHA256.fullmatch(self.sha256):
      raise ValueError(f"RemoteFile.sha256 must be 64 lowercase hex digits, got "
                       f"{self.sha256!r}")
    if self.size is not None and (isinstance(self.size, bool) or
                                  not isinstance(self.size, int) or self.size < 0):
      raise ValueError(f"RemoteFile.size must be a byte count, got {self.size!r}")
    if not _NAME.fullmatch(self.filename):
      raise ValueError(f"RemoteFile {self.url}: bad local name {self.filename!r}")

  @property
  def filename(self) -> str:
    if self.name is not None:
      return self.name
    return urllib.parse.unquote(
        urllib.parse.urlparse(self.url).path.rstrip("/").rsplit("/", 1)[-1])


@dataclasses.dataclass(frozen=True)
class Preset:
  """Where a named checkpoint comes from: exactly one of `files` (fetched one
  by one into the folder), `archive` (a .zip/.tar(.gz) extracted to its release
  folder) or `package` (an installed Python package with `get_model_path()`).

  Attributes:
    name: the preset name.
    description: one line for humans.
    files / archive / package: the source, see above.
    lower_case: the tokenizer casing the publisher states; written to the
      folder's bert_checkpoint.json, where `bert.checkpoints.load` reads it.
    shape: the `BertConfig.preset` name of the same shape, if any.
    source: provenance and license note.
  """
  name: str
  description: str
  files: Tuple[RemoteFile, ...] = ()
  archive: Optional[RemoteFile] = None
  package: Optional[str] = None
  lower_case: Optional[bool] = None
  shape: Optional[str] = None
  source: str = ""

  def __post_init__(self):
    if not _NAME.fullmatch(self.name):
      raise ValueError(f"Preset name {self.name!r}: letters, digits, _ . - only")
    object.__setattr__(self, "files", tuple(self.files))
    if sum(map(bool, (self.files, self.archive, self.package))) != 1:
      raise ValueError(f"Preset {self.name}: give exactly one of files, archive "
                       "or package")
    names = [f.filename for f in self.files]
    if len(set(names)) != len(names):
      raise ValueError(f"Preset {self.name}: two files named alike in {names}")
    # The cache writes these into the same folder as the files.
    if set(names) & {MANIFEST, OWNER}:
      raise ValueError(f"Preset {self.name}: reserved file name in {names}")

  @property
  def remote_files(self) -> Tuple[RemoteFile, ...]:
    return (self.archive,) if self.archive else self.files


# Looked up through this module's globals at call time, so a test that swaps
# them (monkeypatch.setattr on bert.pretrained.presets) changes every lookup.
PRESETS: Dict[str, Preset] = {}
ALIASES: Dict[str, str] = {}


def register_preset(preset: Preset, *, replace: bool = False) -> Preset:
  """Adds `preset` to PRESETS (e.g. to point a name at a mirror or a test
  server); an existing name is replaced only with `replace=True`."""
  if not isinstance(preset, Preset):
    raise TypeError(f"register_preset expects a Preset, got {type(preset).__name__}")
  if not replace and (preset.name in PRESETS or preset.name in ALIASES):
    raise ValueError(f"preset {preset.name!r} exists; pass replace=True")
  ALIASES.pop(preset.name, None)
  PRESETS[preset.name] = preset
  return preset


def preset_names() -> List[str]:
  """All preset names and aliases, sorted."""
  return sorted(set(PRESETS) | set(ALIASES))


def lookup(name) -> Optional[Preset]:
  """The preset of `name` (aliases followed), or None."""
  return PRESETS.get(ALIASES.get(name, name))


def get_preset(name: str) -> Preset:
  """The preset of `name` (aliases followed); ValueError if unknown."""
  preset = lookup(name)
  if preset is None:
    raise ValueError(f"unknown preset {name!r}; known: {short_list()}")
  return preset


def is_preset(name) -> bool:
  """Whether `name` is a preset (or an alias of one)."""
  return isinstance(name, str) and lookup(name) is not None


def short_list() -> str:
  """The preset names for an error message, the compact grid folded in one."""
  grid = re.compile(r"bert_L\d+_H\d+")
  names = [n for n in preset_names() if not grid.fullmatch(n)]
  if any(grid.fullmatch(n) for n in PRESETS):
    names.append("bert_L{2,4,6,8,10,12}_H{128,256,512,768}")
  return ", ".join(names)
