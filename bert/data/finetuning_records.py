"""Fine-tuning data as TFRecords: a task's splits encoded once, then streamed.

A folder written by `bert-create-finetuning-data`:

  manifest.json                        what the task reads back and checks
  train-00000-of-00004.tfrecord ...    one file set per split

Rows (model input rows: a sentence, a pair, a SQuAD window) are dealt
round-robin: row i of a split of S shards is record i // S of shard i % S.
Reading a split's shards interleaved one record at a time gives its rows back
in order, and reading shards j, j + L, j + 2L, ... gives rows j, j + L, ...:
lane j of L (when L divides S), which is what one input pipeline of a
distributed run reads. So the streams of `bert.tasks.encoded_inputs` are
the same rows in the same order from TFRecords as from memory.

Each record is a tf.train.Example with every feature of the row flattened:
int64 lists for integer features, float lists for floating ones. The manifest
keeps each feature's dtype and row shape, the row and shard counts, each
shard's fingerprint (records, bytes, SHA-256: `bert.data.record_integrity`),
the vocab (path and SHA-256), casing and seq_length the rows were encoded
with, and the task that wrote them; it is written last (the whole folder is
written beside its place and renamed into it), so a folder with a manifest
is complete. Readers check the shards against it before anything is trained
(`bert.data.finetuning_manifest`).
"""

import json
import os
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np

from bert.data import record_integrity
from bert.data.errors import DataError
from bert.data.finetuning_manifest import (KIND, MANIFEST, VERSION,
                                           parse_spec, read_manifest)

Arrays = Dict[str, np.ndarray]


def shard_names(split: str, num_shards: int) -> List[str]:
  return [f"{split}-{i:05d}-of-{num_shards:05d}.tfrecord"
          for i in range(num_shards)]


def feature_spec(rows: Mapping[str, np.ndarray]) -> Dict[str, dict]:
  """{name: {"dtype", "shape"}} of a chunk of rows (shape without the row
  axis)."""
  spec = {}
  for name, value in rows.items():
    value = np.asarray(value)
    if value.dtype.kind in "iub":
      dtype = "int32" if value.dtype.kind != "i" or value.dtype.itemsize <= 4 \
          else "int64"
    elif value.dtype.kind == "f":
      dtype = "float32"
    else:
      raise ValueError(f"feature {name!r}: dtype {value.dtype} cannot be "
                       "written to TFRecords (integers and floats only)")
    spec[name] = dict(dtype=dtype, shape=list(value.shape[1:]))
  return spec


def _example(rows: Mapping[str, np.ndarray], i: int, spec) -> bytes:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  feature = {}
  for name, s in spec.items():
    flat = np.asarray(rows[name][i]).reshape(-1)
    if s["dtype"] == "float32":
      feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=flat))
    else:
      feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=flat))
  # Map entries sorted: the same bytes whoever writes the row (one process,
  # or `merge_parts` re-serializing the parts of several), so the shards'
  # fingerprints are too.
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString(deterministic=True)


def write_part(path: str, chunk: Arrays) -> dict:
  """Writes the rows of one chunk, in order, to one file (a part that
  `merge_parts` deals into shards); returns its row count and spec."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = feature_spec(chunk)
  n = len(next(iter(chunk.values())))
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(n):
      writer.write(_example(chunk, i, spec))
  return dict(rows=n, features=spec)


def merge_parts(folder: str, split: str, parts: Sequence[str], specs: Sequence[dict],
                num_shards: int, side: Sequence[str] = (),
                row_index: Sequence[str] = ()) -> dict:
  """Deals the records of `parts` (in order) round-robin into the split's
  shards, as `write_split` would have written the same rows, and deletes
  the parts. Features named in `row_index` are set to each row's index in
  the split (parts were encoded without knowing their offset)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not parts:
    raise DataError(f"{split}: no rows to write")
  spec = specs[0]
  for path, other in zip(parts, specs):
    if other != spec:
      raise ValueError(f"{split}: {path} has features {other}, the first "
                       f"part {spec}")
  names = shard_names(split, num_shards)
  writers = [tf.io.TFRecordWriter(os.path.join(folder, n)) for n in names]
  rows = 0
  try:
    for path in parts:
      for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        if row_index:
          example = tf.train.Example.FromString(raw)
          for name in row_index:
            values = example.features.feature[name].int64_list.value
            del values[:]
            values.append(rows)
          raw = example.SerializeToString(deterministic=True)
        writers[rows % num_shards].write(raw)
        rows += 1
      os.remove(path)
  finally:
    for w in writers:
      w.close()
  return dict(rows=rows, files=names, features=spec, side=list(side),
              shards=_fingerprints(folder, names))


def write_split(folder: str, split: str, chunks: Iterable[Arrays],
                num_shards: int, side: Sequence[str] = ()) -> dict:
  """Writes the rows of `chunks` (dicts of arrays, one row per index of the
  first axis, in row order) dealt round-robin into `num_shards` files of
  `folder`; returns the split's manifest entry. `side` names features kept
  for post-processing (read with `read_arrays`), not streamed to the model."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  names = shard_names(split, num_shards)
  writers = [tf.io.TFRecordWriter(os.path.join(folder, n)) for n in names]
  spec, rows = None, 0
  try:
    for chunk in chunks:
      n = len(next(iter(chunk.values())))
      if spec is None:
        spec = feature_spec(chunk)
      elif feature_spec(chunk) != spec:
        raise ValueError(f"{split}: rows {rows}-{rows + n - 1} have features "
                         f"{feature_spec(chunk)}, earlier rows {spec}")
      for i in range(n):
        writers[(rows + i) % num_shards].write(_example(chunk, i, spec))
      rows += n
  finally:
    for w in writers:
      w.close()
  if spec is None:
    raise DataError(f"{split}: no rows to write")
  missing = [k for k in side if k not in spec]
  if missing:
    raise ValueError(f"{split}: side features {missing} are not among the "
                     f"rows' features {list(spec)}")
  return dict(rows=rows, files=names, features=spec, side=list(side),
              shards=_fingerprints(folder, names))


def _fingerprints(folder: str, names: Sequence[str]) -> Dict[str, dict]:
  return {n: record_integrity.fingerprint(os.path.join(folder, n))
          for n in names}


def write_manifest(folder: str, splits: Mapping[str, dict], *, task: str,
                   vocab_file: str, lower_case: bool, seq_length: int,
                   extra: Optional[dict] = None) -> None:
  # The file's key is do_lower_case, as in the checkpoint files' metadata.
  manifest = dict(kind=KIND, version=VERSION, task=task,
                  vocab_file=os.path.abspath(vocab_file),
                  vocab_sha256=record_integrity.file_sha256(vocab_file),
                  do_lower_case=bool(lower_case), seq_length=int(seq_length),
                  splits=dict(splits), **(extra or {}))
  path = os.path.join(folder, MANIFEST)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=1)
  os.replace(path + ".tmp", path)


def is_records_folder(path: str) -> bool:
  """Whether `path` holds a manifest of this kind (what may be replaced)."""
  try:
    with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
      return json.load(f).get("kind") == KIND
  except (OSError, ValueError, AttributeError):
    return False


class FinetuningRecords:
  """A folder of fine-tuning records: its manifest, checked, and the streams
  over its splits."""

  def __init__(self, folder: str, full_check_bytes: Optional[int] = None):
    """Reads the manifest of `folder` and checks the shards against it
    (`bert.data.finetuning_manifest.read_manifest`; `full_check_bytes`: the
    budget of the full check, `bert.data.record_integrity`)."""
    self.folder = folder
    m = read_manifest(folder, full_check_bytes)
    self.task, self.seq_length = m["task"], int(m["seq_length"])
    self.vocab_file, self.vocab_sha256 = m["vocab_file"], m["vocab_sha256"]
    self.lower_case = bool(m["do_lower_case"])
    self.manifest = m
    self._path = os.path.join(folder, MANIFEST)

  @property
  def splits(self) -> Sequence[str]:
    return tuple(self.manifest["splits"])

  def _split(self, split: str) -> dict:
    if split not in self.manifest["splits"]:
      raise DataError(f"{self._path}: no {split!r} split (it has "
                      f"{', '.join(self.splits)}); write it with "
                      f"bert-create-finetuning-data --splits=...,{split}")
    return self.manifest["splits"][split]

  def num_rows(self, split: str) -> int:
    return self._split(split)["rows"]

  def feature_names(self, split: str) -> List[str]:
    """The features streamed to the model (not the side features)."""
    s = self._split(split)
    return [k for k in s["features"] if k not in s.get("side", ())]

  def check(self, owner: str, task: str, vocab_file: str, lower_case: bool,
            seq_length: int) -> None:
    """Refuses records encoded otherwise than `owner` would encode them."""
    where = self._path
    if task != self.task:
      raise DataError(f"{where}: written by task {self.task}, read by {task} "
                      f"({owner})")
    if record_integrity.file_sha256(vocab_file) != self.vocab_sha256:
      raise DataError(f"{where}: encoded with the vocab {self.vocab_file}, "
                      f"which differs from {owner}'s {vocab_file}")
    if bool(lower_case) != self.lower_case:
      raise DataError(f"{where}: encoded with lower_case="
                      f"{self.lower_case}, {owner} has {lower_case}")
    if int(seq_length) != self.seq_length:
      raise DataError(f"{where}: encoded at seq_length={self.seq_length}, "
                      f"{owner} has FinetuningInputs.seq_length={seq_length}")

  def _parser(self, split: str, keys: Sequence[str]):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    spec = {k: self._split(split)["features"][k] for k in keys}
    flat = parse_spec(spec)

    def parse(record):
      row = tf.io.parse_single_example(record, flat)
      out = {}
      for name, s in spec.items():
        value = tf.reshape(row[name], s["shape"])
        out[name] = (value if s["dtype"] in ("float32", "int64")
                     else tf.cast(value, tf.int32))
      return out

    return parse

  def lane(self, split: str, lane: int = 0, lanes: int = 1,
           keys: Optional[Sequence[str]] = None):
    """Rows lane, lane + lanes, ... of `split` in row order, as a dataset of
    row dicts (features `keys`, default: the streamed ones) with their
    `example_row` (int32)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    s = self._split(split)
    keys = self.feature_names(split) if keys is None else list(keys)
    unknown = [k for k in keys if k not in s["features"]]
    if unknown:
      raise DataError(f"{self._path}: {split} has no features {unknown}")
    files = s["files"]
    if len(files) % lanes:
      raise DataError(f"{self._path}: {split} has {len(files)} shard(s), which "
                      f"{lanes} input lanes cannot share evenly; write it with "
                      f"--num_shards a multiple of {lanes}")
    mine = [os.path.join(self.folder, f) for f in files[lane::lanes]]
    # One record from each file in turn: rows in order (see the module doc).
    ds = tf.data.TFRecordDataset(mine, num_parallel_reads=len(mine))
    ds = ds.map(self._parser(split, keys), num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True)
    rows = tf.data.Dataset.range(lane, s["rows"], lanes).map(
        lambda i: tf.cast(i, tf.int32))
    return tf.data.Dataset.zip((ds, rows)).map(
        lambda row, i: dict(row, example_row=i))

  def read_arrays(self, split: str, keys: Optional[Sequence[str]] = None,
                  batch_size: int = 1024) -> Arrays:
    """Features `keys` (default: all) of every row of `split`, in row order,
    as NumPy arrays (what post-processing needs in memory)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    keys = list(keys) if keys is not None else self.feature_names(split)
    parts = {k: [] for k in keys}
    try:
      for batch in self.lane(split, keys=keys).batch(batch_size):
        for k in keys:
          parts[k].append(batch[k].numpy())
    except tf.errors.DataLossError as e:
      damage = e.message
    else:
      return {k: np.concatenate(v) for k, v in parts.items()}
    # Raised outside the except block: TensorFlow's error, through its
    # traceback, would keep the failed iterator and its threads alive.
    raise record_integrity.damaged_record_error(self.files(split), damage)

  def files(self, split: str) -> List[str]:
    """The paths of the split's shards (what a reader that hits a
    `tf.errors.DataLossError` gives `record_integrity.damaged_record_error`)."""
    return [os.path.join(self.folder, f) for f in self._split(split)["files"]]
