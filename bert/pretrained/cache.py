"""Bookkeeping of the download cache: manifests, verification, stale temps.

The cache is `$BERT_CACHE_DIR`, default `~/.cache/bert_tf2`. A preset's folder
there counts as complete only with a manifest (`.complete.json`, written last)
that lists every file's size and sha256; every use re-hashes the files against
it. `known_checksums.json` holds the sha256 of files whose publisher states
none, recorded at their first download (trust on first use). Temp folders of
downloads whose process died are removed here; filling the cache is
`bert.pretrained.resolver`'s job.
"""

import hashlib
import json
import os
import shutil
import socket
import time
from typing import Dict, Optional

from bert.pretrained.errors import ChecksumError

CACHE_ENV = "BERT_CACHE_DIR"
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "bert_tf2")
MANIFEST = ".complete.json"
KNOWN_CHECKSUMS = "known_checksums.json"
OWNER = ".owner.json"                    # in a temp folder: who is filling it
CHUNK = 1 << 20                          # bytes read, hashed or copied at once
# A temp folder this old is abandoned even if its owner cannot be probed
# (another host, or no os.kill probe on this platform).
_STALE_SECONDS = 24 * 3600


def default_cache_dir() -> str:
  """$BERT_CACHE_DIR, else ~/.cache/bert_tf2 (absolute)."""
  return os.path.abspath(os.path.expanduser(
      os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR))


def read_manifest(folder) -> Optional[dict]:
  """The manifest of a preset folder, or None if it is missing or malformed."""
  try:
    with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
      manifest = json.load(f)
  except (OSError, ValueError):
    return None
  ok = (isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)
        and isinstance(manifest.get("path"), str))
  if ok:   # the checkpoint folder must lie inside the preset's folder
    inner = os.path.normpath(manifest["path"])
    ok = not os.path.isabs(inner) and inner.split(os.sep)[0] != ".."
  return manifest if ok else None


def verify(final, manifest, name) -> None:
  """Every file listed, none more, each with its recorded size and sha256."""
  listed = manifest["files"]
  present = set(_walk(final)) - {MANIFEST}
  fix = f"delete {final} to download {name} again"
  if present != set(listed):
    extra, missing = sorted(present - set(listed)), sorted(set(listed) - present)
    raise ChecksumError(f"{final}: cached files differ from its manifest "
                        f"(unexpected: {extra or 'none'}; missing: "
                        f"{missing or 'none'}); {fix}")
  for rel in sorted(listed):
    path = os.path.join(final, *rel.split("/"))
    want = listed[rel]
    size = os.path.getsize(path)
    if size != want.get("size"):
      raise ChecksumError(f"{path}: {size} bytes, but {want.get('size')} were "
                          f"recorded when it was downloaded; {fix}")
    got = _sha256_file(path)
    if got != want.get("sha256"):
      raise ChecksumError(f"{path}: sha256 {got} differs from {want.get('sha256')} "
                          f"recorded when it was downloaded (modified or "
                          f"corrupted); {fix}")


def _walk(root):
  for dirpath, _, filenames in os.walk(root):
    for fn in filenames:
      yield os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")


def hash_tree(root) -> Dict[str, dict]:
  """{relative path: {size, sha256}} of every file below `root`."""
  return {rel: dict(size=os.path.getsize(os.path.join(root, rel)),
                    sha256=_sha256_file(os.path.join(root, rel)))
          for rel in sorted(_walk(root))}


def _sha256_file(path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(CHUNK), b""):
      h.update(chunk)
  return h.hexdigest()


def write_json(path, obj) -> None:
  """Writes via a temp file and os.replace, so readers never see half."""
  tmp = f"{path}.{os.getpid()}.tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(obj, f, indent=2, sort_keys=True)
    f.write("\n")
  os.replace(tmp, path)


def remove_stale_temps(cache, name) -> None:
  """Removes temp folders of `name` left by a process that was killed."""
  prefix = f".tmp-{name}-"
  for entry in os.listdir(cache):
    path = os.path.join(cache, entry)
    if not entry.startswith(prefix) or not os.path.isdir(path):
      continue
    try:
      with open(os.path.join(path, OWNER), encoding="utf-8") as f:
        owner = json.load(f)
      dead = owner.get("host") == socket.gethostname() and not _alive(
          int(owner["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
      dead = False
    try:
      old = time.time() - os.path.getmtime(path) > _STALE_SECONDS
    except OSError:
      continue
    if dead or old:
      shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
  if os.name != "posix":
    return True     # no safe probe here; the age rule removes it
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def read_known(cache) -> Dict[str, str]:
  """{url: sha256} recorded at first downloads; ChecksumError if unreadable."""
  path = os.path.join(cache, KNOWN_CHECKSUMS)
  if not os.path.exists(path):
    return {}
  try:
    with open(path, encoding="utf-8") as f:
      known = json.load(f)
  except (OSError, ValueError) as e:
    raise ChecksumError(f"{path}: unreadable ({e}); fix or delete it (it holds "
                        "the sha256 of files first downloaded without a "
                        "published checksum)") from e
  if not isinstance(known, dict):
    raise ChecksumError(f"{path}: expected a JSON object of url: sha256")
  return known


def record_known(cache, first_seen: Dict[str, str]) -> None:
  """Adds first downloads' {url: sha256} to the cache's known checksums."""
  known = read_known(cache)
  known.update(first_seen)
  write_json(os.path.join(cache, KNOWN_CHECKSUMS), known)
