"""The `manifest.json` of a pre-training data run (`bert-create-pretraining-
data --output_dir`), written last, and its check by readers.

  {"files": ["pretrain-00000-of-00002.tfrecord", ...],
   "instances": {"pretrain-00000-of-00002.tfrecord": 1234, ...},
   "shards": {"pretrain-00000-of-00002.tfrecord": <fingerprint>, ...},
   "config": {...}}

`shards` holds each file's fingerprint (`bert.data.record_integrity`); a
manifest written before it still loads, its files' record counts compared
with `instances` when a CRC pass is within the full-check budget.
"""

import json
import os
from typing import Optional, Sequence

from bert.data import record_integrity
from bert.data.errors import DataError

MANIFEST = "manifest.json"


def write_manifest(output_dir, names, summaries, config) -> None:
  """`summaries`: the shards' `ShardSummary`s, with their `file`
  fingerprints."""
  manifest = dict(files=names,
                  instances={n: s.instances for n, s in zip(names, summaries)},
                  shards={n: s.file for n, s in zip(names, summaries)},
                  config=config.as_flags())
  path = os.path.join(output_dir, MANIFEST)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=1)
  os.replace(path + ".tmp", path)


def check_manifests(files: Sequence[str],
                    full_check_bytes: Optional[int] = None) -> None:
  """Checks TFRecord `files` before they are read: a file beside a
  `manifest.json` that does not list it (data of another run in the same
  folder) is refused, a listed one is checked against its fingerprint, and
  all of them get a CRC pass when they add up to at most the full-check
  budget (see `bert.data.record_integrity`). Every problem is a one-line
  DataError naming the file (or the manifest) and what differs."""
  by_folder = {}
  for path in files:
    by_folder.setdefault(os.path.dirname(path), []).append(path)
  entries = {}
  for folder, paths in by_folder.items():
    manifest = os.path.join(folder, MANIFEST)
    if not os.path.exists(manifest):
      # Not made by bert-create-pretraining-data (or unfinished).
      entries.update({p: None for p in paths})
      continue
    listed = _read(manifest)
    stray = [p for p in paths if os.path.basename(p) not in listed]
    if stray:
      raise DataError(f"{stray[0]}: not listed in {manifest} (a file of "
                      "another run?); remove it, or recreate the data with "
                      "--overwrite")
    entries.update({p: listed[os.path.basename(p)] for p in paths})
  for folder, paths in by_folder.items():
    manifest = os.path.join(folder, MANIFEST)
    record_integrity.check_files(
        {p: entries[p] for p in paths},
        manifest if os.path.exists(manifest) else None,
        _budget(files, full_check_bytes))


def _budget(files, full_check_bytes):
  """The budget of each folder's check, so that the whole set of files is
  fully checked only if it fits in the budget."""
  budget = (record_integrity.FULL_CHECK_BYTES if full_check_bytes is None
            else full_check_bytes)
  total = sum(os.path.getsize(p) for p in files if os.path.isfile(p))
  return float("inf") if total <= budget else -1


def _read(manifest: str) -> dict:
  """{file name: its entry (a fingerprint, or {"records": n} from an older
  manifest's `instances`, or {})} of `manifest`, checked for form."""
  try:
    with open(manifest, encoding="utf-8") as f:
      m = json.load(f)
  except (OSError, ValueError) as e:
    raise DataError(f"{manifest}: unreadable ({type(e).__name__}: {e})"
                    ) from None
  names = m.get("files") if isinstance(m, dict) else None
  if not isinstance(names, list) or not all(
      isinstance(n, str) and n and "/" not in n for n in names):
    raise DataError(f"{manifest}: 'files' is not a list of file names")
  instances = m.get("instances", {})
  shards = m.get("shards")
  if not (isinstance(instances, dict) and set(instances) <= set(names)) or not (
      shards is None or isinstance(shards, dict) and set(shards) == set(names)):
    raise DataError(f"{manifest}: 'instances' or 'shards' is not an object "
                    "over its files")
  out = {}
  for name in names:
    if shards is not None:
      entry = dict(record_integrity.check_entry(manifest, name, shards[name]))
    else:      # written before fingerprints: the count is all there is
      entry = {"records": instances[name]} if name in instances else {}
      record_integrity.check_entry(manifest, name, entry)
    if name in instances and instances[name] != entry.get("records"):
      raise DataError(f"{manifest}: {name} has {instances[name]!r} instances "
                      f"but its entry lists {entry.get('records')!r} records")
    out[name] = entry
  return out
