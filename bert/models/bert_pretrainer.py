"""`BertPretrainer`: encoder + masked-LM head (+ the family's sentence head:
BERT's next sentence, ALBERT's sentence order)."""

from typing import Optional

import tensorflow as tf
import tf_keras

from bert import losses
from bert.layers.classification_head import ClassificationHead
from bert.layers.masked_lm_head import MaskedLMHead
from bert.models._base import EncoderModel, per_example
from bert.networks.encoder_scaffold import EncoderScaffold
from bert.networks.pretraining_heads import build_pretraining_heads, check_tied


@tf_keras.utils.register_keras_serializable(package="bert")
class BertPretrainer(EncoderModel):
  """The pre-training model: a BERT encoder and its two heads.

  Inputs: the encoder's dict plus `masked_lm_positions` int32 [batch, P].
  Outputs: `masked_lm_logits` float32 [batch, P, vocab] (computed only at the
  given positions), `next_sentence_logits` float32 [batch, 2], and the
  encoder's `sequence_output` and `pooled_output`. Packed rows (with
  `input_positions` and `cls_positions` [batch, k], see `bert.data.packing`):
  `masked_lm_positions` index the packed row, and `next_sentence_logits`
  are [batch, k, 2], one per packed example.

  The masked-LM head is tied to the encoder's word embeddings; `from_config`
  rebuilds the encoder first and ties a new head to it, so the tie survives
  serialisation.

  A family without a sentence task (RoBERTa, DistilBERT, ELECTRA:
  `config.sentence_task` None) has the masked-LM head alone: no
  `next_sentence_logits`, and the loss is the masked-LM loss.
  """

  extra_inputs = ("masked_lm_positions",)
  _needs_pretraining_heads = True

  @classmethod
  def _from_checkpoint(cls, checkpoint, labels=None, **head_args):
    """With the checkpoint's pre-training heads when it has them."""
    del labels
    if checkpoint.has_heads:
      head_args.update(masked_lm=checkpoint.masked_lm,
                       next_sentence=checkpoint.next_sentence)
    return cls(checkpoint.encoder, **head_args)

  def __init__(self, encoder: EncoderScaffold,
               masked_lm: Optional[MaskedLMHead] = None,
               next_sentence: Optional[ClassificationHead] = None, **kwargs):
    config = getattr(encoder, "config", None)
    sentence = getattr(config, "sentence_task", "nsp") is not None
    if sentence and (masked_lm is None) != (next_sentence is None):
      raise ValueError("give both masked_lm and next_sentence heads, or neither")
    if not sentence and next_sentence is not None:
      raise ValueError(f"a {config.family} encoder has no sentence task: "
                       "give masked_lm alone")
    if masked_lm is None:
      masked_lm, next_sentence = build_pretraining_heads(
          encoder, next_sentence=sentence)
    else:
      check_tied(masked_lm, encoder)
    kwargs.setdefault("name", "bert_pretrainer")
    super().__init__(encoder, **kwargs)
    self.masked_lm = masked_lm
    self.next_sentence = next_sentence
    if next_sentence is None:
      self.stat_names = ("loss", "masked_lm_loss", "masked_lm_accuracy")
      self.loss_names = ("masked_lm_loss",)
    self._built_with({})

  # ---------------------------------------------- Keras training (compile)
  stat_names = ("loss", "masked_lm_loss", "next_sentence_loss",
                "masked_lm_accuracy", "next_sentence_accuracy")
  loss_names = losses.PRETRAINING_LOSSES
  loss_epsilons = losses.PRETRAINING_EPSILONS
  main_output = "masked_lm_logits"

  def objective(self, x, y, outputs):
    """y: {"masked_lm_ids", "masked_lm_weights", "next_sentence_labels"}
    (the google-research feature names); the loss is the reference's
    masked-LM loss + next-sentence loss of the batch."""
    stats = losses.pretraining_stats(dict(x, **y), outputs)
    stats["loss"] = (losses.batch_values(stats)["loss"], tf.constant(1.0))
    return stats

  def call(self, inputs, training=None):
    outputs = self._encode(inputs, training)
    sequence = outputs["sequence_output"]                    # [b, s, h]
    result = dict(
        masked_lm_logits=self.masked_lm(sequence, inputs["masked_lm_positions"]),
        sequence_output=sequence,
        pooled_output=outputs["pooled_output"])
    if self.next_sentence is not None:
      result["next_sentence_logits"] = per_example(
          self.next_sentence, outputs["pooled_output"], training)
    return result
