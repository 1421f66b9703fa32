"""Pre-training losses and metrics, exactly as google-research BERT.

masked LM: cross-entropy at the masked positions, weighted by
  `masked_lm_weights` (1 for a real prediction, 0 for padding), summed and
  divided by sum(weights) + 1e-5 (`run_pretraining.get_masked_lm_output`);
next sentence: mean cross-entropy over the batch (label 1 = random next);
total = masked LM + next sentence.
"""

from typing import Dict

import tensorflow as tf


def masked_lm_loss(logits, label_ids, label_weights):
  """logits float [batch, P, vocab]; ids int [batch, P]; weights [batch, P]."""
  logits = tf.cast(logits, tf.float32)
  weights = tf.cast(label_weights, tf.float32)
  per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(label_ids, tf.int32), logits=logits)        # [batch, P]
  return tf.reduce_sum(per_position * weights) / (tf.reduce_sum(weights) + 1e-5)


def next_sentence_loss(logits, labels):
  """logits float [batch, 2]; labels int [batch] or [batch, 1]."""
  labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=tf.cast(logits, tf.float32)))


def pretraining_losses(features: Dict[str, tf.Tensor],
                       outputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """Losses and accuracies of one batch.

  Args:
    features: `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`
      (the google-research TFRecord feature names).
    outputs: `BertPretrainer` outputs.
  Returns:
    dict with `loss` (the total), `masked_lm_loss`, `next_sentence_loss`,
    `masked_lm_accuracy` (over real predictions) and `next_sentence_accuracy`.
  """
  mlm_logits = outputs["masked_lm_logits"]
  nsp_logits = outputs["next_sentence_logits"]
  weights = tf.cast(features["masked_lm_weights"], tf.float32)
  ids = tf.cast(features["masked_lm_ids"], tf.int32)
  nsp_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
  mlm = masked_lm_loss(mlm_logits, ids, weights)
  nsp = next_sentence_loss(nsp_logits, nsp_labels)
  mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32),
                                 ids), tf.float32)
  nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32),
                                 nsp_labels), tf.float32)
  return dict(
      loss=mlm + nsp,
      masked_lm_loss=mlm,
      next_sentence_loss=nsp,
      masked_lm_accuracy=tf.reduce_sum(mlm_correct * weights)
      / tf.maximum(tf.reduce_sum(weights), 1.0),
      next_sentence_accuracy=tf.reduce_mean(nsp_correct))
