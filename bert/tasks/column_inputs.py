"""The input pipeline of a task whose rows are columns of texts (features
`text_<i>/<input>`, `bert.models.embedder_preprocessor`): `EncodedInputs`
(lanes, resuming at a step, TFRecords, distribution) with the batching of
`TextEmbedderPreprocessor.dataset`, which `fit` uses.

Training batches are drawn at random (seeded, anew each pass), never
grouped by length: the other rows of a batch are each anchor's negatives,
and a batch of equally long texts would make them easier or harder than the
data's own mix (`FinetuningInputs.group_by_length` does not apply).
Evaluation runs the rows in order. Each column of a batch is cut to its own
length bucket: short queries beside long paragraphs compute no
paragraph-length padding.
"""

import dataclasses
from typing import Callable, Dict

import numpy as np
import tensorflow as tf

from bert.data import length_buckets as lb
from bert.models.embedder_preprocessor import column_cutter, column_key
from bert.tasks.encoded_inputs import EncodedInputs


class ColumnInputs(EncodedInputs):
  """`EncodedInputs` over rows of `num_columns` text columns; arguments as
  `EncodedInputs`' (no packing)."""

  def __init__(self, encode: Callable[[str], Dict[str, np.ndarray]], inputs,
               seq_length, length_buckets, owner, hidden_size, num_columns,
               records=None):
    # The training stream of `EncodedInputs.dataset`, ungrouped: the rows
    # `fit` batches (`length_buckets.training_batches`, group_by_length
    # False), lane by lane.
    super().__init__(encode, dataclasses.replace(inputs, group_by_length=False),
                     seq_length, length_buckets, {}, owner, hidden_size,
                     records=records)
    self.num_columns = num_columns

  def _mask(self, i: int = 0) -> str:
    return column_key(i, "input_mask")

  def num_rows(self, split: str) -> int:
    if self.records is not None:
      return self.records.num_rows(split)
    return len(self.features(split)[self._mask()])

  def _lane(self, split, lane, lanes):
    if self.records is not None:
      return self.records.lane(split, lane, lanes)
    data = self.features(split)
    rows = np.arange(lane, len(data[self._mask()]), lanes, dtype=np.int32)
    if lanes > 1:
      data = {k: v[rows] for k, v in data.items()}
    return tf.data.Dataset.from_tensor_slices(dict(data, example_row=rows))

  def _cutter(self, split):
    del split
    return column_cutter(self.num_columns, self.length_buckets)

  def _eval_dataset(self, input_context) -> tf.data.Dataset:
    """One pass over the eval split in row order, batches of
    eval_batch_size, each column cut to its bucket."""
    ds = self._lane("eval", 0, 1)
    if input_context and input_context.num_input_pipelines > 1:
      ds = ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id)
    ds = ds.batch(self.inputs.eval_batch_size)
    return ds.map(self._cutter("eval")).prefetch(tf.data.AUTOTUNE)

  def train_summary(self) -> str:
    if self.records is not None:
      return super().train_summary()
    data = self.features("train")
    return "; ".join(
        f"column {i}: " + lb.bucket_summary(data, self.length_buckets,
                                            self._mask(i))
        for i in range(self.num_columns))
