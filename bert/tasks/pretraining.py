"""The pre-training task: masked LM + the family's sentence task (BERT's
next sentence, ALBERT's sentence order; RoBERTa's masked LM alone).

Its losses and metrics are google-research BERT's (`bert.losses.
pretraining_stats`). In training, the sums are normalised over the global
batch (all replicas and accumulated micro-batches; see `bert.train_step`),
which for one replica and one micro-batch is the reference's per-batch loss.
"""

from typing import Optional

import gin
import numpy as np
import tensorflow as tf

from bert.data.dynamic_masking import DynamicMasker
from bert.data.pretraining_dataset import list_files, pretraining_dataset
from bert.features import ENCODER_INPUTS, PACKED_ROW_INPUTS
from bert.losses import (PRETRAINING_EPSILONS, PRETRAINING_LOSSES,
                         example_weights, pretraining_stats)
from bert.models.bert_pretrainer import BertPretrainer
from bert.tasks.base import Task
from bert.tasks.configs import EncoderSource, PretrainingInputs, or_default
from bert.validation import ConfigError


@gin.configurable
class PretrainingTask(Task):
  """Masked LM + next sentence prediction on google-research TFRecords.

  Args:
    encoder: an `EncoderSource`: `bert_config` (a preset name, config json
      path, dict of fields or BertConfig) for a model from scratch, or `init_checkpoint` (any
      loader format) to start from; `vocab_file`, if given (required for
      dynamic masking), must match the config's vocab_size.
    inputs: `PretrainingInputs`: the records, batch sizes, seed and dynamic
      masking (new masks in the pipeline for every batch; the records' static
      masks are undone first). Evaluation keeps the records' masks.
  """

  loss_names = PRETRAINING_LOSSES
  loss_epsilons = PRETRAINING_EPSILONS
  stat_names = ("masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy",
                "next_sentence_accuracy")

  def __init__(self, encoder: Optional[EncoderSource] = None,
               inputs: Optional[PretrainingInputs] = None):
    owner = "PretrainingTask"
    source = or_default(owner, "encoder", encoder, EncoderSource)
    self.inputs = inputs = or_default(owner, "inputs", inputs, PretrainingInputs)
    for name, pattern in (("train_files", inputs.train_files),
                          ("eval_files", inputs.eval_files)):
      if pattern:   # checked now, before a run creates its model_dir
        try:
          list_files(pattern)
        except (FileNotFoundError, ValueError) as e:
          raise type(e)(f"PretrainingInputs.{name}: {e}") from None
    encoder = source.load(owner, with_heads=True)
    self.config = encoder.config
    if self.config.sentence_task is None:
      # RoBERTa, DistilBERT, ELECTRA: the masked-LM objective alone.
      self.loss_names = ("masked_lm_loss",)
      self.stat_names = ("masked_lm_loss", "masked_lm_accuracy")
    self.initial_checkpoint = encoder.checkpoint
    # None where neither EncoderSource nor its checkpoint names them.
    self.vocab_file, self.lower_case = encoder.vocab_file, encoder.lower_case
    if inputs.seq_length > self.config.max_position_embeddings:
      raise ConfigError(f"{owner}: PretrainingInputs.seq_length="
                        f"{inputs.seq_length} exceeds max_position_embeddings="
                        f"{self.config.max_position_embeddings}")
    self.seq_length = inputs.seq_length
    self.max_predictions_per_seq = inputs.max_predictions_per_seq
    self.eval_batch_size = inputs.eval_batch_size or inputs.global_batch_size
    self.masker = None
    if inputs.dynamic_masking:
      if encoder.vocab_file is None:
        raise ConfigError(f"{owner}: PretrainingInputs.dynamic_masking needs "
                          "a vocab (EncoderSource.vocab_file)")
      self.masker = DynamicMasker(encoder.vocab_file,
                                  inputs.max_predictions_per_seq,
                                  inputs.masked_lm_prob,
                                  inputs.do_whole_word_mask,
                                  seed=inputs.seed or 0)

  @property
  def global_batch_size(self) -> int:
    return self.inputs.global_batch_size

  def build_model(self):
    start = self.build_checkpoint()
    if not start.has_heads:    # the pretrainer makes new ones
      return BertPretrainer(start.encoder)
    return BertPretrainer(start.encoder, start.masked_lm,
                          start.next_sentence
                          if self.config.sentence_task is not None else None)

  def build_inputs(self, input_context, training, start_step=0):
    pipelines = input_context.num_input_pipelines if input_context else 1
    inputs = self.inputs
    files = inputs.train_files if training else inputs.eval_files
    if not files:
      raise ConfigError("PretrainingInputs." + ("train_files" if training else
                                               "eval_files") + " is not set")
    return pretraining_dataset(
        files, self.seq_length, self.max_predictions_per_seq,
        inputs.global_batch_size if training else self.eval_batch_size,
        is_training=training, input_context=input_context, seed=inputs.seed,
        shuffle_buffer=inputs.shuffle_buffer,
        skip_examples=start_step * inputs.global_batch_size // pipelines
        if training else 0,
        masker=self.masker if training else None)

  def model_inputs(self, features):
    # Packed rows also carry their position ids and example starts.
    return {k: features[k] for k in ENCODER_INPUTS + ("masked_lm_positions",)
            + PACKED_ROW_INPUTS if k in features}

  def record_files(self):
    return [f for pattern in (self.inputs.train_files, self.inputs.eval_files)
            if pattern for f in list_files(pattern)]

  def describe_batch(self, features):
    files = list_files(self.inputs.train_files)
    used = sorted({int(i) for i in np.asarray(features["source_file"])})
    return "records of " + ", ".join(files[i] for i in used)

  def loss_denominators(self, features):
    dens = dict(masked_lm_loss=tf.reduce_sum(tf.cast(
        features["masked_lm_weights"], tf.float32)))
    if "next_sentence_loss" in self.loss_names:
      dens["next_sentence_loss"] = tf.reduce_sum(example_weights(
          features, tf.reshape(features["next_sentence_labels"], [-1])))
    return dens

  def compute_stats(self, features, outputs):
    return pretraining_stats(features, outputs)
