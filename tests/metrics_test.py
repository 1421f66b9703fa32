"""GLUE metrics against their textbook formulas on random inputs."""

import numpy as np

from bert.metrics import classification_metrics, regression_metrics


def test_classification_metrics_match_formulas():
  rng = np.random.RandomState(0)
  for _ in range(20):
    y = rng.randint(0, 2, 200)
    p = np.where(rng.rand(200) < 0.7, y, 1 - y)
    tp = np.sum((p == 1) & (y == 1))
    tn = np.sum((p == 0) & (y == 0))
    fp = np.sum((p == 1) & (y == 0))
    fn = np.sum((p == 0) & (y == 1))
    f1 = 2 * tp / (2 * tp + fp + fn)
    mcc = (tp * tn - fp * fn) / np.sqrt(
        float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    got = classification_metrics(y, p, ("accuracy", "f1", "mcc"))
    assert abs(got["accuracy"] - (tp + tn) / 200) < 1e-12
    assert abs(got["f1"] - f1) < 1e-12
    assert abs(got["mcc"] - mcc) < 1e-12


def test_regression_metrics_match_formulas():
  rng = np.random.RandomState(1)
  y = rng.rand(300) * 5
  p = y + rng.randn(300)
  pearson = np.corrcoef(y, p)[0, 1]
  ranks = lambda v: np.argsort(np.argsort(v))     # no ties in random floats
  spearman = np.corrcoef(ranks(y), ranks(p))[0, 1]
  got = regression_metrics(y, p)
  assert abs(got["pearson"] - pearson) < 1e-10
  assert abs(got["spearman"] - spearman) < 1e-10
  assert abs(got["corr"] - (pearson + spearman) / 2) < 1e-10
