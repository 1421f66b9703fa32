"""The losses and metrics of training, as (numerator, denominator) sums of
a batch.

One definition each, used by the task classes (`compute_stats`, for the
custom training loop) and by the task models' Keras `compile()` defaults;
both minimise them through `bert.train_step`, which normalises each loss
sum by its denominator summed over the global batch. Shapes:
  classification  logits [batch, classes] (packed: [batch, k, classes]),
                  labels [batch] (packed: [batch, k]); regression: one logit.
  token tagging   logits [batch, seq, tags], label_ids [batch, seq] with -1
                  where no tag is predicted (padding, [CLS], [SEP], the
                  second and later wordpieces of a word).
  spans           start/end logits [batch, seq], positions [batch].
  multiple choice logits [batch, choices], labels [batch].
  pre-training    masked-LM logits [batch, P, vocab], next-sentence logits
                  [batch, 2] (packed: [batch, k, 2]).
"""

from typing import Dict, Mapping, Optional, Tuple

import tensorflow as tf

# name -> (numerator, denominator): scalar float32 sums over a (micro-)batch.
Stats = Dict[str, Tuple[tf.Tensor, tf.Tensor]]


def example_weights(features: Mapping[str, tf.Tensor],
                    labels: tf.Tensor) -> tf.Tensor:
  """float32 weights shaped like `labels` (one per example): 1, or for
  packed rows `packed_example_mask` (0 for the empty slots)."""
  if "packed_example_mask" in features:
    return tf.reshape(tf.cast(features["packed_example_mask"], tf.float32),
                      tf.shape(labels))
  return tf.ones_like(labels, tf.float32)


def softmax_stats(logits: tf.Tensor, labels: tf.Tensor,
                  weights: Optional[tf.Tensor] = None) -> Stats:
  """`loss` (softmax cross-entropy) and `accuracy` sums of a batch.

  logits [..., classes]; labels int [...]; weights [...] (default 1): the
  denominators are the summed weights.
  """
  labels = tf.cast(labels, tf.int32)
  weights = (tf.ones_like(labels, tf.float32) if weights is None
             else tf.cast(weights, tf.float32))
  per_item = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                             labels), tf.float32)
  n = tf.reduce_sum(weights)
  return dict(loss=(tf.reduce_sum(per_item * weights), n),
              accuracy=(tf.reduce_sum(correct * weights), n))


def classification_stats(logits, labels, weights: Optional[tf.Tensor] = None,
                         regression: bool = False) -> Stats:
  """Softmax cross-entropy and accuracy; squared error for regression."""
  if not regression:
    return softmax_stats(logits, labels, weights)
  weights = (tf.ones_like(labels, tf.float32) if weights is None
             else tf.cast(weights, tf.float32))
  error = logits[..., 0] - tf.cast(labels, tf.float32)
  return dict(loss=(tf.reduce_sum(tf.square(error) * weights),
                    tf.reduce_sum(weights)))


def token_weights(label_ids) -> tf.Tensor:
  """1 where a tag is predicted, 0 at positions labelled -1."""
  return tf.cast(tf.convert_to_tensor(label_ids) >= 0, tf.float32)


def token_stats(logits, label_ids) -> Stats:
  """Cross-entropy and accuracy over the tagged positions."""
  labels = tf.maximum(tf.cast(label_ids, tf.int32), 0)
  return softmax_stats(logits, labels, token_weights(label_ids))


def span_stats(start_logits, end_logits, start_positions, end_positions,
               input_mask) -> Stats:
  """google-research run_squad's loss: the mean of the start and end
  cross-entropies, with positions past the real tokens never answers."""
  mask = tf.cast(tf.convert_to_tensor(input_mask) > 0, tf.float32)
  n = tf.cast(tf.shape(start_logits)[0], tf.float32)
  total, accuracies = 0.0, {}
  for name, logits, positions in (("start", start_logits, start_positions),
                                  ("end", end_logits, end_positions)):
    stats = softmax_stats(logits + (1.0 - mask) * -10000.0, positions)
    total += stats["loss"][0]
    accuracies[f"{name}_accuracy"] = stats["accuracy"]
  return dict(loss=(total / 2.0, n), **accuracies)


# ------------------------------------------------------------ distillation
# A student learns from a teacher's outputs (Hinton et al. 2015; for compact
# BERTs, Turc et al. 2019). Shapes as above, plus the teacher's outputs of
# the same shapes; `has_label` float [batch]: 1 where the example has a gold
# label (task data), 0 for unlabeled transfer text.

def soft_cross_entropy(student_logits, teacher_logits, temperature: float):
  """T^2 * cross-entropy of softmax(student / T) against softmax(teacher / T)
  over the last axis, per item. The T^2 keeps the gradients' scale that of
  the hard loss whatever T (Hinton et al.), so alpha weighs like for like."""
  t = float(temperature)
  targets = tf.nn.softmax(tf.cast(teacher_logits, tf.float32) / t, -1)
  log_probs = tf.nn.log_softmax(tf.cast(student_logits, tf.float32) / t, -1)
  return -(t * t) * tf.reduce_sum(targets * log_probs, -1)


def _mixed(soft, hard, has_label, weights, alpha):
  """Stats of alpha * soft + (1 - alpha) * hard, per weighted item; the hard
  term only where there is a label."""
  hard_weights = weights * has_label
  mixed = alpha * soft + (1.0 - alpha) * hard * has_label
  return dict(prediction_loss=(tf.reduce_sum(mixed * weights),
                               tf.reduce_sum(weights)),
              soft_loss=(tf.reduce_sum(soft * weights), tf.reduce_sum(weights)),
              hard_loss=(tf.reduce_sum(hard * hard_weights),
                         tf.reduce_sum(hard_weights)))


def distillation_stats(kind: str, student, teacher, labels, has_label,
                       temperature: float, alpha: float, input_mask=None,
                       word_start=None) -> Stats:
  """The prediction-layer distillation loss and its parts, as sums.

  kind:
    classification  student/teacher {"logits"} [batch, classes] (multiple
                    choice: [batch, choices]); labels {"label"} int [batch].
    regression      {"logits"} [batch, 1]; squared error to the teacher's
                    value (soft) and to the gold value (hard); T unused.
    tokens          {"logits"} [batch, seq, tags]; labels {"label_ids"}; soft
                    targets on each word's first piece (`word_start`),
                    averaged over those.
    spans           {"start_logits", "end_logits"} [batch, seq]; labels
                    {"start_positions", "end_positions"}; the soft loss is the
                    mean of the start and end ones, over real tokens
                    (`input_mask`), as the hard one (`span_stats`).
  Returns `prediction_loss` (alpha * soft + (1 - alpha) * hard), `soft_loss`,
  `hard_loss` (over the labeled items) and `accuracy` where the task has one.
  With alpha = 0 (and T = 1) `prediction_loss` is the task's own loss.
  """
  has_label = tf.cast(has_label, tf.float32)
  if kind in ("classification", "regression"):
    s, t = student["logits"], teacher["logits"]
    n = tf.ones_like(has_label)
    label = labels["label"]
    if kind == "regression":
      soft = tf.square(s[..., 0] - tf.cast(t[..., 0], tf.float32))
      hard = tf.square(s[..., 0] - tf.cast(label, tf.float32))
      return _mixed(soft, hard, has_label, n, alpha)
    label = tf.maximum(tf.cast(label, tf.int32), 0)
    hard = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=s)
    stats = _mixed(soft_cross_entropy(s, t, temperature), hard, has_label, n,
                   alpha)
    correct = tf.cast(tf.equal(tf.argmax(s, -1, output_type=tf.int32), label),
                      tf.float32)
    stats["accuracy"] = (tf.reduce_sum(correct * has_label),
                         tf.reduce_sum(has_label))
    return stats
  if kind == "tokens":
    s, t = student["logits"], teacher["logits"]        # [b, s, tags]
    label_ids = tf.cast(labels["label_ids"], tf.int32)
    first = tf.cast(tf.convert_to_tensor(word_start) > 0, tf.float32)
    tagged = first * has_label[:, None]
    label = tf.maximum(label_ids, 0)
    hard = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=s)
    stats = _mixed(soft_cross_entropy(s, t, temperature), hard,
                   has_label[:, None] * tf.cast(label_ids >= 0, tf.float32),
                   first, alpha)
    correct = tf.cast(tf.equal(tf.argmax(s, -1, output_type=tf.int32), label),
                      tf.float32)
    gold = tagged * tf.cast(label_ids >= 0, tf.float32)
    stats["accuracy"] = (tf.reduce_sum(correct * gold), tf.reduce_sum(gold))
    return stats
  if kind == "spans":
    mask = tf.cast(tf.convert_to_tensor(input_mask) > 0, tf.float32)
    never = (1.0 - mask) * -10000.0
    soft, hard = 0.0, 0.0
    for end in ("start", "end"):
      s = student[f"{end}_logits"] + never
      t = tf.cast(teacher[f"{end}_logits"], tf.float32) + never
      soft += soft_cross_entropy(s, t, temperature) / 2.0
      positions = tf.cast(labels[f"{end}_positions"], tf.int32)
      hard += tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=tf.maximum(positions, 0), logits=s) / 2.0
    return _mixed(soft, hard, has_label, tf.ones_like(has_label), alpha)
  raise ValueError(f"distillation_stats: unknown kind {kind!r}")


def hidden_state_stats(student_states, teacher_states, input_mask) -> Stats:
  """TinyBERT's hidden-state loss: the mean squared difference of each
  mapped layer pair's outputs ([batch, seq, hidden]; the student's already
  projected to the teacher's width), per real token, averaged over layers."""
  mask = tf.cast(tf.convert_to_tensor(input_mask) > 0, tf.float32)
  total = 0.0
  for s, t in zip(student_states, teacher_states):
    error = tf.reduce_mean(tf.square(tf.cast(s, tf.float32)
                                     - tf.cast(t, tf.float32)), -1)
    total += tf.reduce_sum(error * mask)
  return dict(hidden_loss=(total / len(student_states), tf.reduce_sum(mask)))


def attention_stats(student_probs, teacher_probs, input_mask) -> Stats:
  """The attention loss: KL(teacher || student) of each mapped layer pair's
  attention distributions ([batch, heads, seq, seq]), per head and real
  query token, averaged over layers (MiniLM's form of TinyBERT's attention
  transfer: a divergence of distributions, not of raw scores)."""
  mask = tf.cast(tf.convert_to_tensor(input_mask) > 0, tf.float32)
  total = 0.0
  for s, t in zip(student_probs, teacher_probs):
    s = tf.cast(s, tf.float32)
    t = tf.cast(t, tf.float32)
    kl = tf.reduce_sum(t * (tf.math.log(t + 1e-12) - tf.math.log(s + 1e-12)),
                       -1)                                   # [b, heads, seq]
    total += tf.reduce_sum(tf.reduce_mean(kl, 1) * mask)
  return dict(attention_loss=(total / len(student_probs), tf.reduce_sum(mask)))


# ------------------------------------------------------------ pre-training
# Exactly as google-research BERT: masked LM: cross-entropy at the masked
# positions, weighted by `masked_lm_weights` (1 for a real prediction, 0 for
# padding), summed and divided by sum(weights) + 1e-5
# (`run_pretraining.get_masked_lm_output`); next sentence: mean
# cross-entropy over the batch (label 1 = random next); total = masked LM +
# next sentence.
PRETRAINING_LOSSES = ("masked_lm_loss", "next_sentence_loss")
# The one loss with an epsilon on its denominator (see `bert.train_step`).
PRETRAINING_EPSILONS = dict(masked_lm_loss=1e-5)


def pretraining_stats(features: Mapping[str, tf.Tensor],
                      outputs: Mapping[str, tf.Tensor]) -> Stats:
  """(numerator, denominator) sums of one batch, for losses and accuracies.

  `masked_lm_*` are over real predictions (`masked_lm_weights`), `next_
  sentence_*` over examples (only for a model with a sentence head: BERT's
  next-sentence or ALBERT's sentence-order logits). Dividing each numerator
  by its denominator (+1e-5 for the masked-LM loss) gives the reference's
  per-batch values.
  """
  mlm_logits = tf.cast(outputs["masked_lm_logits"], tf.float32)   # [b, P, V]
  mlm = softmax_stats(mlm_logits, features["masked_lm_ids"],
                      features["masked_lm_weights"])          # over [b, P]
  stats = dict(masked_lm_loss=mlm["loss"], masked_lm_accuracy=mlm["accuracy"])
  if "next_sentence_logits" in outputs:
    # [b, 2], or [b, k, 2] for packed rows: flattened to one per example.
    nsp_logits = tf.reshape(tf.cast(outputs["next_sentence_logits"],
                                    tf.float32), [-1, 2])
    nsp_labels = tf.reshape(features["next_sentence_labels"], [-1])
    nsp = softmax_stats(nsp_logits, nsp_labels,
                        example_weights(features, nsp_labels))  # over [b]
    stats.update(next_sentence_loss=nsp["loss"],
                 next_sentence_accuracy=nsp["accuracy"])
  return stats


def pretraining_losses(features: Mapping[str, tf.Tensor],
                       outputs: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
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
  `loss` = masked-LM loss + next-sentence loss (where there is one)."""
  num, den = stats["masked_lm_loss"]
  epsilon = PRETRAINING_EPSILONS["masked_lm_loss"]
  out = dict(masked_lm_loss=num / (den + epsilon))
  for name in ("next_sentence_loss", "masked_lm_accuracy", "next_sentence_accuracy"):
    if name in stats:
      num, den = stats[name]
      out[name] = num / tf.maximum(den, 1.0)
  out["loss"] = out["masked_lm_loss"] + out.get("next_sentence_loss", 0.0)
  return out


# ------------------------------------------------- ELECTRA pre-training
# Replaced-token detection (google-research ELECTRA): the generator's
# masked-LM loss as above, plus the discriminator's sigmoid cross-entropy
# (label 1 = replaced) averaged over the real tokens (`input_mask`) and
# weighed by lambda (50 in the paper). The weighted term is its own stat so
# the loop's sum of loss stats is the ELECTRA loss, while
# `discriminator_loss` is reported unweighted.
ELECTRA_LOSSES = ("masked_lm_loss", "weighted_discriminator_loss")
ELECTRA_STATS = ("masked_lm_loss", "weighted_discriminator_loss",
                 "discriminator_loss", "masked_lm_accuracy",
                 "discriminator_accuracy", "replaced_fraction")


def real_tokens(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
  """float32 [batch, seq]: 1 for a real token, 0 for padding (packed rows'
  `input_mask` holds example numbers, > 0 where real)."""
  return tf.cast(tf.convert_to_tensor(features["input_mask"]) > 0, tf.float32)


def electra_pretraining_stats(features: Mapping[str, tf.Tensor],
                              outputs: Mapping[str, tf.Tensor],
                              discriminator_weight: float) -> Stats:
  """(numerator, denominator) sums of one ELECTRA batch.

  features: `masked_lm_ids`, `masked_lm_weights` [batch, P], `input_mask`
    [batch, seq]. outputs: `ElectraPretrainer`'s `masked_lm_logits`
    [batch, P, vocab], `discriminator_logits` [batch, seq] and
    `discriminator_labels` int [batch, seq] (1 = replaced).
  Returns `masked_lm_loss`, `masked_lm_accuracy` (over real predictions, as
  `pretraining_stats`), `discriminator_loss` (mean sigmoid cross-entropy),
  `weighted_discriminator_loss` (the same times `discriminator_weight`),
  `discriminator_accuracy` (logit > 0 means replaced) and
  `replaced_fraction` (the share of tokens replaced: 1 minus it is the
  accuracy of calling every token original), all over real tokens.
  """
  mlm = softmax_stats(tf.cast(outputs["masked_lm_logits"], tf.float32),
                      features["masked_lm_ids"], features["masked_lm_weights"])
  mask = real_tokens(features)                                 # [b, s]
  logits = tf.cast(outputs["discriminator_logits"], tf.float32)
  labels = tf.cast(outputs["discriminator_labels"], tf.float32)
  per_token = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                      logits=logits)
  n = tf.reduce_sum(mask)
  total = tf.reduce_sum(per_token * mask)
  correct = tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), labels),
                    tf.float32)
  return dict(
      masked_lm_loss=mlm["loss"], masked_lm_accuracy=mlm["accuracy"],
      discriminator_loss=(total, n),
      weighted_discriminator_loss=(float(discriminator_weight) * total, n),
      discriminator_accuracy=(tf.reduce_sum(correct * mask), n),
      replaced_fraction=(tf.reduce_sum(labels * mask), n))
