"""Turning a folder or preset name into a local checkpoint folder.

A remote preset is downloaded into a temp folder beside its cache folder
(`.tmp-<name>-*`, with an owner file so a killed download can be recognised
and removed), checked (every file's checksum, then the caller's `check` of
the folder), given a manifest last and then renamed into place: the cache
folder is either absent or complete, never half-written, even when two
processes download the same preset at once.
"""

import importlib
import os
import shutil
import socket
import tempfile
import time
from typing import Callable, Dict, Optional

from bert.errors import UserError
from bert.pretrained import archives
from bert.pretrained import cache as cache_lib
from bert.pretrained import download
from bert.pretrained import presets
from bert.pretrained.errors import DownloadError

# The loader reads do_lower_case here (bert.checkpoints.loader.METADATA_FILE;
# not imported from there, because the loader imports this package).
METADATA_FILE = "bert_checkpoint.json"


def resolve(source, *, cache_dir: Optional[str] = None,
            progress: bool = True,
            check: Optional[Callable[[str], object]] = None) -> str:
  """The local checkpoint folder of `source`, downloading it if needed.

  Args:
    source: an existing folder (returned as is), or a preset name (see
      `preset_names()`).
    cache_dir: where downloads go; default `default_cache_dir()`.
    progress: show a progress bar on stderr while downloading.
    check: called with a downloaded folder before it enters the cache
      (`bert.checkpoints.load` passes its reader): a `UserError` it raises
      (say, a corrupt tokenizer file) becomes a `DownloadError` naming the
      file's URL, and nothing is cached.

  Returns:
    A folder that `bert.checkpoints.load` reads.

  Raises:
    ValueError: `source` is neither a folder nor a preset name.
    DownloadError, ChecksumError, UnsafeArchiveError: see the `bert.pretrained`
      docstring.
    ModuleNotFoundError: a package preset whose package is not installed.
  """
  source = os.fspath(source)
  if os.path.isdir(source):
    return source
  preset = presets.lookup(source)
  if preset is None:
    what = "is a file, not a checkpoint folder" if os.path.exists(source) else \
        "is neither a folder nor a known preset"
    raise ValueError(f"{source!r} {what}; pass a checkpoint folder in any format "
                     "bert.checkpoints.load reads, or a preset: "
                     f"{presets.short_list()}")
  if preset.package:
    return _package_folder(preset)
  cache = os.path.abspath(os.path.expanduser(
      cache_dir or cache_lib.default_cache_dir()))
  return _ensure(preset, cache, progress, check)


def _package_folder(preset: presets.Preset) -> str:
  pip_name = preset.package.replace("_", "-")
  try:
    module = importlib.import_module(preset.package)
  except ImportError as e:
    raise ModuleNotFoundError(
        f"preset {preset.name!r} is the installed {pip_name} package, which is "
        f"not installed: pip install {pip_name} (or use hf_{preset.name} to "
        "download it, or pass a folder)") from e
  folder = str(module.get_model_path())
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"preset {preset.name!r}: {pip_name} names "
                            f"{folder}, which is not a folder; reinstall it")
  return folder


def _ensure(preset: presets.Preset, cache: str, progress: bool,
            check=None) -> str:
  """The checkpoint folder of `preset` in `cache`, downloaded if not there."""
  final = os.path.join(cache, preset.name)
  os.makedirs(cache, exist_ok=True)
  if os.path.isdir(final):
    manifest = cache_lib.read_manifest(final)
    if manifest is not None and manifest.get("remote") == _remote_key(preset):
      cache_lib.verify(final, manifest, preset.name)
      return os.path.normpath(os.path.join(final, manifest["path"]))
    # Incomplete (no manifest: interrupted or tampered) or made from another
    # definition of this preset: never used, replaced below.
    shutil.rmtree(final)
  elif os.path.lexists(final):
    os.remove(final)
  cache_lib.remove_stale_temps(cache, preset.name)

  tmp = tempfile.mkdtemp(prefix=f".tmp-{preset.name}-", dir=cache)
  try:
    cache_lib.write_json(os.path.join(tmp, cache_lib.OWNER),
                         dict(pid=os.getpid(), host=socket.gethostname()))
    known = cache_lib.read_known(cache)
    if preset.archive:
      rel, first_seen = _fetch_archive(preset, tmp, known, progress)
    else:
      rel, first_seen = ".", _fetch_files(preset, tmp, known, progress)
    folder = os.path.join(tmp, rel)
    if preset.lower_case is not None and not os.path.exists(
        os.path.join(folder, METADATA_FILE)):
      cache_lib.write_json(os.path.join(folder, METADATA_FILE), dict(
          version=1, do_lower_case=preset.lower_case, preset=preset.name,
          source=[f.url for f in preset.remote_files]))
    if check is not None:
      _check(preset, os.path.normpath(folder), check)
    os.remove(os.path.join(tmp, cache_lib.OWNER))
    manifest = dict(preset=preset.name, version=1, path=rel,
                    remote=_remote_key(preset),
                    files=cache_lib.hash_tree(tmp), downloaded=time.time())
    # Last: from here on the folder counts as complete.
    cache_lib.write_json(os.path.join(tmp, cache_lib.MANIFEST), manifest)
    try:
      os.rename(tmp, final)
    except OSError:
      # Another process finished first: use its copy if it is complete.
      other = cache_lib.read_manifest(final) if os.path.isdir(final) else None
      if other is None:
        raise
      shutil.rmtree(tmp, ignore_errors=True)
      cache_lib.verify(final, other, preset.name)
      return os.path.normpath(os.path.join(final, other["path"]))
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  if first_seen:
    cache_lib.record_known(cache, first_seen)
  return os.path.normpath(os.path.join(final, rel))


def _check(preset, folder, check) -> None:
  """`check(folder)`; its UserError as a DownloadError that names the remote
  files rather than the temp folder (which the caller removes)."""
  try:
    check(folder)
  except UserError as e:
    text = " ".join(str(e).split())
    for rf in preset.files:
      text = text.replace(os.path.join(folder, rf.filename), rf.url)
    # An archive's member: <archive url>!/<path in the release folder>.
    text = text.replace(folder, f"{preset.archive.url}!" if preset.archive
                        else preset.name)
    raise DownloadError(f"{preset.name}: the downloaded files do not read as "
                        f"a checkpoint: {text}; nothing was cached") from e


def _remote_key(preset):
  # A cached folder is reused only for the same URLs and stated checksums:
  # pointing a preset elsewhere downloads it again.
  return [[f.url, f.sha256] for f in preset.remote_files]


def _fetch_files(preset, tmp, known, progress) -> Dict[str, str]:
  """Downloads a file-by-file preset into `tmp`; returns first-seen sha256s."""
  first_seen = {}
  for rf in preset.files:
    digest = download.download(rf, os.path.join(tmp, rf.filename), known,
                               progress, f"{preset.name}/{rf.filename}")
    if digest is not None and rf.sha256 is None and rf.url not in known:
      first_seen[rf.url] = digest
  return first_seen


def _fetch_archive(preset, tmp, known, progress):
  """Downloads and unpacks an archive preset into `tmp`; returns the release
  folder's name and the first-seen sha256s."""
  rf = preset.archive
  archive = os.path.join(tmp, ".archive")
  digest = download.download(rf, archive, known, progress,
                             f"{preset.name}/{rf.filename}")
  release = archives.unpack(archive, tmp, rf.filename, rf.url)
  first_seen = {rf.url: digest} if rf.sha256 is None and rf.url not in known \
      else {}
  return release, first_seen
