"""Where `bert-create-pretraining-data` writes, and what it may replace.

`--output_dir`: the run's folder (its shards and `manifest.json`) is written
whole through `bert.io.atomic_folder`: into a temp folder beside it,
renamed into place once every shard and the manifest are written. So a
reader sees the earlier run or the new one, never a mix of the two, and a
run that fails or is killed leaves the earlier one as it was (a killed
run's temp folder is removed by the next run). An existing folder is
- empty: used;
- the folder of an earlier run: refused, unless `overwrite`; with it,
  replaced whole;
- anything else, or an earlier run's folder holding anything the run did
  not write (a user's `notes.txt`, a TFRecord of theirs): refused before
  any work, in one line naming the entry. Nothing of the user's is ever
  deleted, and no run is written beside a user's files (it could not be
  replaced later without deleting them).
A run's files are those the folder's record (`_output_record.RECORD`)
lists; in a folder written before the library kept one, those named as the
library names them (`pretrain-NNNNN-of-NNNNN.tfrecord`, `manifest.json`,
and the `.tmp` files a killed run of that time left).

`--output_file=a,b` (google-research's flag): each file is written through
`bert.io.atomic_file` (a temp file named for its writer beside it,
renamed over it: a user's `a.tmp` is never touched, a killed run's temp
file is removed by the next write), all of them renamed into place only
once every shard is written.
"""

import contextlib
import os
import re
from typing import List, Sequence

from bert import io as _io
from bert.io.output_record import (output_path, read_record, tree,
                                      write_record)
from bert.data.pretraining_manifest import MANIFEST

# The names a run gives its files (and gave its temp files, before it wrote
# through atomic_folder).
_RUN_FILE = re.compile(r"(pretrain-\d{5}-of-\d{5}\.tfrecord|"
                       + re.escape(MANIFEST) + r")(\.tmp)?")


def shard_names(num_shards: int) -> List[str]:
  return [f"pretrain-{i:05d}-of-{num_shards:05d}.tfrecord"
          for i in range(num_shards)]


def check_output_dir(output_dir: str, overwrite: bool) -> List[str]:
  """Refuses, before any work, an `output_dir` the run may not replace;
  returns the files of the earlier run it replaces (none for a new or empty
  folder). A folder the old writer made is adopted (given a record of its
  files), so that atomic_folder replaces it whole."""
  path = output_path(output_dir)
  if not os.path.isdir(path):
    return []    # new; a file or a bad parent: atomic_folder's one line
  run, foreign, legacy = _entries(path)
  if foreign:
    entry = foreign[0]
    if run:
      raise FileExistsError(
          f"{output_dir}: holds {entry!r}, which is not a file of the "
          "earlier pre-training data run in it; refusing to replace the "
          f"folder, which would delete it (move {entry!r} out of it, or "
          "choose another --output_dir)")
    raise FileExistsError(
        f"{output_dir}: holds {entry!r}, which is not a file of a "
        "pre-training data run; refusing to write a run there, since a "
        "run's folder is written and replaced whole (choose a new or empty "
        "--output_dir)")
  if run and not overwrite:
    shown = ", ".join(run[:3]) + (f" and {len(run) - 3} more"
                                  if len(run) > 3 else "")
    raise FileExistsError(
        f"{output_dir} holds files of an earlier run ({shown}), which a "
        f"reader of {output_dir}/*.tfrecord would mix in; pass --overwrite "
        "to replace them, or choose another --output_dir")
  if run and legacy:
    # Unwritable: left to atomic_folder, whose check names the folder.
    with contextlib.suppress(OSError):
      write_record(path, run)
  return run


def replaceable(overwrite: bool):
  """atomic_folder's test of the existing folder (checked again when the
  new one is complete): empty, or with `overwrite` an earlier run's."""
  def ok(path: str) -> bool:
    if not os.path.isdir(path):
      return False
    run, foreign, _ = _entries(path)
    return not foreign and (overwrite or not run)
  return ok


def _entries(path: str):
  """(the run's files, the other entries, whether the folder has no
  record) of the folder `path`."""
  own = read_record(path)
  run, foreign = [], []
  for entry in tree(path):
    ours = own is None or entry in own
    (run if ours and _RUN_FILE.fullmatch(entry) else foreign).append(entry)
  return run, foreign, own is None


def check_output_files(output_files: Sequence[str],
                       num_shards: int) -> List[str]:
  """The `--output_file` paths, checked before any work."""
  outputs = [p.strip() for p in output_files if p.strip()]
  if not outputs:
    raise ValueError("output_files: no file named")
  if len(set(map(os.path.abspath, outputs))) != len(outputs):
    raise ValueError(f"output_files: a file is named twice "
                     f"({', '.join(outputs)})")
  if num_shards not in (1, len(outputs)):
    raise ValueError(f"num_shards={num_shards} but {len(outputs)} output "
                     "files are named (one shard each)")
  for path in outputs:
    # A device or a pipe: refused (a shard is written beside, and renamed).
    _io.check_output_file(path, in_place=False)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(os.path.join(folder, MANIFEST)):
      raise FileExistsError(
          f"{path}: its folder holds the {MANIFEST} of an --output_dir run, "
          "whose readers would refuse a file it does not list; write the "
          "files elsewhere")
  return outputs
