"""ELECTRA pre-training: replaced-token detection (`ElectraPretrainer`) on
the pre-training records, masks drawn anew for every batch.

The generator's masked LM and the discriminator's per-token loss are
`bert.losses.electra_pretraining_stats`; the loop minimises their sum with
the discriminator's weighed by `discriminator_weight`, each normalised over
the global batch as for BERT (`bert.train_step`).
"""

from typing import Optional

import gin
import tensorflow as tf

from bert.features import ENCODER_INPUTS, PACKED_ROW_INPUTS
from bert.losses import (ELECTRA_LOSSES, ELECTRA_STATS, PRETRAINING_EPSILONS,
                         electra_pretraining_stats, real_tokens)
from bert.models.electra_pretrainer import (DISCRIMINATOR_WEIGHT,
                                            GENERATOR_FRACTION,
                                            MASKED_LM_INPUTS,
                                            ElectraPretrainer)
from bert.tasks.configs import EncoderSource, PretrainingInputs
from bert.tasks.pretraining import PretrainingTask
from bert.validation import ConfigError, check_float


@gin.configurable
class ElectraPretrainingTask(PretrainingTask):
  """ELECTRA's objective on google-research pre-training TFRecords.

  Args:
    encoder: an `EncoderSource`: the discriminator's config (its family
      "electra" for a Hugging Face ELECTRA folder afterwards) or a
      checkpoint to start from (an ELECTRA discriminator's head is taken
      when it has one); `vocab_file` is required (dynamic masking).
    inputs: `PretrainingInputs` with `dynamic_masking=True`: the training
      masks come from `DynamicMasker` (evaluation keeps the records' masks);
      the original ids at the masked positions are `masked_lm_ids`.
    generator_fraction: the generator's hidden size, heads and intermediate
      size relative to the discriminator's (ELECTRA: 1/4).
    discriminator_weight: lambda, the discriminator loss's weight (50).
  """

  loss_names = ELECTRA_LOSSES
  loss_epsilons = PRETRAINING_EPSILONS
  stat_names = ELECTRA_STATS

  def __init__(self, encoder: Optional[EncoderSource] = None,
               inputs: Optional[PretrainingInputs] = None,
               generator_fraction: float = GENERATOR_FRACTION,
               discriminator_weight: float = DISCRIMINATOR_WEIGHT):
    owner = "ElectraPretrainingTask"
    check_float(owner, "generator_fraction", generator_fraction, 0, 1,
                min_open=True)
    check_float(owner, "discriminator_weight", discriminator_weight, 0)
    super().__init__(encoder=encoder, inputs=inputs)
    if self.masker is None:
      raise ConfigError(f"{owner}: needs PretrainingInputs.dynamic_masking="
                        "True (the generator's masks are drawn per batch)")
    # PretrainingTask set the masked-LM objective's names; these are ours.
    self.loss_names = ELECTRA_LOSSES
    self.stat_names = ELECTRA_STATS
    self.generator_fraction = generator_fraction
    self.discriminator_weight = discriminator_weight

  def build_model(self):
    start = self.build_checkpoint()
    return ElectraPretrainer(start.encoder,
                             generator_fraction=self.generator_fraction,
                             discriminator_weight=self.discriminator_weight,
                             seed=self.inputs.seed or 0,
                             discriminator=start.discriminator)

  def model_inputs(self, features):
    return {k: features[k] for k in ENCODER_INPUTS + MASKED_LM_INPUTS
            + PACKED_ROW_INPUTS if k in features}

  def loss_denominators(self, features):
    return dict(
        masked_lm_loss=tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                             tf.float32)),
        weighted_discriminator_loss=tf.reduce_sum(real_tokens(features)))

  def compute_stats(self, features, outputs):
    return electra_pretraining_stats(features, outputs,
                                     self.discriminator_weight)
