"""What every fine-tuning task shares: the starting checkpoint, its tokenizer,
in-memory encoded data and the input pipeline over it."""

import math
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from bert.data.tokenization import Tokenizer
from bert.tasks.base import Task
from bert.tasks.pretraining import resolve_bert_config


class FinetuningTask(Task):
  """Base of tasks fine-tuned from a checkpoint on data encoded in memory.

  Subclasses implement `encode(split)` -> dict of NumPy arrays (one row per
  model input row) and the model/loss methods of `Task`.

  Args:
    init_checkpoint: a checkpoint folder (any format bert.checkpoints.load
      reads); gives the encoder weights, config, vocab and casing.
    bert_config, vocab_file, do_lower_case: without init_checkpoint (or to
      override its vocab/casing).
  """

  def __init__(self, init_checkpoint: Optional[str] = None, bert_config=None,
               vocab_file: Optional[str] = None,
               do_lower_case: Optional[bool] = None, seq_length: int = 128,
               global_batch_size: int = 32, eval_batch_size: int = 64,
               num_train_epochs: float = 3.0, dropout_rate: float = 0.1,
               seed: int = 42):
    name = type(self).__name__
    self._init_weights = None
    if init_checkpoint:
      from bert import checkpoints  # pylint: disable=g-import-not-at-top
      ckpt = checkpoints.load(init_checkpoint)
      self.config = ckpt.config
      self._init_weights = ckpt.encoder.get_weights()
      vocab_file = vocab_file or ckpt.vocab_file
      if do_lower_case is None:
        do_lower_case = ckpt.do_lower_case
    else:
      if bert_config is None:
        raise ValueError(f"{name} needs init_checkpoint or bert_config")
      self.config = resolve_bert_config(bert_config)
    if vocab_file is None:
      raise ValueError(f"{name}: no vocab (the checkpoint has no vocab.txt; "
                       "set vocab_file)")
    if do_lower_case is None:
      raise ValueError(f"{name}: casing of {vocab_file} unknown; set do_lower_case")
    if seq_length > self.config.max_position_embeddings:
      raise ValueError(f"{name}.seq_length={seq_length} exceeds "
                       f"max_position_embeddings={self.config.max_position_embeddings}")
    self.tokenizer = Tokenizer(vocab_file, lower_case=do_lower_case)
    size = self.tokenizer.get_special_tokens_dict()["vocab_size"]
    if size != self.config.vocab_size:
      raise ValueError(f"vocab {vocab_file} has {size} tokens but the model's "
                       f"vocab_size is {self.config.vocab_size}")
    self.seq_length = seq_length
    self._global_batch_size = global_batch_size
    self.eval_batch_size = eval_batch_size
    self.num_train_epochs = num_train_epochs
    self.dropout_rate = dropout_rate
    self.seed = seed
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
    n = len(self.features("train")["input_word_ids"])
    return max(1, int(math.ceil(n * self.num_train_epochs / self._global_batch_size)))

  def build_inputs(self, input_context, training, start_step=0):
    """Training: shuffled (seeded, reshuffled each epoch), repeated, starting
    at `start_step`; evaluation: one ordered pass."""
    data = self.features("train" if training else "eval")
    ds = tf.data.Dataset.from_tensor_slices(data)
    pipelines = input_context.num_input_pipelines if input_context else 1
    if pipelines > 1:
      ds = ds.shard(pipelines, input_context.input_pipeline_id)
    if training:
      batch = (input_context.get_per_replica_batch_size(self._global_batch_size)
               if input_context else self._global_batch_size)
      ds = ds.shuffle(len(data["input_word_ids"]), seed=self.seed,
                      reshuffle_each_iteration=True).repeat()
      ds = ds.skip(start_step * self._global_batch_size // pipelines)
      ds = ds.batch(batch, drop_remainder=True)
    else:
      ds = ds.batch(self.eval_batch_size)
    return ds.prefetch(tf.data.AUTOTUNE)

  def initialize(self, model):
    if self._init_weights is not None:
      model.encoder.set_weights(self._init_weights)

  def model_inputs(self, features):
    return {k: features[k] for k in ("input_word_ids", "input_mask",
                                     "input_type_ids")}

  def model_outputs(self, model, split: str) -> Dict[str, np.ndarray]:
    """The model's outputs on a whole split (inference, in order)."""
    ds = tf.data.Dataset.from_tensor_slices(self.model_inputs(self.features(split)))
    parts = [{k: v.numpy() for k, v in model(batch, training=False).items()}
             for batch in ds.batch(self.eval_batch_size)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

  def logits(self, model, split: str) -> np.ndarray:
    return self.model_outputs(model, split)["logits"]
