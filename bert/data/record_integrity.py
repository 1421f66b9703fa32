"""TFRecord files checked against what their writer recorded, and damage
found while reading named by file and record.

Writers record each file's `fingerprint` in their manifest:

  {"records": 40, "bytes": 5120, "sha256": "...", "ends_sha256": "...",
   "ends_bytes": 65536}

`ends_sha256` hashes the first and last `ends_bytes` of the file. Readers
call `check_files` before training, and what it reads depends on the size
of the whole set of files:

- always (constant cost per file, whatever its size): the size and the
  ends' hash. A truncated file, one appended to and one replaced by another
  file (an eval shard copied over a train shard) differ here.
- when the files add up to at most `FULL_CHECK_BYTES` (1 GiB; fine-tuning
  records of the GLUE and SQuAD tasks are a few hundred MB at most): the
  whole file's SHA-256 and a CRC pass that counts its records (a full read
  of each file). A flipped byte anywhere, and a record count that differs from
  the manifest's, are found here, before training.
- beyond it (pre-training corpora of many multi-GB shards, where a full pass
  would read tens of GB before the first step): only the above. TFRecord
  keeps a CRC of every record, which tf.data checks on every read, so a
  flipped byte in the middle of a big shard still stops the run, with a
  `tf.errors.DataLossError` that names no file: `damaged_record_error`
  turns it into a DataError naming the file and the record.

Files without a fingerprint (manifests written before fingerprints, shards
without a manifest) get the CRC pass when within the budget, and their record
counts are compared with what the manifest does say; beyond it they are read
as they are.

Every problem is a one-line DataError naming the file and what differs.
"""

import hashlib
import os
import re
import time
from typing import Dict, Mapping, Optional, Sequence, Union

from bert.data.errors import DataError

FULL_CHECK_BYTES = 1 << 30
ENDS_BYTES = 1 << 16
FIELDS = ("records", "bytes", "sha256", "ends_sha256", "ends_bytes")

# What was verified in this process (file identity and entry -> record
# count): a reader that lists its files again (each pipeline built, a NaN's
# batch described) does not read them again.
_verified: Dict[tuple, Optional[int]] = {}


def file_sha256(path: str) -> str:
  """The SHA-256 of a file's bytes, read in blocks."""
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def _ends_sha256(path: str, ends_bytes: int) -> str:
  size = os.path.getsize(path)
  h = hashlib.sha256()
  with open(path, "rb") as f:
    h.update(f.read(min(size, ends_bytes)))
    f.seek(max(0, size - ends_bytes))
    h.update(f.read())
  return h.hexdigest()


def record_iterator(path: str):
  """TensorFlow's record reader (CRC checks on every record), without its
  deprecation warning: tf.data cannot say which record failed."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top
    with deprecation.silence():
      return tf.compat.v1.io.tf_record_iterator(path)
  except ImportError:
    return tf.compat.v1.io.tf_record_iterator(path)


def scan(path: str) -> int:
  """Reads every record of `path` with its CRC checks; returns the record
  count. Damage is a DataError naming the file, the record and its byte
  offset; an unreadable file is a FileNotFoundError/PermissionError/
  DataError naming it."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  count = 0
  try:
    for _ in record_iterator(path):
      count += 1
  except tf.errors.DataLossError as e:
    raise DataError(_damage(path, count, e.message)) from None
  except tf.errors.NotFoundError:
    raise FileNotFoundError(f"{path}: no such file") from None
  except tf.errors.PermissionDeniedError:
    raise PermissionError(f"{path}: permission denied") from None
  except tf.errors.OpError as e:
    raise DataError(f"{path}: unreadable as TFRecords "
                    f"({first_line(e.message)})") from None
  return count


def first_line(message: str) -> str:
  """TensorFlow's message without its op wrappers, first line."""
  message = re.sub(r"\{\{[^}]*\}\}|\[Op:[^\]]*\].*", "", str(message))
  lines = [l.strip() for l in message.splitlines() if l.strip()]
  return lines[0] if lines else "no message"


def _damage(path: str, index: int, message: str) -> str:
  at = re.search(r"record at (\d+)", message or "")
  where = f"record {index}" + (f" (byte {at.group(1)})" if at else "")
  if "truncated" in (message or ""):
    return f"{path}: truncated: the file ends inside {where}"
  return (f"{path}: {where} is damaged (its checksum does not match: "
          "a changed byte)")


def fingerprint(path: str, records: Optional[int] = None,
                ends_bytes: Optional[int] = None) -> dict:
  """What a writer records of a file it wrote (see the module doc);
  `records` is counted (a CRC pass) unless given."""
  ends_bytes = ends_bytes or ENDS_BYTES
  return dict(records=scan(path) if records is None else int(records),
              bytes=os.path.getsize(path), sha256=file_sha256(path),
              ends_sha256=_ends_sha256(path, ends_bytes),
              ends_bytes=ends_bytes)


def check_entry(manifest: str, name: str, entry) -> dict:
  """`entry` (a manifest's fingerprint of file `name`) checked for form: a
  dict of the known fields with values of their types; a DataError naming
  the manifest otherwise."""
  where = f"{manifest}: the entry of {name}"
  if not isinstance(entry, dict):
    raise DataError(f"{where} is {type(entry).__name__}, not an object")
  for key, value in entry.items():
    if key not in FIELDS:
      raise DataError(f"{where} has an unknown field {key!r}")
    if key in ("sha256", "ends_sha256"):
      if not (isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value)):
        raise DataError(f"{where}: {key} {value!r} is not a SHA-256 digest")
    elif (not isinstance(value, int) or isinstance(value, bool) or value < 0
          or (key == "ends_bytes" and value == 0)):
      raise DataError(f"{where}: {key} {value!r} is not a count")
  if "ends_sha256" in entry and "ends_bytes" not in entry:
    raise DataError(f"{where}: ends_sha256 without ends_bytes")
  return entry


def check_files(files: Mapping[str, Optional[dict]], manifest: Optional[str],
                full_check_bytes: Optional[int] = None
                ) -> Dict[str, Optional[int]]:
  """Checks each file of `files` ({path: its manifest entry, or None}) against
  its entry, as the module doc says; returns {path: record count} for the
  files counted (None for those that were not: beyond the budget, or no
  count was needed). `manifest` names where the entries came from.

  Raises:
    FileNotFoundError: a file is missing.
    DataError: naming the file and what differs from `manifest`.
  """
  budget = FULL_CHECK_BYTES if full_check_bytes is None else full_check_bytes
  sizes = {}
  for path in files:
    if not os.path.isfile(path):
      listed = f": listed in {manifest} but" if manifest else ""
      raise FileNotFoundError(f"{path}{listed} missing (or not a file)")
    sizes[path] = os.path.getsize(path)
  full = sum(sizes.values()) <= budget
  counts = {}
  for path, entry in files.items():
    counts[path] = _check_file(path, entry or {}, manifest, full, files)
  return counts


def _identity(path: str, entry: dict, full: bool):
  """What a verification is remembered by; None for a file changed in the
  last seconds (file times are coarse: a change within the same tick of the
  clock would leave them as they were)."""
  st = os.stat(path)
  if time.time() - max(st.st_mtime, st.st_ctime) < 5:
    return None
  return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size,
          st.st_mtime_ns, st.st_ctime_ns, tuple(sorted(entry.items())), full)


def _check_file(path: str, entry: dict, manifest: Optional[str], full: bool,
                others: Mapping[str, Optional[dict]]) -> Optional[int]:
  key = _identity(path, entry, full)
  if key is not None and key in _verified:
    return _verified[key]
  size = os.path.getsize(path)
  listed = entry.get("bytes")
  if listed is not None and size != listed:
    how = ("truncated: " if size < listed else "")
    raise DataError(f"{path}: {how}{size:,} bytes, {manifest} lists "
                    f"{listed:,}{_same_as(path, others)}")
  if "ends_sha256" in entry and (
      _ends_sha256(path, entry["ends_bytes"]) != entry["ends_sha256"]):
    if full:
      scan(path)   # names the damaged record, if there is one
    raise DataError(f"{path}: its first or last {entry['ends_bytes']:,} bytes "
                    f"differ from {manifest}'s fingerprint (a changed or "
                    f"replaced file){_same_as(path, others)}")
  count = None
  if full:
    if "sha256" in entry and file_sha256(path) != entry["sha256"]:
      scan(path)   # names the damaged record, if there is one
      raise DataError(f"{path}: content differs from {manifest}'s SHA-256 "
                      f"(a changed or replaced file){_same_as(path, others)}")
    count = scan(path)
    if "records" in entry and count != entry["records"]:
      raise DataError(f"{path}: holds {count:,} records, {manifest} lists "
                      f"{entry['records']:,}")
  if key is not None:
    _verified[key] = count
  return count


def _same_as(path: str, others: Mapping[str, Optional[dict]]) -> str:
  """", it holds the bytes of X" when `path` matches another file's entry
  (say, an eval shard copied over a train shard)."""
  size = os.path.getsize(path)
  for other, entry in others.items():
    if other == path or not entry or entry.get("bytes") != size:
      continue
    if ("ends_sha256" in entry and _ends_sha256(path, entry["ends_bytes"])
        == entry["ends_sha256"]):
      return f"; it holds the bytes of {os.path.basename(other)}"
  return ""


def find_damage(files: Sequence[str],
                offset: Optional[int] = None) -> Optional[DataError]:
  """Reads `files` with their CRC checks (those longer than `offset`, where
  tf.data said the damage is, first); the DataError naming the first
  damaged file and record, or None if none is damaged."""
  def likely(path):
    try:
      return offset is not None and os.path.getsize(path) > offset
    except OSError:
      return True
  for path in sorted(files, key=lambda p: not likely(p)):
    try:
      scan(path)
    except (DataError, OSError) as e:
      return e if isinstance(e, DataError) else DataError(str(e))
  return None


def damaged_record_error(files: Sequence[str],
                         error: Union[BaseException, str, None] = None
                         ) -> DataError:
  """The one-line DataError to raise when reading `files` (the pipeline's
  TFRecord files) raised `error`, a `tf.errors.DataLossError` (which names no
  file) or its message: the damaged file and record, found by reading the
  files again with their CRC checks (the one `error` points at first). If no
  file is damaged on this second reading, the error names the files and
  TensorFlow's message.

  Raise it outside the `except` block that caught `error` (keep only its
  message): TensorFlow's error, through its traceback, keeps the failed
  iterator and its threads alive as long as it is referenced."""
  message = getattr(error, "message", None) or str(error or "")
  at = re.search(r"record at (\d+)", message)
  found = find_damage(list(files), int(at.group(1)) if at else None)
  if found is not None:
    return found
  shown = ", ".join(list(files)[:3]) + (
      f" and {len(files) - 3} more" if len(files) > 3 else "")
  return DataError(f"reading {shown}: {first_line(message)} (no file is "
                   "damaged on a second reading: did a file change?)")
