"""What every fine-tuning task shares: the starting checkpoint, its tokenizer,
in-memory encoded data and the input pipeline over it.

No compute on padding: rows are encoded at `seq_length`, but every batch is
cut to the smallest of a few fixed lengths (`length_buckets`) that holds its
longest row, and training batches are drawn from examples of one bucket
(`group_by_length`). Cutting trailing padding changes no real token's output
(attention masks it anyway), so losses and metrics are those of full-length
batches; the few fixed lengths keep tf.function/XLA to one trace per bucket.
"""

import logging
import math
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert import checkpoints
from bert.config import resolve_bert_config
from bert.data import length_buckets as lb
from bert.data import packing
from bert.data.tokenization import Tokenizer
from bert.features import ENCODER_INPUTS, PACKED_ROW_INPUTS
from bert.tasks.base import Task
from bert.validation import (ConfigError, check_bool, check_float, check_int,
                             check_str)


def split_files(data_dir: str, **files: str) -> Dict[str, str]:
  """Each split's file (e.g. train="train.json") under `data_dir`; "" (not
  set) stays ""."""
  return {split: os.path.join(data_dir, name) if name else ""
          for split, name in files.items()}


class FinetuningTask(Task):
  """Base of tasks fine-tuned from a checkpoint on data encoded in memory.

  Subclasses implement `encode(split)` -> dict of NumPy arrays (one row per
  model input row) and the model/loss methods of `Task`.

  Subclasses name in `sequence_outputs` the model outputs that have a
  sequence axis (axis 1), so predictions of cut batches are padded back to
  `seq_length`.

  Args:
    init_checkpoint: a checkpoint folder (any format bert.checkpoints.load
      reads); gives the encoder weights, config, vocab and casing.
    bert_config, vocab_file, do_lower_case: without init_checkpoint (or to
      override its vocab/casing).
    length_buckets: the lengths batches are cut to (each batch to the
      smallest one that holds its longest row); default
      `default_length_buckets(seq_length)`; `[seq_length]` turns cutting off.
    group_by_length: training batches hold examples of one bucket (seeded,
      like the shuffle), so short examples are not padded to long ones.
    pack: training batches and predictions in packed rows (tasks with
      `packable = True`): each step's `global_batch_size` examples are packed
      into as few rows of `seq_length` as they fill (`bert.data.packing`),
      so a step sees the same examples and computes the same loss as without
      packing, on fewer positions. Evaluation stays one example per row.
    max_per_row: the most examples in one packed row.
  """

  # Whether `pack=True` works: the model and loss handle packed rows.
  packable = False
  # Fill values of per-token features between packed examples.
  pack_pad_values: Dict[str, int] = {}

  # Model outputs with a sequence axis at axis 1 (e.g. per-token logits).
  sequence_outputs: Sequence[str] = ()

  def __init__(self, init_checkpoint: Optional[str] = None, bert_config=None,
               vocab_file: Optional[str] = None,
               do_lower_case: Optional[bool] = None, seq_length: int = 128,
               global_batch_size: int = 32, eval_batch_size: int = 64,
               num_train_epochs: float = 3.0, dropout_rate: float = 0.1,
               seed: int = lb.SHUFFLE_SEED,
               length_buckets: Optional[Sequence[int]] = None,
               group_by_length: bool = True, pack: bool = False,
               max_per_row: int = 8):
    name = type(self).__name__
    if pack and not self.packable:
      raise ConfigError(f"{name}.pack=True: this task does not support packed "
                        "rows (classification and token classification do)")
    for field, value in (("seq_length", seq_length),
                         ("global_batch_size", global_batch_size),
                         ("eval_batch_size", eval_batch_size),
                         ("max_per_row", max_per_row)):
      check_int(name, field, value, minimum=1)
    if seq_length < 3:
      raise ConfigError(f"{name}.seq_length={seq_length} leaves no room for "
                        "a token between [CLS] and [SEP]; use >= 3")
    check_float(name, "num_train_epochs", num_train_epochs, 0, min_open=True)
    check_float(name, "dropout_rate", dropout_rate, 0, 1, max_open=True)
    check_int(name, "seed", seed, minimum=0)
    check_bool(name, "do_lower_case", do_lower_case, optional=True)
    check_bool(name, "group_by_length", group_by_length)
    check_bool(name, "pack", pack)
    check_str(name, "init_checkpoint", init_checkpoint, optional=True)
    check_str(name, "vocab_file", vocab_file, optional=True)
    # Loaded now, so a bad checkpoint fails before any data is read; its
    # weights go into the model in `initialize`.
    self._checkpoint = None
    if init_checkpoint:
      ckpt = self._checkpoint = checkpoints.load(init_checkpoint)
      self.config = ckpt.config
      vocab_file = vocab_file or ckpt.vocab_file
      if do_lower_case is None:
        do_lower_case = ckpt.do_lower_case
    else:
      if bert_config is None:
        raise ConfigError(f"{name} needs init_checkpoint or bert_config")
      self.config = resolve_bert_config(bert_config)
    if vocab_file is None:
      raise ConfigError(f"{name}: no vocab (the checkpoint has no vocab.txt; "
                        "set vocab_file)")
    if do_lower_case is None:
      raise ConfigError(f"{name}: casing of {vocab_file} unknown; set do_lower_case")
    if seq_length > self.config.max_position_embeddings:
      raise ConfigError(f"{name}.seq_length={seq_length} exceeds "
                        f"max_position_embeddings={self.config.max_position_embeddings}")
    self.length_buckets = lb.check_length_buckets(
        lb.default_length_buckets(seq_length) if length_buckets is None
        else length_buckets, seq_length, f"{name}.length_buckets")
    checkpoints.check_vocab_size(vocab_file, self.config)
    self.tokenizer = Tokenizer(vocab_file, lower_case=do_lower_case)
    self.seq_length = seq_length
    self._global_batch_size = global_batch_size
    self.eval_batch_size = eval_batch_size
    self.num_train_epochs = num_train_epochs
    self.dropout_rate = dropout_rate
    self.seed = seed
    self.group_by_length = group_by_length
    self.pack = pack
    self.max_per_row = max_per_row
    self._cache: Dict[str, Dict[str, np.ndarray]] = {}

  @property
  def global_batch_size(self) -> int:
    return self._global_batch_size

  def encode(self, split: str) -> Dict[str, np.ndarray]:
    """Model inputs and labels of "train", "eval" or "predict"."""
    raise NotImplementedError

  def features(self, split: str) -> Dict[str, np.ndarray]:
    """`encode(split)`, computed once."""
    if split not in self._cache:
      self._cache[split] = self.encode(split)
    return self._cache[split]

  def num_train_steps(self) -> int:
    # Whole epochs run the steps of as many `fit` epochs.
    n = len(self.features("train")["input_word_ids"])
    return max(1, math.ceil(
        self.num_train_epochs * lb.steps_per_epoch(n, self._global_batch_size)))

  def build_inputs(self, input_context, training, start_step=0):
    """Training: shuffled (seeded, reshuffled each epoch), repeated, grouped
    by length bucket, starting at the batch of `start_step`; evaluation: one
    pass in length order (`example_row` gives each row's index). Every batch
    is cut to its length bucket."""
    data = self.features("train" if training else "eval")
    if training:
      rows = np.arange(len(data["input_word_ids"]), dtype=np.int32)
      if not (input_context and input_context.input_pipeline_id):
        logging.info("%s training data: %s", type(self).__name__,
                     self._packing_summary(data) if self.pack
                     else lb.bucket_summary(data, self.length_buckets))
    else:   # in length order, as model_outputs runs predictions
      rows = lb.length_order(data).astype(np.int32)
      data = {k: v[rows] for k, v in data.items()}
    ds = tf.data.Dataset.from_tensor_slices(dict(data, example_row=rows))
    pipelines = input_context.num_input_pipelines if input_context else 1
    if pipelines > 1:
      ds = ds.shard(pipelines, input_context.input_pipeline_id)
    cut = self.batch_cutter(data)
    if not training:
      return ds.batch(self.eval_batch_size).map(cut).prefetch(tf.data.AUTOTUNE)
    batch = (input_context.get_per_replica_batch_size(self._global_batch_size)
             if input_context else self._global_batch_size)
    # Packed batches are packed from whole batches of rows of any length.
    ds = lb.training_batches(
        ds, len(data["input_word_ids"]), batch, self.length_buckets,
        seed=self.seed, group_by_length=self.group_by_length and not self.pack)
    # Each step takes one batch per replica; this pipeline feeds
    # replicas / pipelines of them.
    ds = ds.skip(start_step * (self._global_batch_size // batch) // pipelines)
    if self.pack:
      return ds.map(packing.batch_packer(
          ds.element_spec, self.seq_length, self.max_per_row,
          self.pack_pad_values)).prefetch(tf.data.AUTOTUNE)
    return ds.map(cut).prefetch(tf.data.AUTOTUNE)

  def source_file(self, split: str) -> str:
    """The file a split is read from."""
    return getattr(self, "files", {}).get(split, "")

  def row_origins(self, split: str) -> List[str]:
    """For each encoded row of `split`, where in its file it comes from."""
    return [f"row {i}" for i in range(len(self.features(split)["input_word_ids"]))]

  def describe_batch(self, features) -> str:
    """The training examples of a batch, by file and line (or id)."""
    origins = self.row_origins("train")
    rows = np.asarray(features["example_row"])
    if "packed_example_mask" in features:   # [rows, k]: the filled slots
      rows = rows[np.asarray(features["packed_example_mask"]) > 0]
    rows = [int(r) for r in rows.reshape(-1)]
    shown = ", ".join(origins[r] for r in rows[:10])
    more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
    return f"{self.source_file('train')}: {shown}{more}"

  def sequence_features(self, data: Dict[str, np.ndarray]) -> Sequence[str]:
    """The features whose last axis is the padded sequence axis."""
    return lb.sequence_keys(data, self.seq_length)

  def batch_cutter(self, data: Dict[str, np.ndarray]):
    """A function that cuts a batch of `data`'s features to its bucket."""
    return lb.bucket_cutter(self.sequence_features(data), self.length_buckets)

  def initialize(self, model):
    if self._checkpoint is not None:
      checkpoints.init_from_checkpoint(model, self._checkpoint)

  def preprocessor(self):
    """The `preprocessor` of this task's model on the Keras path (raw inputs
    -> model inputs, outputs -> predictions), with this task's vocabulary,
    casing, seq_length and labels; None where the model has none."""
    return None

  def _preprocessor_args(self):
    return dict(vocabulary=self.tokenizer.vocab,
                lower_case=self.tokenizer.lower_case,
                seq_length=self.seq_length, length_buckets=self.length_buckets)

  def model_inputs(self, features):
    # Packed rows also carry their position ids and example starts.
    return {k: features[k] for k in ENCODER_INPUTS + PACKED_ROW_INPUTS
            if k in features}

  def model_outputs(self, model, split: str) -> Dict[str, np.ndarray]:
    """The model's outputs on a whole split (inference in length order, or
    packed with `pack`; returned in row order), with `sequence_outputs` at
    full `seq_length`."""
    if self.pack:
      return packing.predict_packed(
          lambda batch: model(batch, training=False),
          self.model_inputs(self.features(split)), self.eval_batch_size,
          self.seq_length, self.max_per_row, self.sequence_outputs)
    return lb.predict_by_length(
        lambda batch: model(batch, training=False),
        self.model_inputs(self.features(split)), self.eval_batch_size,
        self.length_buckets, self.sequence_outputs)

  def _packing_summary(self, data) -> str:
    mask = np.asarray(data["input_mask"])
    lengths = mask.astype(bool).sum(-1)
    batch = self._global_batch_size
    rows = [len(packing.pack_rows(lengths[i:i + batch], self.seq_length,
                                  self.max_per_row))
            for i in range(0, len(lengths) - batch + 1, batch)]
    return (f"packed rows: {batch} examples per step in {np.mean(rows):.1f} "
            f"rows of {self.seq_length} on average (file order); "
            f"{lengths.mean() / self.seq_length:.0%} of an unpacked row is "
            "real tokens")

  def logits(self, model, split: str) -> np.ndarray:
    return self.model_outputs(model, split)["logits"]

