"""The manifest of a fine-tuning records folder (`bert.data.finetuning_records`),
read and checked against the folder's files before anything is trained.

A split's entry:

  {"rows": 40, "files": ["train-00000-of-00002.tfrecord", ...],
   "features": {"input_word_ids": {"dtype": "int32", "shape": [32]}, ...},
   "side": [...],
   "shards": {"train-00000-of-00002.tfrecord": <fingerprint>, ...}}

`shards` (see `bert.data.record_integrity`) is new: a manifest written
before it still loads; its files get a CRC pass that counts their records
(compared with `rows`) when the folder is within the full-check budget,
and are read as they are otherwise (damage is then found while reading).
"""

import json
import os
from typing import Mapping

import numpy as np

from bert.data import record_integrity
from bert.data.errors import DataError

MANIFEST = "manifest.json"
KIND = "bert-finetuning-records"
VERSION = 1
DTYPES = ("int32", "int64", "float32")


def parse_spec(features: Mapping[str, dict]) -> dict:
  """tf.io.parse_single_example's spec of a split's features (flattened)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {name: tf.io.FixedLenFeature(
      [int(np.prod(s["shape"], dtype=np.int64))],
      tf.float32 if s["dtype"] == "float32" else tf.int64)
          for name, s in features.items()}


def read_manifest(folder: str, full_check_bytes=None) -> dict:
  """The manifest of `folder`, checked for form and against the files it
  lists (sizes, fingerprints, record counts, the features of a first
  record); every problem is one line naming the manifest or the file."""
  path = os.path.join(folder, MANIFEST)
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"{folder}: no such folder (fine-tuning records)")
  if not os.path.exists(path):
    raise DataError(f"{path}: missing; {folder} is not a complete output of "
                    "bert-create-finetuning-data")
  try:
    with open(path, encoding="utf-8") as f:
      m = json.load(f)
  except (OSError, ValueError) as e:
    raise DataError(f"{path}: unreadable ({type(e).__name__}: {e})") from None
  _check_form(path, m)
  files = {}
  for name, s in m["splits"].items():
    shards = s.get("shards") or {}
    for f in s["files"]:
      if os.path.join(folder, f) in files:
        _fail(path, f"{f} is listed by two splits")
      files[os.path.join(folder, f)] = shards.get(f)
  counts = record_integrity.check_files(files, path, full_check_bytes)
  for name, s in m["splits"].items():
    held = [counts[os.path.join(folder, f)] for f in s["files"]]
    if None not in held and sum(held) != s["rows"]:
      raise DataError(f"{path}: split {name!r} lists rows={s['rows']:,}, its "
                      f"{len(held)} shard(s) hold {sum(held):,} records")
    _check_first_record(path, folder, name, s)
  return m


def _fail(path, what):
  raise DataError(f"{path}: {what}")


def _is_count(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_form(path: str, m) -> None:
  """Types and values of every field the reader uses."""
  if not isinstance(m, dict):
    _fail(path, f"a JSON {type(m).__name__}, not an object")
  if m.get("kind") != KIND:
    _fail(path, f"kind {m.get('kind')!r}, not fine-tuning records ({KIND!r})")
  if m.get("version") != VERSION:
    _fail(path, f"version {m.get('version')!r}; this library reads version "
          f"{VERSION}")
  for key, kind in (("task", str), ("vocab_file", str), ("vocab_sha256", str),
                    ("do_lower_case", bool), ("seq_length", int),
                    ("splits", dict)):
    if not isinstance(m.get(key), kind):
      _fail(path, f"field {key!r} is {m.get(key)!r}, not a {kind.__name__}")
  if not _is_count(m["seq_length"]) or not m["seq_length"] or not m["splits"]:
    _fail(path, f"seq_length {m['seq_length']!r} or splits "
          f"{list(m['splits'])} empty")
  for name, s in m["splits"].items():
    _check_split(path, name, s)


def _check_split(path: str, name: str, s) -> None:
  where = f"split {name!r}"
  if not isinstance(s, dict):
    _fail(path, f"{where} is {s!r}, not an object")
  if not _is_count(s.get("rows")):
    _fail(path, f"{where}: rows {s.get('rows')!r} is not a count")
  files = s.get("files")
  if (not isinstance(files, list) or not files
      or len(set(map(str, files))) != len(files)):
    _fail(path, f"{where}: files {files!r} is not a list of distinct names")
  for f in files:
    if (not isinstance(f, str) or f in ("", ".", "..") or "/" in f
        or "\\" in f or "\0" in f):
      _fail(path, f"{where}: file {f!r} is not a file name in its folder")
  features = s.get("features")
  if not isinstance(features, dict) or not features:
    _fail(path, f"{where}: no features")
  for key, spec in features.items():
    if (not isinstance(spec, dict) or spec.get("dtype") not in DTYPES
        or not isinstance(spec.get("shape"), list)
        or not all(map(_is_count, spec["shape"]))):
      _fail(path, f"{where}: feature {key!r} is {spec!r}, not a dtype among "
            f"{DTYPES} and a shape of counts")
  side = s.get("side", [])
  if not isinstance(side, list) or any(k not in features for k in side):
    _fail(path, f"{where}: side {side!r} is not a list of its features")
  shards = s.get("shards")
  if shards is None:
    return      # written before fingerprints: see the module doc
  if not isinstance(shards, dict) or set(shards) != set(files):
    _fail(path, f"{where}: shards {sorted(shards) if isinstance(shards, dict) else shards!r}"
          f" are not its files {files}")
  for f in files:
    record_integrity.check_entry(path, f, shards[f])
  held = [shards[f].get("records") for f in files]
  if None not in held and sum(held) != s["rows"]:
    _fail(path, f"{where} lists rows={s['rows']:,}, its shards' entries hold "
          f"{sum(held):,} records")


def _check_first_record(path: str, folder: str, name: str, s: dict) -> None:
  """The split's first record parses with its features: a manifest whose
  features were changed fails here, not as a parse error deep in tf.data."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  shard = os.path.join(folder, s["files"][0])
  if not s["rows"] or not os.path.getsize(shard):
    return
  try:
    for record in record_integrity.record_iterator(shard):
      tf.io.parse_single_example(record, parse_spec(s["features"]))
      break
  except tf.errors.DataLossError as e:
    raise record_integrity.damaged_record_error([shard], e) from None
  except (tf.errors.InvalidArgumentError, ValueError) as e:
    msg = record_integrity.first_line(getattr(e, "message", str(e)))
    raise DataError(f"{path}: the features of split {name!r} do not match "
                    f"the records of {shard} ({msg})") from None

