"""Evaluation metrics of the fine-tuning tasks (GLUE's definitions).

Classification: accuracy, binary F1 of the positive class ("1"), Matthews
correlation (CoLA); regression: Pearson and Spearman correlation (STS-B).
Computed with scikit-learn and scipy on the full prediction set.
"""

from typing import Dict, Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as sk_metrics


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
