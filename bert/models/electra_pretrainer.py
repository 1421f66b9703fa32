"""`ElectraPretrainer`: ELECTRA's replaced-token detection (Clark et al.,
2020): a small generator fills the masked positions with its own samples
and the discriminator tells, for every token, whether it was replaced."""

from typing import Optional

import tensorflow as tf
import tf_keras

from bert import losses
from bert.checkpoints.loader import BertCheckpoint, build_discriminator_head
from bert.layers.discriminator_head import DiscriminatorHead
from bert.layers.masked_lm_head import MaskedLMHead
from bert.models._base import EncoderModel
from bert.networks.electra_generator import build_generator
from bert.networks.encoder_scaffold import EncoderScaffold, encoder_inputs

# google-research ELECTRA's defaults (configure_pretraining.py): the
# generator's hidden size is 1/4 of the discriminator's ("generator_hidden_
# size = 0.25"; the paper's Table 6, "Generator Size (multiplier for
# hidden-size, FFN-size, and num-attention-heads)": 1/4 for Small and Large,
# 1/3 for Base), and the discriminator loss weighs lambda = 50 ("disc_weight
# = 50.0"; the paper's Section 2 and Table 6).
GENERATOR_FRACTION = 0.25
DISCRIMINATOR_WEIGHT = 50.0
MASKED_LM_INPUTS = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


@tf_keras.utils.register_keras_serializable(package="bert")
class ElectraPretrainer(EncoderModel):
  """ELECTRA pre-training: generator + tied masked-LM head, discriminator
  (`encoder`, the model kept after training) + `DiscriminatorHead`.

  Inputs: the encoder's dict (with the masked-LM input: [MASK] and the
  masking's other replacements at the masked positions) plus
  `masked_lm_positions` int32 [batch, P], `masked_lm_ids` int32 [batch, P]
  (the original ids there) and `masked_lm_weights` float32 [batch, P] (1
  for a real prediction, 0 for padding).

  The forward pass:
    1. the generator reads the masked input; its masked-LM head gives
       `masked_lm_logits` float32 [batch, P, vocab] at the masked positions;
    2. one token is sampled from each real position's softmax (no gradient
       flows through the sample), with stateless randomness keyed by
       (`seed`, a hash of the batch's ids): the same batch and seed give the
       same samples in `fit`, `bert-train`, evaluation and a resumed run;
    3. `corrupted_word_ids` [batch, seq]: the original ids (the masked
       positions given back their `masked_lm_ids`) with the samples at the
       real masked positions;
    4. `discriminator_labels` int32 [batch, seq]: 1 where corrupted !=
       original (a sample equal to the original counts as original, as in
       ELECTRA);
    5. the discriminator reads the corrupted ids; `discriminator_logits`
       float32 [batch, seq], and its `sequence_output`, `pooled_output`.

  The generator (`generator_fraction` of the discriminator's hidden size,
  heads and intermediate size, as many layers) reads the discriminator's
  embedding tables (`bert.networks.electra_generator`), and its masked-LM
  head is tied to the shared word embeddings.

  Loss (`bert.losses.electra_pretraining_stats`): generator masked-LM loss
  + `discriminator_weight` x mean sigmoid cross-entropy over real tokens.

  `discriminator_checkpoint()` is what `bert.checkpoints.save` writes as an
  ELECTRA discriminator (transformers' ElectraForPreTraining).
  """

  extra_inputs = MASKED_LM_INPUTS
  _head_config = ("generator_fraction", "discriminator_weight", "seed")

  def __init__(self, encoder: EncoderScaffold,
               generator_fraction: float = GENERATOR_FRACTION,
               discriminator_weight: float = DISCRIMINATOR_WEIGHT,
               seed: int = 0,
               discriminator: Optional[DiscriminatorHead] = None, **kwargs):
    if getattr(encoder, "config", None) is None:
      raise ValueError("ElectraPretrainer: encoder must be a BertEncoder (its "
                       "config sizes the generator)")
    if discriminator_weight < 0:
      raise ValueError(f"ElectraPretrainer: discriminator_weight must be >= 0, "
                       f"got {discriminator_weight!r}")
    kwargs.setdefault("name", "electra_pretrainer")
    super().__init__(encoder, **kwargs)
    self.generator_fraction = float(generator_fraction)
    self.discriminator_weight = float(discriminator_weight)
    self.seed = int(seed)
    self.generator, self.generator_config = build_generator(
        encoder, self.generator_fraction)
    config = self.generator_config
    # The generator's head: hidden -> the shared tables' width, tied to the
    # word embeddings both models read.
    self.generator_masked_lm = MaskedLMHead(
        vocab_size=config.vocab_size, activation=config.hidden_act,
        initializer_range=config.initializer_range,
        layer_norm_epsilon=config.layer_norm_epsilon,
        embedding_table=encoder.get_embedding_table(),
        name="generator_masked_lm")
    self.discriminator = (discriminator if discriminator is not None
                          else build_discriminator_head(encoder))
    self._built_with({
        self.generator_masked_lm: [None, None, config.hidden_size]})

  def input_signature(self):
    signature = super().input_signature()
    signature["masked_lm_weights"] = tf.TensorSpec(
        [None, None], tf.float32, name="masked_lm_weights")
    return signature

  # ---------------------------------------------- Keras training (compile)
  stat_names = ("loss",) + losses.ELECTRA_STATS
  loss_names = losses.ELECTRA_LOSSES
  loss_epsilons = losses.PRETRAINING_EPSILONS
  main_output = "discriminator_logits"
  needs_y = False

  def objective(self, x, y, outputs):
    """The loss and metrics of `bert.losses.electra_pretraining_stats`; the
    labels come from the inputs (`masked_lm_ids`, `input_mask`) and the
    model's own samples."""
    features = dict(x, **(y or {}))
    stats = losses.electra_pretraining_stats(features, outputs,
                                             self.discriminator_weight)
    total = sum(stats[k][0] / (stats[k][1] + self.loss_epsilons.get(k, 0.0))
                for k in self.loss_names)
    stats["loss"] = (total, tf.constant(1.0))
    return stats

  def call(self, inputs, training=None):
    encoder_dict = encoder_inputs(inputs, self.name)
    masked_ids = encoder_dict["input_word_ids"]              # [b, s]
    positions = tf.cast(inputs["masked_lm_positions"], tf.int32)   # [b, P]
    real = tf.cast(inputs["masked_lm_weights"], tf.float32) > 0    # [b, P]
    generated = self.generator(encoder_dict, training=training)
    mlm_logits = self.generator_masked_lm(
        generated["sequence_output"], positions)             # [b, P, vocab]
    sampled = self._sample(mlm_logits, masked_ids)           # [b, P]
    # [b, P, s]: where each real prediction sits in its row.
    hot = tf.one_hot(positions, tf.shape(masked_ids)[1], dtype=tf.int32) * \
        tf.cast(real, tf.int32)[..., None]
    at_masked = tf.reduce_max(hot, 1) > 0                    # [b, s]
    original = tf.where(at_masked, tf.reduce_sum(
        hot * tf.cast(inputs["masked_lm_ids"], tf.int32)[..., None], 1),
                        masked_ids)
    corrupted = tf.where(at_masked,
                         tf.reduce_sum(hot * sampled[..., None], 1), original)
    labels = tf.cast(tf.not_equal(corrupted, original), tf.int32)
    discriminated = self._encode(dict(inputs, input_word_ids=corrupted),
                                 training)
    sequence = discriminated["sequence_output"]              # [b, s, h]
    return dict(masked_lm_logits=mlm_logits,
                discriminator_logits=self.discriminator(sequence),
                discriminator_labels=labels,
                corrupted_word_ids=corrupted,
                sequence_output=sequence,
                pooled_output=discriminated["pooled_output"])

  def _sample(self, mlm_logits, ids):
    """One id per prediction from softmax(`mlm_logits`): int32 [b, P].

    Stateless draws keyed by (`seed`, a hash of the batch's masked ids):
    deterministic without a random state to save or share between
    replicas, different for every batch (dynamic masking draws new masks,
    so new ids, for every batch), and each replica's own (its rows differ)."""
    ids64 = tf.cast(tf.reshape(ids, [-1]), tf.int64)
    # Odd multipliers from Knuth's multiplicative hash; int64 sums wrap.
    weights = tf.range(1, tf.size(ids64, tf.int64) + 1) * 2654435761
    key = tf.reduce_sum(ids64 * weights)
    seed = tf.stack([tf.constant(self.seed, tf.int64), key])
    logits = tf.stop_gradient(tf.cast(mlm_logits, tf.float32))
    shape = tf.shape(logits)
    flat = tf.reshape(logits, [-1, shape[-1]])                # [b*P, vocab]
    draws = tf.random.stateless_categorical(flat, 1, seed, dtype=tf.int32)
    return tf.reshape(draws, shape[:2])

  def discriminator_checkpoint(self, vocab_file: Optional[str] = None,
                               lower_case: Optional[bool] = None
                               ) -> BertCheckpoint:
    """The discriminator (encoder + head) as a `BertCheckpoint`, what
    `bert.checkpoints.save(..., format="hf")` writes as transformers'
    ElectraForPreTraining."""
    return BertCheckpoint(config=self.encoder.config, encoder=self.encoder,
                          vocab_file=vocab_file, lower_case=lower_case,
                          discriminator=self.discriminator)

