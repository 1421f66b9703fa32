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

from typing import Dict, Mapping, Optional

import gin
import numpy as np
import tensorflow as tf

from bert.data.dynamic_masking import DynamicMasker
from bert.data.pretraining_dataset import list_files, pretraining_dataset
from bert.features import ENCODER_INPUTS, PACKED_ROW_INPUTS
from bert.models.bert_pretrainer import BertPretrainer
from bert.networks.bert_encoder import BertEncoder
from bert.tasks.base import Stats, Task, example_weights, softmax_stats
from bert.tasks.configs import EncoderSource, PretrainingInputs, or_default
from bert.validation import ConfigError


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
    encoder: an `EncoderSource`: `bert_config` (a preset name, config json
      path, dict of fields or BertConfig) for a model from scratch, or `init_checkpoint` (any
      loader format) to start from; `vocab_file`, if given (required for
      dynamic masking), must match the config's vocab_size.
    inputs: `PretrainingInputs`: the records, batch sizes, seed and dynamic
      masking (new masks in the pipeline for every batch; the records' static
      masks are undone first). Evaluation keeps the records' masks.
  """

  loss_names = ("masked_lm_loss", "next_sentence_loss")
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
    return BertPretrainer(BertEncoder(self.config))

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
    return dict(
        masked_lm_loss=tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                             tf.float32)),
        next_sentence_loss=tf.reduce_sum(example_weights(
            features, tf.reshape(features["next_sentence_labels"], [-1]))))

  def compute_stats(self, features, outputs):
    return pretraining_stats(features, outputs)
