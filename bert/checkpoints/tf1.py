"""google-research TF1 checkpoints: name-based, read without a TF1 graph."""

import os
from typing import Dict

import numpy as np
import tensorflow as tf

from bert.checkpoints.errors import CheckpointError

DEFAULT_PREFIX = "bert_model.ckpt"


def find_prefix(folder: str) -> str:
  """The checkpoint prefix in `folder` (bert_model.ckpt, or the only one)."""
  preferred = os.path.join(folder, DEFAULT_PREFIX)
  if os.path.exists(preferred + ".index"):
    return preferred
  latest = tf.train.latest_checkpoint(folder)
  if latest:
    return latest
  indexes = sorted(f for f in os.listdir(folder) if f.endswith(".index"))
  if len(indexes) == 1:
    return os.path.join(folder, indexes[0][:-len(".index")])
  if not indexes:
    raise CheckpointError(f"{folder}: no checkpoint (*.index) found")
  raise CheckpointError(f"{folder}: several checkpoints ({', '.join(indexes)}); "
                        "pass the prefix of the one to load")


def read_arrays(prefix: str) -> Dict[str, np.ndarray]:
  """Every tensor of a name-based checkpoint as {name: array}."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    names = sorted(reader.get_variable_to_shape_map())
    return {n: reader.get_tensor(n) for n in names}
  except (tf.errors.OpError, ValueError, IndexError) as e:
    # The reader raises IndexError when a .data file ends early.
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise CheckpointError(f"{prefix}: cannot read checkpoint (truncated or "
                          f"corrupted?): {message}") from e


def write_arrays(arrays: Dict[str, np.ndarray], prefix: str) -> None:
  """Writes a name-based (TF1 Saver compatible) checkpoint: `prefix`.index
  and .data-00000-of-00001, with exactly these variable names."""
  names = sorted(arrays)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(arrays[n]) for n in names])
