"""HTTP download of one file, checked against its checksum before it is kept.

The body streams to `<dest>.part`, hashed on the way; only a complete body
whose size and sha256 match what is expected is renamed to `<dest>`, so a cut
connection or a changed file never leaves something that looks downloaded.
Every failure is a one-line `DownloadError` or `ChecksumError` naming the URL.
"""

import hashlib
import http.client
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Optional

from bert.pretrained.cache import CHUNK, KNOWN_CHECKSUMS
from bert.pretrained.errors import ChecksumError, DownloadError
from bert.pretrained.presets import RemoteFile

# Seconds a connection may wait for the server (connect, or each read) before
# it fails: a stalled download errors out instead of hanging the caller. Read
# at every download, so setting `bert.pretrained.download.TIMEOUT` takes effect.
TIMEOUT = 60.0


def _offline(url, reason) -> str:
  reason = " ".join(str(reason).split()) or "unknown error"
  return (f"cannot download {url} ({reason}); if this machine is offline, fetch "
          "it elsewhere and pass the checkpoint folder instead: "
          "from_pretrained(\"/path/to/folder\") reads any format "
          "bert.checkpoints.load reads")


def download(rf: RemoteFile, dest: str, known, progress, label) -> Optional[str]:
  """Downloads `rf` to `dest` via `dest`.part; the checksum is verified before
  the rename. Returns the sha256, or None for an optional file that is absent."""
  part = dest + ".part"
  expected = rf.sha256 or known.get(rf.url)
  h = hashlib.sha256()
  n = 0
  try:
    request = urllib.request.Request(rf.url, headers={"User-Agent": "bert-tf2"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
      length = response.headers.get("Content-Length")
      total = int(length) if length and length.strip().isdigit() else rf.size
      bar = _Progress(label, total, progress)
      with open(part, "wb") as f:
        while True:
          chunk = response.read(CHUNK)
          if not chunk:
            break
          f.write(chunk)
          h.update(chunk)
          n += len(chunk)
          bar.update(n)
      bar.close(n)
      if length and length.strip().isdigit() and n != int(length):
        raise DownloadError(_offline(rf.url, f"connection closed after {n} of "
                                     f"{int(length)} bytes"))
  except urllib.error.HTTPError as e:
    _remove(part)
    if e.code == 404 and rf.optional:
      return None
    raise DownloadError(_offline(rf.url, f"HTTP {e.code} {e.reason}")) from e
  except DownloadError:
    _remove(part)
    raise
  except http.client.IncompleteRead as e:
    _remove(part)
    raise DownloadError(_offline(
        rf.url, f"connection closed after {n + len(e.partial)} bytes, "
        f"{e.expected} more expected")) from e
  except (urllib.error.URLError, http.client.HTTPException, OSError,
          ValueError) as e:
    _remove(part)
    reason = e.reason if isinstance(e, urllib.error.URLError) else e
    raise DownloadError(_offline(rf.url, f"{type(e).__name__}: {reason}")) from e
  got = h.hexdigest()
  if rf.size is not None and n != rf.size:
    _remove(part)
    raise ChecksumError(f"{rf.url}: expected {rf.size} bytes, got {n}; the "
                        "download was removed")
  if expected is not None and got != expected:
    _remove(part)
    whose = "stated by its publisher" if rf.sha256 else (
        f"recorded at its first download, in {KNOWN_CHECKSUMS} of the cache; "
        "if the publisher really changed the file, remove that entry")
    raise ChecksumError(f"{rf.url}: sha256 mismatch: expected {expected} "
                        f"({whose}), got {got}; the download was removed")
  os.replace(part, dest)
  return got


def _remove(path):
  try:
    os.remove(path)
  except FileNotFoundError:
    pass


class _Progress:
  """A one-line progress bar on stderr, redrawn at most 5 times a second."""

  def __init__(self, label, total, enabled):
    self.label, self.total, self.enabled = label, total, enabled
    self.start = self.last = time.monotonic()
    if enabled:
      size = f" ({total / 1e6:.1f} MB)" if total else ""
      self._write(f"Downloading {label}{size}\n")

  def _write(self, text):
    sys.stderr.write(text)
    sys.stderr.flush()

  def _line(self, n):
    rate = n / 1e6 / max(time.monotonic() - self.start, 1e-6)
    if self.total:
      done = int(30 * min(n, self.total) / self.total)
      return (f"\r  [{'=' * done}{' ' * (30 - done)}] "
              f"{100 * n / self.total:5.1f}% {n / 1e6:.1f}/{self.total / 1e6:.1f}"
              f" MB {rate:.1f} MB/s")
    return f"\r  {n / 1e6:.1f} MB {rate:.1f} MB/s"

  def update(self, n):
    now = time.monotonic()
    if self.enabled and now - self.last >= 0.2:
      self.last = now
      self._write(self._line(n))

  def close(self, n):
    if self.enabled:
      self._write(self._line(n) + "\n")
