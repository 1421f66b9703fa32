"""Length buckets: no compute on trailing padding.

Rows are encoded at a fixed `seq_length` ([n, seq] arrays with a 0/1
`input_mask`), but a batch only needs the length of its longest row. Each
batch is cut to the smallest of a few fixed lengths (the buckets) that holds
it, so tf.function traces, and XLA compiles, once per bucket rather than once
per batch. Cutting trailing padding changes no real token's output: attention
masks padded keys anyway, and every other op is per token.

For inference, rows are run in length order (short rows share batches with
short rows) and the outputs returned in row order.
"""

import math
import numbers
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert.validation import ConfigError


def default_length_buckets(seq_length: int) -> Sequence[int]:
  """Multiples of 32 up to 128, of 64 up to 512, then of 128; the last is
  `seq_length`. Few enough that each is traced (or XLA-compiled) once,
  close enough that little padding is left."""
  lengths = list(range(32, 129, 32)) + list(range(192, 513, 64)) + list(
      range(640, seq_length, 128))
  return tuple(n for n in lengths if n < seq_length) + (seq_length,)


def check_length_buckets(buckets: Sequence[int], seq_length: int,
                         name: str = "length_buckets") -> Sequence[int]:
  """`buckets` as a tuple, or a ConfigError naming `name`."""
  given = buckets
  ok = not isinstance(buckets, (str, bytes)) and hasattr(buckets, "__iter__")
  buckets = tuple(buckets) if ok else buckets
  ok = ok and bool(buckets) and all(
      isinstance(b, numbers.Integral) and not isinstance(b, bool)
      for b in buckets)
  if not ok or (list(buckets) != sorted(set(buckets)) or buckets[0] < 1
                or buckets[-1] != seq_length):
    raise ConfigError(f"{name} must be increasing positive lengths ending at "
                      f"seq_length={seq_length}, got {given!r}")
  buckets = tuple(int(b) for b in buckets)
  return buckets


def row_length(input_mask: tf.Tensor) -> tf.Tensor:
  """Real tokens per row (the last axis) of a 0/1 mask, maximum over any
  axes between the batch axis and it (e.g. multiple-choice endings)."""
  lengths = tf.reduce_sum(tf.cast(input_mask, tf.int32), -1)
  while lengths.shape.rank > 1:
    lengths = tf.reduce_max(lengths, -1)
  return lengths


def bucket_index(lengths: tf.Tensor, buckets: tf.Tensor) -> tf.Tensor:
  """Index of the smallest bucket holding each length (int32 [n])."""
  return tf.searchsorted(buckets, tf.reshape(lengths, [-1]))


def _row_lengths_np(features: Mapping[str, np.ndarray], mask_key: str) -> np.ndarray:
  """NumPy `row_length` of a whole split's mask."""
  mask = np.asarray(features[mask_key])
  return mask.reshape(len(mask), -1, mask.shape[-1]).sum(-1).max(-1)


def sequence_keys(features: Mapping[str, np.ndarray], seq_length: int) -> List[str]:
  """The features whose last axis is the padded sequence axis."""
  return [k for k, v in features.items()
          if np.ndim(v) >= 2 and np.shape(v)[-1] == seq_length]


# The op-level seed of the training shuffle (the global seed,
# `tf_keras.utils.set_random_seed` or `RuntimeConfig.seed`, is the other half):
# the default of `FinetuningInputs.seed` and of the Keras path's `fit`.
SHUFFLE_SEED = 42


def steps_per_epoch(num_rows: int, batch_size: int) -> int:
  """Steps of one epoch: every row once, the last batch filled up from the
  next epoch's rows."""
  return max(1, math.ceil(num_rows / batch_size))


def training_batches(rows: tf.data.Dataset, num_rows: int, batch_size: int,
                     buckets: Sequence[int], shuffle: bool = True,
                     seed: Optional[int] = SHUFFLE_SEED,
                     group_by_length: bool = True,
                     shuffle_buffer: Optional[int] = None) -> tf.data.Dataset:
  """The endless stream of training batches over a split's `rows` (dicts
  with an `input_mask`): shuffled (seeded, anew each pass; `shuffle_buffer`
  rows at a time, all `num_rows` when None or more) and repeated, then
  `batch_size` rows of one length bucket per batch (with `group_by_length`
  and more than one bucket). Every batch is full; cut it with
  `bucket_cutter`.

  `bert-train` and `fit` on raw inputs both draw their batches from this
  stream, so the same seeds give them the same batches in the same order.
  """
  if shuffle:
    buffer = num_rows if shuffle_buffer is None else min(num_rows, shuffle_buffer)
    rows = rows.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
  rows = rows.repeat()
  if not group_by_length or len(buckets) == 1:
    return rows.batch(batch_size, drop_remainder=True)
  return rows.group_by_window(
      key_func=bucket_key(buckets),
      reduce_func=lambda _, window: window.batch(batch_size,
                                                 drop_remainder=True),
      window_size=batch_size)


def bucket_key(buckets: Sequence[int]) -> Callable:
  """`group_by_window`'s key of one row (a dict with its `input_mask`, with
  its choice axis if any): the index of its bucket."""
  lengths = tf.constant(buckets, tf.int32)
  return lambda row: tf.cast(bucket_index(
      row_length(row["input_mask"][tf.newaxis]), lengths)[0], tf.int64)


def bucket_cutter(keys: Sequence[str], buckets: Sequence[int],
                  mask_key: str = "input_mask") -> Callable:
  """A function that cuts the `keys` of a batch (dict of tensors) to the
  smallest bucket holding the batch's longest row of `mask_key`."""
  keys = set(keys)
  buckets = tf.constant(buckets, tf.int32)

  def cut(batch):
    longest = tf.reduce_max(row_length(batch[mask_key]))
    length = buckets[bucket_index(longest, buckets)[0]]
    return {k: (v[..., :length] if k in keys else v) for k, v in batch.items()}

  return cut


def pad_sequence_axis(t: tf.Tensor, length: int, value: float = 0) -> tf.Tensor:
  """`t` [batch, seq, ...] padded with `value` on axis 1 to `length`."""
  pad = tf.maximum(length - tf.shape(t)[1], 0)
  paddings = tf.concat([[[0, 0], [0, pad]],
                        tf.zeros([t.shape.rank - 2, 2], tf.int32)], 0)
  return tf.pad(t, paddings, constant_values=tf.cast(value, t.dtype))


def bucket_summary(features: Mapping[str, np.ndarray], buckets: Sequence[int],
                   mask_key: str = "input_mask") -> str:
  """Rows per bucket and the share of token positions cutting saves (if
  each row sat in a batch of its own bucket), e.g. for a log line."""
  seq = np.shape(features[mask_key])[-1]
  lengths = _row_lengths_np(features, mask_key)
  index = np.searchsorted(np.asarray(buckets), lengths)
  counts = np.bincount(index, minlength=len(buckets))
  used = float(np.asarray(buckets)[index].sum())
  parts = ", ".join(f"{b}: {c}" for b, c in zip(buckets, counts) if c)
  saved = 1 - used / (len(lengths) * seq)
  return (f"length buckets (rows per length) {parts}; {saved:.0%} of the "
          f"{seq}-long positions are not computed; at most "
          f"{int((counts > 0).sum())} traces/XLA compilations")


def length_order(features: Mapping[str, np.ndarray],
                 mask_key: str = "input_mask") -> np.ndarray:
  """Row indices sorted by real length (stable: ties keep row order)."""
  return np.argsort(_row_lengths_np(features, mask_key), kind="stable")


def predict_by_length(fn: Callable, features: Mapping[str, np.ndarray],
                      batch_size: int, buckets: Sequence[int],
                      sequence_outputs: Sequence[str] = (),
                      pad_value: float = -1e4, mask_key: str = "input_mask"
                      ) -> Dict[str, np.ndarray]:
  """`fn(batch)` (a dict of outputs) over all rows of `features`.

  Rows run in length order, in batches of `batch_size` cut to their bucket;
  outputs come back in row order as NumPy arrays, those named in
  `sequence_outputs` ([batch, seq, ...]) padded back to the full length
  with `pad_value`.
  """
  full = np.shape(features[mask_key])[-1]
  keys = sequence_keys(features, full)
  order = length_order(features, mask_key)
  if not len(order):
    raise ValueError("predict_by_length: no rows")
  cut = bucket_cutter(keys, buckets, mask_key)
  collected = RowOutputs(len(order), full, sequence_outputs, pad_value)
  for start in range(0, len(order), batch_size):
    rows = order[start:start + batch_size]
    batch = cut({k: tf.constant(np.asarray(v)[rows]) for k, v in features.items()})
    collected.add(rows, fn(batch))
  return collected.result


class RowOutputs:
  """Batch outputs put back in row order: `add(rows, outputs)` for each
  batch (rows in any order, batches cut to any bucket); `result` holds one
  NumPy array per output, those named in `sequence_outputs` ([batch, seq,
  ...]) padded back to `full` length with `pad_value`."""

  def __init__(self, num_rows: int, full: int,
               sequence_outputs: Sequence[str] = (), pad_value: float = -1e4):
    self.num_rows, self.full = num_rows, full
    self.sequence_outputs, self.pad_value = set(sequence_outputs), pad_value
    self.result: Dict[str, np.ndarray] = {}

  def add(self, rows, outputs: Mapping[str, object]) -> None:
    for k, v in outputs.items():
      v = np.asarray(v)
      if k in self.sequence_outputs:
        pad = [(0, 0)] * v.ndim
        pad[1] = (0, self.full - v.shape[1])
        v = np.pad(v, pad, constant_values=self.pad_value)
      if k not in self.result:
        self.result[k] = np.zeros((self.num_rows,) + v.shape[1:], v.dtype)
      self.result[k][rows] = v
