"""The concerns every fine-tuning task shares: where the encoder comes from,
how examples are batched, how long the run is, and the head."""

import dataclasses
from typing import Any, Optional, Tuple

import gin

from bert import checkpoints
from bert.config import BertConfig, resolve_bert_config
from bert.validation import (NOT_GIVEN, ConfigError, check_bool, check_float,
                             check_int, check_str, former_field)

# Task configs are frozen: a task's concerns do not change under it.
config_class = dataclasses.dataclass(frozen=True)


def set_field(obj, name, value):
  """In `__post_init__` of a frozen config: the checked (normalised) value
  replaces the given one."""
  object.__setattr__(obj, name, value)


def or_default(owner: str, name: str, value, cls):
  """`value` if it is a `cls`, a default (gin-bound) `cls()` if None."""
  if value is None:
    return cls()
  if not isinstance(value, cls):
    raise ConfigError(f"{owner}.{name} must be of type {cls.__name__}, got "
                      f"{type(value).__name__} {value!r}")
  return value


@gin.configurable
@config_class
class EncoderSource:
  """Where a task's encoder comes from.

  Attributes:
    init_checkpoint: a checkpoint folder or preset name (anything
      `bert.checkpoints.load` reads): weights, config, vocab and casing.
    bert_config: a preset name, config.json path, dict or `BertConfig`; without
      init_checkpoint the encoder's shape, with it a replacement for the
      checkpoint's config (same weight shapes, e.g. other dropout).
    vocab_file, lower_case: the vocabulary and casing; default the
      checkpoint's.
    do_lower_case: the former name of lower_case, an `__init__` argument
      only (not a field), so that saved operative_config.gin files still
      bind it.
  """
  init_checkpoint: Optional[str] = None
  bert_config: Any = None
  vocab_file: Optional[str] = None
  lower_case: Optional[bool] = None
  do_lower_case: dataclasses.InitVar[Any] = NOT_GIVEN

  def __post_init__(self, do_lower_case):
    owner = type(self).__name__
    set_field(self, "lower_case", former_field(
        owner, "lower_case", self.lower_case, "do_lower_case", do_lower_case))
    check_str(owner, "init_checkpoint", self.init_checkpoint, optional=True)
    check_str(owner, "vocab_file", self.vocab_file, optional=True)
    check_bool(owner, "lower_case", self.lower_case, optional=True)
    if not (self.bert_config is None
            or isinstance(self.bert_config, (str, dict, BertConfig))):
      raise ConfigError(f"{owner}.bert_config must be a preset name, a config "
                        "json path, a dict of fields or a BertConfig, got "
                        f"{self.bert_config!r}")

  def load(self, owner: str, with_heads: bool = False) -> "Encoder":
    """The encoder's config, vocab, casing and checkpoint, read and checked
    now (`bert.checkpoints.read`: no variable built), so a bad checkpoint
    fails before any data is read; `with_heads`: with its pre-training
    heads. `owner` names the task in errors. The vocab, when known, must
    match the config's vocab_size, and a replacing bert_config the
    checkpoint's weight shapes."""
    ckpt = (checkpoints.read(self.init_checkpoint, with_heads=with_heads)
            if self.init_checkpoint else None)
    if self.bert_config is not None:
      try:
        config = resolve_bert_config(self.bert_config)
      except (ConfigError, FileNotFoundError) as e:   # which field, and why
        raise type(e)(f"{owner}: EncoderSource.bert_config: {e}") from None
      if ckpt is not None:
        checkpoints.check_same_shapes(ckpt.config, config, ckpt.folder)
    elif ckpt is not None:
      config = ckpt.config
    else:
      raise ConfigError(f"{owner} needs EncoderSource.init_checkpoint or "
                        "EncoderSource.bert_config")
    vocab_file = self.vocab_file or (ckpt.vocab_file if ckpt else None)
    lower_case = self.lower_case
    if lower_case is None and ckpt is not None:
      lower_case = ckpt.lower_case
    if vocab_file is not None:
      checkpoints.check_vocab_size(vocab_file, config)
    return Encoder(config, vocab_file, lower_case, ckpt)



@config_class
class Encoder:
  """An `EncoderSource` read: `config`, `vocab_file` and `lower_case`
  (None where neither the source nor its checkpoint gives them), and the
  checked `checkpoint` (a `bert.checkpoints.CheckedCheckpoint`, None without
  init_checkpoint) the task's model is built from."""
  config: BertConfig
  vocab_file: Optional[str]
  lower_case: Optional[bool]
  checkpoint: Any


@gin.configurable
@config_class
class FinetuningInputs:
  """How a fine-tuning task's encoded examples are batched.

  Attributes:
    seq_length: the length examples are encoded to; None: the task's default
      (128; SQuAD 384).
    global_batch_size, eval_batch_size: examples per training step and per
      evaluation batch.
    length_buckets: the lengths batches are cut to (each batch to the
      smallest one that holds its longest row); None:
      `default_length_buckets(seq_length)`; `[seq_length]` turns cutting off.
    group_by_length: training batches hold examples of one bucket (seeded,
      like the shuffle), so short examples are not padded to long ones.
    pack: training batches and predictions in packed rows (tasks with
      `packable = True`; `bert.data.packing`): a step sees the same examples
      and computes the same loss, on fewer positions.
    max_per_row: the most examples in one packed row.
    pack_length: the length of packed rows, <= seq_length. None: the length
      bucket that holds the longest example at the least estimated cost
      (`bert.data.packing.choose_row_length`): short examples go into short
      rows, where attention spans fewer positions. Packing never changes a
      loss or an output, only the cost.
    seed: the training shuffle (and SQuAD's article split).
    records: a folder of `bert-create-finetuning-data`: the splits are
      streamed from its TFRecords instead of encoded from the task's files
      into memory (same rows, same batches; memory bounded by
      `shuffle_buffer`). None: encoded in memory.
    shuffle_buffer: rows shuffled at a time in each input lane (all of them
      when the lane has fewer): one semantic for both sources, so memory and
      TFRecords give the same batches.
    lanes: the training stream is `lanes` interleaved streams, lane j over
      rows j, j + lanes, ... (each shuffled with seed + j), every step taking
      global_batch_size / lanes rows from each. The order depends on lanes,
      never on the number of workers: a run with lanes=L gives the same
      global batches on 1 worker or on any number that divides L (each
      reads only its lanes' TFRecord files). None: one lane per input
      pipeline.
  """
  seq_length: Optional[int] = None
  global_batch_size: int = 32
  eval_batch_size: int = 64
  length_buckets: Optional[Tuple[int, ...]] = None
  group_by_length: bool = True
  pack: bool = False
  max_per_row: int = 8
  pack_length: Optional[int] = None
  seed: int = 42
  records: Optional[str] = None
  shuffle_buffer: int = 100_000
  lanes: Optional[int] = None

  def __post_init__(self):
    owner = type(self).__name__
    seq_length = check_int(owner, "seq_length", self.seq_length, minimum=1,
                           optional=True)
    if seq_length is not None and seq_length < 3:
      raise ConfigError(f"{owner}.seq_length={seq_length} leaves no room for "
                        "a token between [CLS] and [SEP]; use >= 3")
    for name in ("global_batch_size", "eval_batch_size", "max_per_row"):
      check_int(owner, name, getattr(self, name), minimum=1)
    check_int(owner, "pack_length", self.pack_length, minimum=1, optional=True)
    check_int(owner, "seed", self.seed, minimum=0)
    check_int(owner, "shuffle_buffer", self.shuffle_buffer, minimum=1)
    lanes = check_int(owner, "lanes", self.lanes, minimum=1, optional=True)
    if lanes is not None and self.global_batch_size % lanes:
      raise ConfigError(f"{owner}.lanes={lanes} does not divide "
                        f"global_batch_size={self.global_batch_size}")
    if self.records is not None and not isinstance(self.records, str):
      raise ConfigError(f"{owner}.records must be a folder path, got "
                        f"{self.records!r}")
    check_bool(owner, "group_by_length", self.group_by_length)
    check_bool(owner, "pack", self.pack)
    if self.length_buckets is not None:   # checked against seq_length by the task
      buckets = self.length_buckets
      if isinstance(buckets, (str, bytes)) or not hasattr(buckets, "__iter__"):
        raise ConfigError(f"{owner}.length_buckets must be a list of lengths, "
                          f"got {buckets!r}")
      set_field(self, "length_buckets", tuple(buckets))


@gin.configurable
@config_class
class ScheduleConfig:
  """How long fine-tuning runs.

  Attributes:
    num_train_epochs: passes over the training data; sets the run length when
      `RuntimeConfig.train_steps` is not given.
  """
  num_train_epochs: float = 3.0

  def __post_init__(self):
    check_float(type(self).__name__, "num_train_epochs",
                self.num_train_epochs, 0, min_open=True)


@gin.configurable
@config_class
class HeadConfig:
  """The task head on the encoder.

  Attributes:
    dropout_rate: dropout before the head's dense layer.
  """
  dropout_rate: float = 0.1

  def __post_init__(self):
    check_float(type(self).__name__, "dropout_rate", self.dropout_rate, 0, 1,
                max_open=True)
