"""The model-facing half of every fine-tuning task: the encoder it starts
from, its tokenizer, and the task interface over `EncodedInputs` (the input
pipeline, `bert.tasks.encoded_inputs`).
"""

from typing import Dict, List, Optional, Sequence

import numpy as np

from bert.data import length_buckets as lb
from bert.data.finetuning_records import FinetuningRecords
from bert.data.tokenization import shared_tokenizer
from bert.features import ENCODER_INPUTS, PACKED_ROW_INPUTS
from bert.tasks.base import Task
from bert.tasks.configs import (DataFiles, EncoderSource, FinetuningInputs,
                                HeadConfig, ScheduleConfig, or_default)
from bert.tasks.encoded_inputs import EncodedInputs
from bert.validation import ConfigError


class FinetuningTask(Task):
  """Base of tasks fine-tuned from a checkpoint on data encoded in memory.

  Subclasses implement `encode(split)` -> dict of NumPy arrays (one row per
  model input row) and the model/loss methods of `Task`, and pass their data
  config (a `DataFiles`) to this constructor.

  Subclasses name in `sequence_outputs` the model outputs that have a
  sequence axis (axis 1), so predictions of cut batches are padded back to
  `seq_length`.

  Args (each a config of `bert.tasks.configs`; None: built from gin):
    data: the task's files (`self.files`: split -> path).
    encoder: an `EncoderSource`: the starting checkpoint (weights, config,
      vocab, casing), or a config and vocab.
    inputs: `FinetuningInputs`: sequence length, batches, buckets, packing.
    head: `HeadConfig`.
    schedule: `ScheduleConfig`.
  """

  # Whether `inputs.pack=True` works: the model and loss handle packed rows.
  packable = False
  # Fill values of per-token features between packed examples.
  pack_pad_values: Dict[str, int] = {}
  # `FinetuningInputs.seq_length` when it is None.
  default_seq_length = 128

  # Model outputs with a sequence axis at axis 1 (e.g. per-token logits).
  sequence_outputs: Sequence[str] = ()

  def __init__(self, data: DataFiles, encoder: Optional[EncoderSource] = None,
               inputs: Optional[FinetuningInputs] = None,
               head: Optional[HeadConfig] = None,
               schedule: Optional[ScheduleConfig] = None):
    name = type(self).__name__
    self.data = data
    self.files = data.paths()
    self.inputs = or_default(name, "inputs", inputs, FinetuningInputs)
    self.head = or_default(name, "head", head, HeadConfig)
    self.schedule = or_default(name, "schedule", schedule, ScheduleConfig)
    source = or_default(name, "encoder", encoder, EncoderSource)
    if self.inputs.pack and not self.packable:
      raise ConfigError(f"{name}: FinetuningInputs.pack=True, but this task "
                        "does not support packed rows (classification and "
                        "token classification do)")
    self.seq_length = self.inputs.seq_length or self.default_seq_length
    self.length_buckets = lb.check_length_buckets(
        lb.default_length_buckets(self.seq_length)
        if self.inputs.length_buckets is None else self.inputs.length_buckets,
        self.seq_length, "FinetuningInputs.length_buckets")
    encoder = source.load(name)   # a bad checkpoint fails before data is read
    self.config = encoder.config
    self.initial_checkpoint = encoder.checkpoint
    if encoder.vocab_file is None:
      raise ConfigError(f"{name}: no vocab (the checkpoint has no vocab.txt; "
                        "set EncoderSource.vocab_file)")
    if encoder.lower_case is None:
      raise ConfigError(f"{name}: casing of {encoder.vocab_file} unknown; set "
                        "EncoderSource.lower_case")
    if self.seq_length > self.config.max_position_embeddings:
      raise ConfigError(f"{name}: FinetuningInputs.seq_length={self.seq_length}"
                        " exceeds max_position_embeddings="
                        f"{self.config.max_position_embeddings}")
    self.vocab_file, self.lower_case = encoder.vocab_file, encoder.lower_case
    self.tokenizer = shared_tokenizer(encoder.vocab_file, encoder.lower_case)
    records = None
    if self.inputs.records is not None:
      records = FinetuningRecords(self.inputs.records)
      records.check(name, self.records_task_name(), encoder.vocab_file,
                    encoder.lower_case, self.seq_length)
    self.pipeline = EncodedInputs(self.encode, self.inputs, self.seq_length,
                                  self.length_buckets, self.pack_pad_values,
                                  name, self.config.hidden_size,
                                  records=records)

  def records_task_name(self) -> str:
    """What `bert-create-finetuning-data` records as the writer of this
    task's rows, and what reading them back requires: the task class and
    what decides its encoding (the data layout)."""
    return type(self).__name__

  @property
  def global_batch_size(self) -> int:
    return self.inputs.global_batch_size

  def encode(self, split: str) -> Dict[str, np.ndarray]:
    """Model inputs and labels of "train", "eval" or "predict"."""
    raise NotImplementedError

  def features(self, split: str) -> Dict[str, np.ndarray]:
    """`encode(split)`, computed once."""
    return self.pipeline.features(split)

  def num_train_steps(self) -> int:
    return self.pipeline.num_train_steps(self.schedule.num_train_epochs)

  def build_inputs(self, input_context, training, start_step=0):
    """See `EncodedInputs.dataset`."""
    return self.pipeline.dataset(input_context, training, start_step)

  def source_file(self, split: str) -> str:
    """The file a split is read from."""
    return self.files.get(split, "")

  def row_origins(self, split: str) -> List[str]:
    """For each encoded row of `split`, where in its file it comes from."""
    return [f"row {i}" for i in range(self.pipeline.num_rows(split))]

  def record_files(self):
    records = self.pipeline.records
    return ([f for split in records.splits for f in records.files(split)]
            if records is not None else [])

  def describe_batch(self, features) -> str:
    """The training examples of a batch, by file and line (or id); from
    TFRecords, by row of the records' train split."""
    rows = np.asarray(features["example_row"])
    if "packed_example_mask" in features:   # [rows, k]: the filled slots
      rows = rows[np.asarray(features["packed_example_mask"]) > 0]
    rows = [int(r) for r in rows.reshape(-1)]
    if self.pipeline.records is not None:
      origins, source = None, f"{self.pipeline.records.folder} (train split)"
    else:
      origins, source = self.row_origins("train"), self.source_file("train")
    shown = ", ".join(origins[r] if origins else f"row {r}" for r in rows[:10])
    more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
    return f"{source}: {shown}{more}"

  def preprocessor(self):
    """The `preprocessor` of this task's model on the Keras path (raw inputs
    -> model inputs, outputs -> predictions), with this task's vocabulary,
    casing, seq_length and labels; None where the model has none."""
    return None

  def _preprocessor_args(self):
    return dict(vocabulary=self.tokenizer.vocabulary,
                lower_case=self.tokenizer.lower_case,
                seq_length=self.seq_length, length_buckets=self.length_buckets)

  def model_inputs(self, features):
    # Packed rows also carry their position ids and example starts.
    return {k: features[k] for k in ENCODER_INPUTS + PACKED_ROW_INPUTS
            if k in features}

  def model_outputs(self, model, split: str) -> Dict[str, np.ndarray]:
    """The model's outputs on a whole split (in row order), with
    `sequence_outputs` at full `seq_length`."""
    return self.pipeline.split_outputs(model, split, self.model_inputs,
                                       self.sequence_outputs)

  def logits(self, model, split: str) -> np.ndarray:
    return self.model_outputs(model, split)["logits"]

