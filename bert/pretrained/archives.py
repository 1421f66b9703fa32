"""Unpacking a downloaded zip or tar into its release folder, safely.

An archive comes from the network, so every member is checked before any is
written: a path that would land outside the folder (absolute, `..`, a drive
letter), a link, a device or a name given twice refuses the whole archive with
`UnsafeArchiveError`, and an archive that cannot be read is a `DownloadError`.
"""

import os
import re
import shutil
import tarfile
import zipfile
from typing import List

from bert.pretrained.cache import CHUNK
from bert.pretrained.errors import DownloadError, UnsafeArchiveError


def unpack(archive: str, folder: str, filename: str, url: str) -> str:
  """Extracts `archive` (downloaded from `url` as `filename`) into a new
  subfolder of `folder` and removes it.

  Returns:
    The subfolder's name: the release folder the archive holds, or, for an
    archive of loose files, `filename` without its extension.
  """
  stage = os.path.join(folder, ".stage")
  os.mkdir(stage)
  _extract(archive, stage, url)
  os.remove(archive)
  entries = os.listdir(stage)
  if len(entries) == 1 and os.path.isdir(os.path.join(stage, entries[0])):
    release = entries[0]            # zip holds its release folder
    os.rename(os.path.join(stage, release), os.path.join(folder, release))
    os.rmdir(stage)
  else:                             # flat zip: name the folder after it
    release = _archive_stem(filename)
    os.rename(stage, os.path.join(folder, release))
  return release


def _archive_stem(filename):
  for ext in (".tar.gz", ".tgz", ".tar", ".zip"):
    if filename.lower().endswith(ext):
      return filename[:-len(ext)]
  return filename


def _member_parts(name: str, url: str) -> List[str]:
  """The path components of an archive member; refuses anything that could
  land outside the extraction folder."""
  bad = (not name or "\\" in name or "\x00" in name or name.startswith("/")
         or re.match(r"[A-Za-z]:", name))
  parts = [p for p in name.split("/") if p not in ("", ".")]
  if bad or ".." in parts:
    raise UnsafeArchiveError(f"{url}: archive member {name!r} would be written "
                             "outside its folder; refusing to extract it")
  return parts


def _target(root: str, parts: List[str], name: str, url: str) -> str:
  path = os.path.join(root, *parts)
  real_root = os.path.realpath(root)
  if os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:
    raise UnsafeArchiveError(f"{url}: archive member {name!r} resolves outside "
                             "its folder; refusing to extract it")
  return path


def _extract(archive: str, dest: str, url: str) -> None:
  if zipfile.is_zipfile(archive):
    _extract_zip(archive, dest, url)
    return
  try:
    is_tar = tarfile.is_tarfile(archive)
  except OSError:
    is_tar = False
  if not is_tar:
    raise DownloadError(f"{url}: the download is neither a zip nor a tar "
                        "archive (corrupt, or not the expected file); nothing "
                        "was kept")
  _extract_tar(archive, dest, url)


def _extract_members(members, dest, url):
  """Writes archive members (name, is_dir, is_regular, open_fn) under
  `dest`, after checking every one: no path outside `dest`, no links or
  special files, no name twice."""
  for name, is_dir, is_regular, _ in members:     # check all before writing any
    _member_parts(name, url)
    if not (is_dir or is_regular):
      raise UnsafeArchiveError(f"{url}: archive member {name!r} is a link or "
                               "special file; refusing to extract")
  try:
    for name, is_dir, _, open_fn in members:
      parts = _member_parts(name, url)
      if not parts or parts[0] == "__MACOSX":   # macOS Finder metadata
        continue
      path = _target(dest, parts, name, url)
      if is_dir:
        os.makedirs(path, exist_ok=True)
        continue
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open_fn() as src, open(path, "xb") as out:
        shutil.copyfileobj(src, out, CHUNK)
  except FileExistsError as e:
    raise UnsafeArchiveError(f"{url}: archive member {e.filename} appears twice; "
                             "refusing to extract") from e


def _extract_zip(archive, dest, url):
  try:
    with zipfile.ZipFile(archive) as zf:
      members = []
      for info in zf.infolist():
        # The Unix file type, where the zip records one (0: none recorded).
        mode = (info.external_attr >> 16) & 0o170000
        members.append((info.filename,
                        info.is_dir() and mode in (0, 0o040000),
                        not info.is_dir() and mode in (0, 0o100000),
                        lambda info=info: zf.open(info)))
      _extract_members(members, dest, url)
  except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
    raise DownloadError(f"{url}: corrupt zip archive ({e}); nothing was "
                        "kept") from e


def _extract_tar(archive, dest, url):
  try:
    with tarfile.open(archive) as tf:
      _extract_members([(m.name, m.isdir(), m.isreg(),
                         lambda m=m: tf.extractfile(m))
                        for m in tf.getmembers()], dest, url)
  except (tarfile.TarError, EOFError) as e:
    raise DownloadError(f"{url}: corrupt tar archive ({e}); nothing was "
                        "kept") from e
