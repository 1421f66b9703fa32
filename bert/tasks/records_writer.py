"""A fine-tuning task's splits, encoded once into TFRecords
(`bert-create-finetuning-data`; the format: `bert.data.finetuning_records`).

The rows are those the task encodes in memory, in the same order, so a run
with `FinetuningInputs.records` set to the folder trains on the same batches
(and evaluates the same rows) as one that encodes the task's files itself.
"""

import os
import time
from typing import Callable, Dict, Iterator, Optional, Sequence

import numpy as np

from bert import io as _io
from bert.data import finetuning_records as fr
from bert.data._workers import worker_pool
from bert.data.errors import DataError
from bert.tasks.finetuning import FinetuningTask
from bert.validation import check_int

SPLITS = ("train", "eval", "predict")


def _replaceable(overwrite: bool):
  def ok(path):
    if not os.path.isdir(path):
      return False
    if not os.listdir(path):
      return True
    return overwrite and fr.is_records_folder(path)
  return ok


def encoded_chunks(task: FinetuningTask, split: str, chunk_rows: int,
                   select=None) -> Iterator[Optional[Dict[str, np.ndarray]]]:
  """The rows of `task.encode(split)` in chunks (of `chunk_rows` examples
  for tasks that encode in chunks, as they go; of `chunk_rows` rows of the
  whole encoding otherwise); chunk k only if `select(k)`, else None."""
  chunks = getattr(task, "encode_chunks", None)
  if chunks is not None:
    yield from chunks(split, chunk_rows, select)
    return
  data = task.encode(split)
  n = len(next(iter(data.values())))   # (features of a row of any layout)
  for k, start in enumerate(range(0, n, chunk_rows)):
    yield ({k_: v[start:start + chunk_rows] for k_, v in data.items()}
           if select is None or select(k) else None)


def _encode_parts(args):
  """One process's chunks (k % workers == worker) of a split, each written
  to its own part file; {k: (path, spec)}."""
  task_factory, split, chunk_rows, worker, workers, folder = args
  task = task_factory()
  parts = {}
  for k, chunk in enumerate(encoded_chunks(
      task, split, chunk_rows, select=lambda k: k % workers == worker)):
    if chunk is None:
      continue
    path = os.path.join(folder, f".part-{split}-{k:07d}.tfrecord")
    parts[k] = (path, fr.write_part(path, chunk)["features"])
  return parts


def create_finetuning_records(task: FinetuningTask, output_dir: str,
                              splits: Sequence[str] = ("train", "eval"),
                              num_shards: int = 1, overwrite: bool = False,
                              chunk_rows: int = 10_000, log=print,
                              num_processes: int = 1,
                              task_factory: Optional[Callable[[], FinetuningTask]] = None
                              ) -> dict:
  """Encodes `splits` of `task` into `num_shards` TFRecord files each in
  `output_dir`, with the manifest; returns the manifest's split entries.

  With `num_processes` > 1, chunks of `chunk_rows` examples are encoded in
  that many processes (each builds its own task with `task_factory`, a
  picklable callable that builds the same task as `task`) and then dealt
  into the shards in order: the same files as one process writes.

  `output_dir` appears complete or not at all. A folder that exists is
  refused unless it is empty, or holds records written here and
  `overwrite` is set.
  """
  owner = "create_finetuning_records"
  check_int(owner, "num_shards", num_shards, minimum=1)
  check_int(owner, "chunk_rows", chunk_rows, minimum=1)
  check_int(owner, "num_processes", num_processes, minimum=1)
  if num_processes > 1 and task_factory is None:
    raise ValueError(f"{owner}: num_processes={num_processes} needs a "
                     "task_factory that builds the task in each process")
  unknown = [s for s in splits if s not in SPLITS]
  if unknown or not splits or len(set(splits)) != len(splits):
    raise ValueError(f"{owner}: splits must be distinct names among "
                     f"{', '.join(SPLITS)}, got {list(splits)}")
  if task.inputs.records is not None:
    raise ValueError(f"{owner}: the task reads FinetuningInputs.records="
                     f"{task.inputs.records}; records are written from the "
                     "task's own files")
  what = ("an empty folder or, with --overwrite, fine-tuning records"
          if not overwrite else "an empty folder or fine-tuning records")
  side = getattr(task, "records_side_features", ())
  entries = {}
  with _io.atomic_folder(output_dir, _replaceable(overwrite), what) as tmp:
    for split in splits:
      start = time.perf_counter()
      try:
        if num_processes > 1:
          entries[split] = _write_in_processes(
              task_factory, tmp, split, chunk_rows, num_processes, num_shards,
              side, getattr(task, "records_row_index", ()))
        else:
          entries[split] = fr.write_split(
              tmp, split, encoded_chunks(task, split, chunk_rows), num_shards,
              side=side)
      except DataError as e:
        raise DataError(f"{split} split of {task.source_file(split) or split}:"
                        f" {e}") from None
      log(f"{split}: {entries[split]['rows']:,} rows in {num_shards} shard(s), "
          f"{time.perf_counter() - start:.1f} s")
    fr.write_manifest(tmp, entries, task=task.records_task_name(),
                      vocab_file=task.vocab_file,
                      lower_case=task.tokenizer.lower_case,
                      seq_length=task.seq_length,
                      extra=dict(sources={s: task.source_file(s)
                                          for s in splits}))
  return entries


def _write_in_processes(task_factory, folder, split, chunk_rows, processes,
                        num_shards, side, row_index) -> dict:
  jobs = [(task_factory, split, chunk_rows, w, processes, folder)
          for w in range(processes)]
  parts = {}
  # Its workers end with this process: none outlives a killed run, to
  # write into the temp folder a later run removes.
  with worker_pool(processes) as pool:
    for done in pool.imap_unordered(_encode_parts, jobs):
      parts.update(done)
  order = sorted(parts)
  return fr.merge_parts(folder, split, [parts[k][0] for k in order],
                        [parts[k][1] for k in order], num_shards, side=side,
                        row_index=row_index)
