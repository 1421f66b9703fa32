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
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert.data import length_buckets as lb
from bert.data import packing
from bert.data import record_integrity
from bert.data.finetuning_records import FinetuningRecords
from bert.tasks.configs import FinetuningInputs
from bert.validation import ConfigError

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
    hidden_size: the encoder's width, which weighs attention against the
      dense layers when the packed row length is chosen.
    records: the splits as TFRecords (`bert.data.finetuning_records`),
      streamed instead of `encode`d; the same rows in the same order.
  """

  def __init__(self, encode: Callable[[str], Arrays], inputs: FinetuningInputs,
               seq_length: int, length_buckets: Sequence[int],
               pack_pad_values: Mapping[str, int], owner: str,
               hidden_size: int,
               records: Optional[FinetuningRecords] = None):
    self._encode = encode
    self.inputs = inputs
    self.seq_length = seq_length
    self.length_buckets = tuple(length_buckets)
    self._pack_pad_values = dict(pack_pad_values)
    self._owner = owner
    self.records = records
    self.hidden_size = hidden_size
    self._cache: Dict[str, Arrays] = {}
    self._train_pack_length: Optional[int] = None
    pack_length = inputs.pack_length
    if pack_length is not None and pack_length > seq_length:
      raise ConfigError(f"{owner}: FinetuningInputs.pack_length={pack_length} "
                        f"exceeds seq_length={seq_length}")
    if pack_length is not None and records is not None and pack_length < seq_length:
      raise ConfigError(
          f"{owner}: FinetuningInputs.pack_length={pack_length} with records="
          f"{records.folder}: streamed rows' lengths are not known before "
          "training, so packed rows stay at seq_length; leave pack_length unset")

  def features(self, split: str) -> Arrays:
    """`encode(split)` (or the split's records, read into memory), computed
    once."""
    if split not in self._cache:
      self._cache[split] = (self.records.read_arrays(split) if self.records
                            else self._encode(split))
    return self._cache[split]

  def num_rows(self, split: str) -> int:
    if self.records is not None:
      return self.records.num_rows(split)
    return len(self.features(split)["input_word_ids"])

  def record_files(self, split: str) -> List[str]:
    """The TFRecord files `split` is streamed from ([] for rows held in
    memory): what a reader that hits a `tf.errors.DataLossError` gives
    `bert.data.record_integrity.damaged_record_error` to name the damaged
    file and record."""
    return self.records.files(split) if self.records is not None else []

  def num_train_steps(self, num_train_epochs: float) -> int:
    # Whole epochs run the steps of as many `fit` epochs.
    return max(1, math.ceil(num_train_epochs * lb.steps_per_epoch(
        self.num_rows("train"), self.inputs.global_batch_size)))

  def _lane(self, split: str, lane: int, lanes: int) -> tf.data.Dataset:
    """Rows lane, lane + lanes, ... of `split` in row order (dicts with
    their `example_row`)."""
    if self.records is not None:
      return self.records.lane(split, lane, lanes)
    data = self.features(split)
    rows = np.arange(lane, len(data["input_word_ids"]), lanes, dtype=np.int32)
    if lanes > 1:
      data = {k: v[rows] for k, v in data.items()}
    return tf.data.Dataset.from_tensor_slices(dict(data, example_row=rows))

  def dataset(self, input_context, training: bool,
              start_step: int = 0) -> tf.data.Dataset:
    """Training: shuffled (seeded, reshuffled each epoch), repeated, grouped
    by length bucket, starting at the batch of `start_step`; evaluation: one
    pass in length order (`example_row` gives each row's index). Every batch
    is cut to its length bucket (or packed, with `pack`)."""
    if not training:
      return self._eval_dataset(input_context)
    inputs = self.inputs
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline = input_context.input_pipeline_id if input_context else 0
    lanes = inputs.lanes or pipelines
    if lanes % pipelines:
      raise ConfigError(f"{self._owner}: FinetuningInputs.lanes={lanes} cannot "
                        f"be shared by {pipelines} input pipelines (workers); "
                        "use a multiple of them")
    if inputs.global_batch_size % lanes:
      raise ConfigError(f"{self._owner}: FinetuningInputs.global_batch_size="
                        f"{inputs.global_batch_size} is not a multiple of "
                        f"{lanes} input lanes")
    if not pipeline:
      logging.info("%s training data: %s", self._owner, self.train_summary())
    total = self.num_rows("train")
    if total < lanes:
      raise ConfigError(f"{self._owner}: {total} training rows cannot fill "
                        f"{lanes} input lanes")
    lane_batch = inputs.global_batch_size // lanes
    mine = range(pipeline * lanes // pipelines,
                 (pipeline + 1) * lanes // pipelines)
    streams = [lb.training_batches(
        self._lane("train", j, lanes), len(range(j, total, lanes)),
        lane_batch, self.length_buckets, seed=inputs.seed + j,
        group_by_length=inputs.group_by_length and not inputs.pack,
        shuffle_buffer=inputs.shuffle_buffer) for j in mine]
    # One element per step: this pipeline's rows of the global batch, the
    # lanes' rows in lane order (rows are at full seq_length until cut).
    ds = streams[0] if len(streams) == 1 else tf.data.Dataset.zip(
        tuple(streams)).map(lambda *parts: {
            k: tf.concat([p[k] for p in parts], 0) for k in parts[0]})
    ds = ds.skip(start_step)
    # Each replica of this pipeline takes its slice of the step's rows.
    batch = (input_context.get_per_replica_batch_size(inputs.global_batch_size)
             if input_context else inputs.global_batch_size)
    if batch < inputs.global_batch_size // pipelines:
      ds = ds.flat_map(lambda b: tf.data.Dataset.from_tensor_slices(b).batch(batch))
    if inputs.pack:
      # Packed batches are packed from whole batches of rows of any length.
      return ds.map(packing.batch_packer(
          ds.element_spec, self.seq_length, inputs.max_per_row,
          self._pack_pad_values, self.train_pack_length())).prefetch(
              tf.data.AUTOTUNE)
    return ds.map(self._cutter("train")).prefetch(tf.data.AUTOTUNE)

  def _eval_dataset(self, input_context) -> tf.data.Dataset:
    """One pass over the eval split, in batches of eval_batch_size cut to
    their bucket: in length order from memory; from TFRecords, in the
    stream's order, batched by length bucket (bounded memory)."""
    inputs = self.inputs
    pipelines = input_context.num_input_pipelines if input_context else 1
    if self.records is None:
      data = self.features("eval")
      rows = lb.length_order(data).astype(np.int32)
      ds = tf.data.Dataset.from_tensor_slices(
          dict({k: v[rows] for k, v in data.items()}, example_row=rows))
      if pipelines > 1:
        ds = ds.shard(pipelines, input_context.input_pipeline_id)
      ds = ds.batch(inputs.eval_batch_size)
    else:
      ds = self.records.lane("eval")
      if pipelines > 1:
        ds = ds.shard(pipelines, input_context.input_pipeline_id)
      ds = self._by_bucket(ds, inputs.eval_batch_size)
    return ds.map(self._cutter("eval")).prefetch(tf.data.AUTOTUNE)

  def _by_bucket(self, rows: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """Batches of up to `batch_size` rows of one length bucket, in stream
    order (the last, partial batch of each bucket at the end)."""
    if len(self.length_buckets) == 1:
      return rows.batch(batch_size)
    return rows.group_by_window(
        key_func=lb.bucket_key(self.length_buckets),
        reduce_func=lambda _, window: window.batch(batch_size),
        window_size=batch_size)

  def train_summary(self) -> str:
    """Rows per length bucket (or packing) of the training split, for the
    log; from TFRecords, the row count."""
    if self.records is not None:
      return (f"{self.num_rows('train')} rows streamed from "
              f"{self.records.folder}")
    data = self.features("train")
    return (self.packing_summary(data) if self.inputs.pack
            else lb.bucket_summary(data, self.length_buckets))

  def _cutter(self, split: str):
    if self.records is not None:
      names = self.records.feature_names(split)
      spec = self.records.manifest["splits"][split]["features"]
      keys = [k for k in names if spec[k]["shape"]
              and spec[k]["shape"][-1] == self.seq_length]
      return lb.bucket_cutter(keys, self.length_buckets)
    return self.batch_cutter(self.features(split))

  def split_outputs(self, model, split: str, select: Callable[[Arrays], Arrays],
                    sequence_outputs: Sequence[str]) -> Arrays:
    """`model`'s outputs on the rows of `split` (`select` picks the model
    inputs of a batch of features), in row order, with `sequence_outputs`
    at full seq_length: from memory, `outputs`; from TFRecords, streamed
    in length-bucket batches."""
    if self.records is None:
      return self.outputs(model, select(self.features(split)), sequence_outputs)
    call = tf.function(lambda batch: model(batch, training=False),
                       reduce_retracing=True)
    collected = lb.RowOutputs(self.records.num_rows(split), self.seq_length,
                              sequence_outputs)
    ds = self._by_bucket(self.records.lane(split), self.inputs.eval_batch_size)
    try:
      for batch in ds.map(self._cutter(split)).prefetch(tf.data.AUTOTUNE):
        collected.add(batch["example_row"].numpy(), call(select(batch)))
    except tf.errors.DataLossError as e:
      damage = e.message
    else:
      return collected.result
    # Outside the except block: TensorFlow's error would keep the iterator.
    raise record_integrity.damaged_record_error(self.record_files(split),
                                                damage)

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
          self.inputs.max_per_row, sequence_outputs,
          row_length=self.pack_length(model_inputs["input_mask"]))
    return lb.predict_by_length(call, model_inputs, self.inputs.eval_batch_size,
                                self.length_buckets, sequence_outputs)

  def pack_length(self, input_mask: np.ndarray,
                  batch_size: Optional[int] = None) -> int:
    """The length of packed rows for examples with `input_mask`, packed in
    batches of `batch_size` examples (None: all at once):
    `FinetuningInputs.pack_length` if every example fits in it, else the
    length bucket `packing.choose_row_length` picks (the row length changes
    no output, only the cost)."""
    lengths = np.asarray(input_mask).astype(bool).sum(-1)
    given = self.inputs.pack_length
    if given is not None and (not len(lengths) or lengths.max() <= given):
      return given
    return packing.choose_row_length(
        lengths, self.length_buckets, self.hidden_size, batch_size,
        self.inputs.max_per_row)

  def train_pack_length(self) -> int:
    """The length of packed training rows (see `pack_length`); seq_length
    for rows streamed from TFRecords. A `pack_length` shorter than a
    training example is a ConfigError naming it."""
    if self._train_pack_length is None:
      if self.records is not None:
        self._train_pack_length = self.seq_length
      else:
        mask = self.features("train")["input_mask"]
        given = self.inputs.pack_length
        lengths = np.asarray(mask).astype(bool).sum(-1)
        if given is not None and len(lengths) and lengths.max() > given:
          row = int(np.argmax(lengths))
          raise ConfigError(
              f"{self._owner}: FinetuningInputs.pack_length={given} is shorter "
              f"than training row {row} ({int(lengths[row])} tokens); use >= "
              f"{int(lengths.max())} or leave it unset")
        self._train_pack_length = self.pack_length(
            mask, self.inputs.global_batch_size)
    return self._train_pack_length

  def packing_summary(self, data: Arrays) -> str:
    """How full the packed training rows are, for the log."""
    lengths = np.asarray(data["input_mask"]).astype(bool).sum(-1)
    batch = self.inputs.global_batch_size
    row_length = self.train_pack_length()
    rows = [len(packing.pack_rows(lengths[i:i + batch], row_length,
                                  self.inputs.max_per_row))
            for i in range(0, len(lengths) - batch + 1, batch)]
    chosen = ("FinetuningInputs.pack_length" if self.inputs.pack_length
              else "chosen by estimated cost")
    real = lengths[:len(rows) * batch].sum() / max(1, sum(rows) * row_length)
    return (f"packed rows: {batch} examples per step in {np.mean(rows):.1f} "
            f"rows of {row_length} ({chosen}; seq_length {self.seq_length}) "
            f"on average (file order); {real:.0%} of the packed positions "
            f"are real tokens, {lengths.mean() / self.seq_length:.0%} of "
            "unpacked ones")
