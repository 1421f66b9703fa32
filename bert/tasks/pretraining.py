"""The pre-training task (masked LM + next sentence) and its losses.

Losses and metrics exactly as google-research BERT:
masked LM: cross-entropy at the masked positions, weighted by
  `masked_lm_weights` (1 for a real prediction, 0 for padding), summed and
  divided by sum(weights) + 1e-5 (`run_pretraining.get_masked_lm_output`);
next sentence: mean cross-entropy over the batch (label 1 = random next);
total = masked LM + next sentence. In training, the sums are normalised over
the global batch (all replicas and accumulated micro-batches; see
`bert.tasks.base`), which for one replica and one micro-batch is the
reference's per-batch loss.
"""

from typing import Dict, Mapping, Optional, Union

import gin
import numpy as np
import tensorflow as tf

from bert.checkpoints import check_vocab_size, init_from_checkpoint
from bert.config import BertConfig, resolve_bert_config
from bert.data.dynamic_masking import DynamicMasker
from bert.data.pretraining_dataset import list_files, pretraining_dataset
from bert.features import ENCODER_INPUTS, PACKED_ROW_INPUTS
from bert.models.bert_pretrainer import BertPretrainer
from bert.networks.bert_encoder import BertEncoder
from bert.tasks.base import Stats, Task, example_weights, softmax_stats
from bert.validation import (ConfigError, check_bool, check_float, check_int,
                             check_str)


def pretraining_stats(features: Mapping[str, tf.Tensor],
                      outputs: Mapping[str, tf.Tensor]) -> Stats:
  """(numerator, denominator) sums of one batch, for losses and accuracies.

  `masked_lm_*` are over real predictions (`masked_lm_weights`), `next_
  sentence_*` over examples. Dividing each numerator by its denominator
  (+1e-5 for the masked-LM loss) gives the reference's per-batch values.
  """
  mlm_logits = tf.cast(outputs["masked_lm_logits"], tf.float32)   # [b, P, V]
  # [b, 2], or [b, k, 2] for packed rows: flattened to one per example.
  nsp_logits = tf.reshape(tf.cast(outputs["next_sentence_logits"], tf.float32),
                          [-1, 2])
  nsp_labels = tf.reshape(features["next_sentence_labels"], [-1])
  mlm = softmax_stats(mlm_logits, features["masked_lm_ids"],
                      features["masked_lm_weights"])          # over [b, P]
  nsp = softmax_stats(nsp_logits, nsp_labels,
                      example_weights(features, nsp_labels))  # over [b]
  return dict(masked_lm_loss=mlm["loss"], next_sentence_loss=nsp["loss"],
              masked_lm_accuracy=mlm["accuracy"],
              next_sentence_accuracy=nsp["accuracy"])


def pretraining_losses(features: Dict[str, tf.Tensor],
                       outputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """Losses and accuracies of one batch, as the reference computes them.

  Args:
    features: `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`
      (the google-research TFRecord feature names).
    outputs: `BertPretrainer` outputs.
  Returns:
    dict with `loss` (the total), `masked_lm_loss`, `next_sentence_loss`,
    `masked_lm_accuracy` (over real predictions) and `next_sentence_accuracy`.
  """
  return batch_values(pretraining_stats(features, outputs))


def batch_values(stats: Stats) -> Dict[str, tf.Tensor]:
  """The reference's per-batch losses and accuracies from the sums, with
  `loss` = masked-LM loss + next-sentence loss."""
  num, den = stats["masked_lm_loss"]
  out = dict(masked_lm_loss=num / (den + 1e-5))
  for name in ("next_sentence_loss", "masked_lm_accuracy", "next_sentence_accuracy"):
    num, den = stats[name]
    out[name] = num / tf.maximum(den, 1.0)
  out["loss"] = out["masked_lm_loss"] + out["next_sentence_loss"]
  return out


@gin.configurable
class PretrainingTask(Task):
  """Masked LM + next sentence prediction on google-research TFRecords.

  Args:
    bert_config: a preset name ("bert_tiny", ...), a config json path, or a
      BertConfig.
    train_files, eval_files: TFRecord globs (comma-separated lists allowed).
    seq_length, max_predictions_per_seq: as the records were written.
    global_batch_size: examples per step over all replicas.
    init_checkpoint: a checkpoint folder to start from (any loader format).
    vocab_file: if given, its size must equal the config's vocab_size.
      Required for dynamic masking.
    seed: data order, shuffling and dynamic masks.
    dynamic_masking: draw new masks in the pipeline for every batch (any
      records; their static masks are undone first), with `masked_lm_prob`
      and `do_whole_word_mask`. Evaluation keeps the records' masks.
  """

  loss_names = ("masked_lm_loss", "next_sentence_loss")
  stat_names = ("masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy",
                "next_sentence_accuracy")

  def __init__(self, bert_config: Union[str, BertConfig] = "bert_tiny",
               train_files: str = "", eval_files: str = "",
               seq_length: int = 128, max_predictions_per_seq: int = 20,
               global_batch_size: int = 32, eval_batch_size: Optional[int] = None,
               init_checkpoint: Optional[str] = None,
               vocab_file: Optional[str] = None, seed: Optional[int] = 42,
               shuffle_buffer: int = 10_000, dynamic_masking: bool = False,
               masked_lm_prob: float = 0.15, do_whole_word_mask: bool = False):
    owner = "PretrainingTask"
    for name, value in (("seq_length", seq_length),
                        ("max_predictions_per_seq", max_predictions_per_seq),
                        ("global_batch_size", global_batch_size),
                        ("shuffle_buffer", shuffle_buffer)):
      check_int(owner, name, value, minimum=1)
    check_int(owner, "eval_batch_size", eval_batch_size, minimum=1,
              optional=True)
    check_int(owner, "seed", seed, minimum=0, optional=True)
    check_float(owner, "masked_lm_prob", masked_lm_prob, 0, 1, min_open=True)
    check_bool(owner, "dynamic_masking", dynamic_masking)
    check_bool(owner, "do_whole_word_mask", do_whole_word_mask)
    for name, value in (("train_files", train_files),
                        ("eval_files", eval_files)):
      check_str(owner, name, value)
    check_str(owner, "init_checkpoint", init_checkpoint, optional=True)
    check_str(owner, "vocab_file", vocab_file, optional=True)
    if max_predictions_per_seq > seq_length:
      raise ConfigError(f"PretrainingTask.max_predictions_per_seq="
                        f"{max_predictions_per_seq} exceeds seq_length="
                        f"{seq_length}")
    self.config = resolve_bert_config(bert_config)
    if seq_length > self.config.max_position_embeddings:
      raise ConfigError(f"PretrainingTask.seq_length={seq_length} exceeds "
                        "max_position_embeddings="
                        f"{self.config.max_position_embeddings}")
    if vocab_file is not None:
      check_vocab_size(vocab_file, self.config)
    for name, pattern in (("train_files", train_files),
                          ("eval_files", eval_files)):
      if pattern:   # checked now, before a run creates its model_dir
        try:
          list_files(pattern)
        except (FileNotFoundError, ValueError) as e:
          raise type(e)(f"PretrainingTask.{name}: {e}") from None
    self.train_files = train_files
    self.eval_files = eval_files
    self.seq_length = seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    self._global_batch_size = global_batch_size
    self.eval_batch_size = eval_batch_size or global_batch_size
    self.init_checkpoint = init_checkpoint
    self.seed = seed
    self.shuffle_buffer = shuffle_buffer
    self.masker = None
    if dynamic_masking:
      if vocab_file is None:
        raise ConfigError("PretrainingTask.dynamic_masking needs vocab_file")
      self.masker = DynamicMasker(vocab_file, max_predictions_per_seq,
                                  masked_lm_prob, do_whole_word_mask,
                                  seed=seed or 0)

  @property
  def global_batch_size(self) -> int:
    return self._global_batch_size

  def build_model(self):
    return BertPretrainer(BertEncoder(self.config))

  def build_inputs(self, input_context, training, start_step=0):
    pipelines = input_context.num_input_pipelines if input_context else 1
    files = self.train_files if training else self.eval_files
    if not files:
      raise ConfigError("PretrainingTask." + ("train_files" if training else
                                             "eval_files") + " is not set")
    return pretraining_dataset(
        files, self.seq_length, self.max_predictions_per_seq,
        self._global_batch_size if training else self.eval_batch_size,
        is_training=training, input_context=input_context, seed=self.seed,
        shuffle_buffer=self.shuffle_buffer,
        skip_examples=start_step * self._global_batch_size // pipelines
        if training else 0,
        masker=self.masker if training else None)

  def model_inputs(self, features):
    # Packed rows also carry their position ids and example starts.
    return {k: features[k] for k in ENCODER_INPUTS + ("masked_lm_positions",)
            + PACKED_ROW_INPUTS if k in features}

  def describe_batch(self, features):
    files = list_files(self.train_files)
    used = sorted({int(i) for i in np.asarray(features["source_file"])})
    return "records of " + ", ".join(files[i] for i in used)

  def loss_denominators(self, features):
    return dict(
        masked_lm_loss=tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                             tf.float32)),
        next_sentence_loss=tf.reduce_sum(example_weights(
            features, tf.reshape(features["next_sentence_labels"], [-1]))))

  def compute_stats(self, features, outputs):
    return pretraining_stats(features, outputs)

  def initialize(self, model):
    if self.init_checkpoint:
      init_from_checkpoint(model, self.init_checkpoint)
