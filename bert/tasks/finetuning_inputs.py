"""The input pipeline of fine-tuning tasks: encoded splits held in memory, the
tf.data batches over them, and batched inference over a whole split.

No compute on padding: rows are encoded at `seq_length`, but every batch is
cut to the smallest of a few fixed lengths (`length_buckets`) that holds its
longest row, and training batches are drawn from examples of one bucket
(`group_by_length`). Cutting trailing padding changes no real token's output
(attention masks it anyway), so losses and metrics are those of full-length
batches; the few fixed lengths keep tf.function/XLA to one trace per bucket.
With `pack`, training batches and predictions are packed rows instead
(`bert.data.packing`).
"""

import logging
import math
from typing import Callable, Dict, Mapping, Sequence

import numpy as np
import tensorflow as tf

from bert.data import length_buckets as lb
from bert.data import packing
from bert.tasks.configs import FinetuningInputs

Arrays = Dict[str, np.ndarray]


class EncodedInputs:
  """The encoded splits of one task and the pipelines over them.

  Args:
    encode: split ("train", "eval", "predict") -> model inputs and labels as
      NumPy arrays, one row per model input row; called once per split.
    inputs: batching, bucketing and packing.
    seq_length: the length rows are encoded to.
    length_buckets: the lengths batches are cut to (checked, ending at
      seq_length).
    pack_pad_values: fill values of per-token features between packed
      examples.
    owner: names the task in log lines.
  """

  def __init__(self, encode: Callable[[str], Arrays], inputs: FinetuningInputs,
               seq_length: int, length_buckets: Sequence[int],
               pack_pad_values: Mapping[str, int], owner: str):
    self._encode = encode
    self.inputs = inputs
    self.seq_length = seq_length
    self.length_buckets = tuple(length_buckets)
    self._pack_pad_values = dict(pack_pad_values)
    self._owner = owner
    self._cache: Dict[str, Arrays] = {}

  def features(self, split: str) -> Arrays:
    """`encode(split)`, computed once."""
    if split not in self._cache:
      self._cache[split] = self._encode(split)
    return self._cache[split]

  def num_train_steps(self, num_train_epochs: float) -> int:
    # Whole epochs run the steps of as many `fit` epochs.
    n = len(self.features("train")["input_word_ids"])
    return max(1, math.ceil(num_train_epochs * lb.steps_per_epoch(
        n, self.inputs.global_batch_size)))

  def dataset(self, input_context, training: bool,
              start_step: int = 0) -> tf.data.Dataset:
    """Training: shuffled (seeded, reshuffled each epoch), repeated, grouped
    by length bucket, starting at the batch of `start_step`; evaluation: one
    pass in length order (`example_row` gives each row's index). Every batch
    is cut to its length bucket (or packed, with `pack`)."""
    data = self.features("train" if training else "eval")
    inputs = self.inputs
    if training:
      rows = np.arange(len(data["input_word_ids"]), dtype=np.int32)
      if not (input_context and input_context.input_pipeline_id):
        logging.info("%s training data: %s", self._owner,
                     self.packing_summary(data) if inputs.pack
                     else lb.bucket_summary(data, self.length_buckets))
    else:   # in length order, as `outputs` runs predictions
      rows = lb.length_order(data).astype(np.int32)
      data = {k: v[rows] for k, v in data.items()}
    ds = tf.data.Dataset.from_tensor_slices(dict(data, example_row=rows))
    pipelines = input_context.num_input_pipelines if input_context else 1
    if pipelines > 1:
      ds = ds.shard(pipelines, input_context.input_pipeline_id)
    cut = self.batch_cutter(data)
    if not training:
      return ds.batch(inputs.eval_batch_size).map(cut).prefetch(tf.data.AUTOTUNE)
    batch = (input_context.get_per_replica_batch_size(inputs.global_batch_size)
             if input_context else inputs.global_batch_size)
    # Packed batches are packed from whole batches of rows of any length.
    ds = lb.training_batches(
        ds, len(data["input_word_ids"]), batch, self.length_buckets,
        seed=inputs.seed, group_by_length=inputs.group_by_length and not inputs.pack)
    # Each step takes one batch per replica; this pipeline feeds
    # replicas / pipelines of them.
    ds = ds.skip(start_step * (inputs.global_batch_size // batch) // pipelines)
    if inputs.pack:
      return ds.map(packing.batch_packer(
          ds.element_spec, self.seq_length, inputs.max_per_row,
          self._pack_pad_values)).prefetch(tf.data.AUTOTUNE)
    return ds.map(cut).prefetch(tf.data.AUTOTUNE)

  def sequence_features(self, data: Arrays) -> Sequence[str]:
    """The features whose last axis is the padded sequence axis."""
    return lb.sequence_keys(data, self.seq_length)

  def batch_cutter(self, data: Arrays):
    """A function that cuts a batch of `data`'s features to its bucket."""
    return lb.bucket_cutter(self.sequence_features(data), self.length_buckets)

  def outputs(self, model, model_inputs: Arrays,
              sequence_outputs: Sequence[str]) -> Arrays:
    """`model`'s outputs on `model_inputs` (a whole split), inferred in length
    order (or packed, with `pack`) and returned in row order, with
    `sequence_outputs` at full `seq_length`."""
    # Compiled once per bucket shape: eager calls cost more than the
    # network on short rows (a teacher labelling a large transfer set).
    call = tf.function(lambda batch: model(batch, training=False),
                       reduce_retracing=True)
    if self.inputs.pack:
      return packing.predict_packed(
          call, model_inputs, self.inputs.eval_batch_size, self.seq_length,
          self.inputs.max_per_row, sequence_outputs)
    return lb.predict_by_length(call, model_inputs, self.inputs.eval_batch_size,
                                self.length_buckets, sequence_outputs)

  def packing_summary(self, data: Arrays) -> str:
    """How full the packed training rows are, for the log."""
    lengths = np.asarray(data["input_mask"]).astype(bool).sum(-1)
    batch = self.inputs.global_batch_size
    rows = [len(packing.pack_rows(lengths[i:i + batch], self.seq_length,
                                  self.inputs.max_per_row))
            for i in range(0, len(lengths) - batch + 1, batch)]
    return (f"packed rows: {batch} examples per step in {np.mean(rows):.1f} "
            f"rows of {self.seq_length} on average (file order); "
            f"{lengths.mean() / self.seq_length:.0%} of an unpacked row is "
            "real tokens")
