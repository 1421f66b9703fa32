"""Evaluation metrics of the fine-tuning tasks (GLUE's definitions).

Classification: accuracy, binary F1 of the positive class ("1"), Matthews
correlation (CoLA); regression: Pearson and Spearman correlation (STS-B).
Computed with scikit-learn and scipy on the full prediction set; `BinaryF1`
is the same F1 as a streaming Keras metric, for `Model.compile`.
"""

from typing import Dict, Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as sk_metrics
import tensorflow as tf
import tf_keras


def classification_metrics(labels: np.ndarray, predictions: np.ndarray,
                           names: Sequence[str] = ("accuracy",),
                           positive: int = 1) -> Dict[str, float]:
  """labels, predictions: int class ids [n]."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  out = {}
  for name in names:
    if name == "accuracy":
      out[name] = float(np.mean(labels == predictions))
    elif name == "f1":
      out[name] = float(sk_metrics.f1_score(labels, predictions, pos_label=positive,
                                            average="binary", zero_division=0))
    elif name == "mcc":
      out[name] = float(sk_metrics.matthews_corrcoef(labels, predictions))
    else:
      raise ValueError(f"unknown classification metric {name!r}")
  return out


def regression_metrics(labels: np.ndarray, predictions: np.ndarray
                       ) -> Dict[str, float]:
  """Pearson and Spearman correlation, and their mean (GLUE's STS-B score)."""
  labels = np.asarray(labels, np.float64)
  predictions = np.asarray(predictions, np.float64)
  pearson = float(stats.pearsonr(predictions, labels)[0])
  spearman = float(stats.spearmanr(predictions, labels)[0])
  return dict(pearson=pearson, spearman=spearman,
              corr=(pearson + spearman) / 2)


@tf_keras.utils.register_keras_serializable(package="bert")
class BinaryF1(tf_keras.metrics.Metric):
  """Streaming F1 of class `positive` from logits [batch, classes] and int
  labels [batch]: counts of true/false positives and false negatives over
  every batch, so the result equals `classification_metrics`' f1 on the
  whole set (not a mean of per-batch F1s)."""

  def __init__(self, positive: int = 1, name: str = "f1", **kwargs):
    super().__init__(name=name, **kwargs)
    self.positive = positive
    self.counts = self.add_weight("counts", shape=[3], initializer="zeros")

  def update_state(self, y_true, y_pred, sample_weight=None):
    labels = tf.reshape(tf.cast(y_true, tf.int32), [-1])
    predicted = tf.reshape(tf.argmax(y_pred, -1, output_type=tf.int32), [-1])
    weights = (tf.ones_like(labels, tf.float32) if sample_weight is None
               else tf.reshape(tf.cast(sample_weight, tf.float32), [-1]))
    truth, guess = labels == self.positive, predicted == self.positive
    count = lambda c: tf.reduce_sum(tf.cast(c, tf.float32) * weights)
    self.counts.assign_add(tf.stack([count(truth & guess),
                                     count(~truth & guess),
                                     count(truth & ~guess)]))

  def result(self):
    tp, fp, fn = tf.unstack(self.counts)
    return tf.math.divide_no_nan(2 * tp, 2 * tp + fp + fn)

  def reset_state(self):
    self.counts.assign(tf.zeros([3]))

  def get_config(self):
    return dict(super().get_config(), positive=self.positive)
