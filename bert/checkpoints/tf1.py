"""google-research TF1 checkpoints: name-based, read without a TF1 graph."""

import contextlib
import os
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging
from google.protobuf.message import DecodeError

from bert.checkpoints.errors import CheckpointError
from bert.untrusted import first_line

DEFAULT_PREFIX = "bert_model.ckpt"


def find_prefix(folder: str) -> str:
  """The checkpoint prefix in `folder` (bert_model.ckpt, the one its
  `checkpoint` state file names, or the only one)."""
  preferred = os.path.join(folder, DEFAULT_PREFIX)
  if os.path.exists(preferred + ".index"):
    return preferred
  latest = _state_prefix(folder)
  if latest:
    return latest
  indexes = sorted(f for f in os.listdir(folder) if f.endswith(".index"))
  if len(indexes) == 1:
    return os.path.join(folder, indexes[0][:-len(".index")])
  if not indexes:
    raise CheckpointError(f"{folder}: no checkpoint (*.index) found")
  raise CheckpointError(f"{folder}: several checkpoints ({', '.join(indexes)}); "
                        "pass the prefix of the one to load")


def _state_prefix(folder: str) -> Optional[str]:
  """The newest prefix the folder's `checkpoint` state file names, if it
  names one inside the folder that exists. The file is a hint (TF1 writes
  absolute paths, which go stale when a folder is moved): a prefix outside
  the folder is never read, and the folder's own *.index files decide."""
  try:
    state = tf.train.get_checkpoint_state(folder)  # None if absent/unparsable
  except (tf.errors.OpError, ValueError):          # not UTF-8 text
    state = None
  if state is None or not state.model_checkpoint_path:
    return None
  prefix = state.model_checkpoint_path
  if os.path.relpath(os.path.abspath(prefix),
                     os.path.abspath(folder)).split(os.sep)[0] == os.pardir:
    logging.warning("%s: names %s, outside the folder; not read",
                    os.path.join(folder, "checkpoint"), prefix)
    return None
  return prefix if os.path.exists(prefix + ".index") else None


@contextlib.contextmanager
def reading(prefix: str, mismatch=()):
  """Errors of TensorFlow's checkpoint reader (and of the object graph's
  protobuf) as one CheckpointError naming `prefix`; the types in `mismatch`
  (a restore's errors for a checkpoint that reads but does not fit) are
  left to the caller."""
  try:
    yield
  except mismatch:
    raise
  except (tf.errors.OpError, ValueError, IndexError, DecodeError) as e:
    # The reader raises IndexError when a .data file ends early.
    raise CheckpointError(f"{prefix}: cannot read checkpoint (truncated or "
                          f"corrupted?): {first_line(e)}") from e


def read_arrays(prefix: str) -> Dict[str, np.ndarray]:
  """Every tensor of a name-based checkpoint as {name: array}."""
  with reading(prefix):
    reader = tf.train.load_checkpoint(prefix)
    names = sorted(reader.get_variable_to_shape_map())
    return {n: reader.get_tensor(n) for n in names}


def write_arrays(arrays: Dict[str, np.ndarray], prefix: str) -> None:
  """Writes a name-based (TF1 Saver compatible) checkpoint: `prefix`.index
  and .data-00000-of-00001, with exactly these variable names."""
  names = sorted(arrays)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(arrays[n]) for n in names])
