"""Evaluation metrics of the fine-tuning tasks (GLUE's definitions) and of
sentence embeddings (sentence-transformers' definitions).

Classification: accuracy, binary F1 of the positive class ("1"), Matthews
correlation (CoLA); regression: Pearson and Spearman correlation (STS-B).
Computed with scikit-learn and scipy on the full prediction set; `BinaryF1`
is the same F1 as a streaming Keras metric, for `Model.compile`.
Embeddings: `sts_metrics` (correlation of pair cosines with gold scores) and
`retrieval_metrics` (recall@k, MRR, nDCG, ... of ranked document ids), in
NumPy and scipy.
"""

from typing import Collection, Dict, Optional, Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as sk_metrics
import tensorflow as tf
import tf_keras

from bert.errors import DataError


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


def sts_metrics(emb_a: np.ndarray, emb_b: np.ndarray, gold: Sequence[float]
                ) -> Dict[str, float]:
  """Pearson and Spearman correlation of cos(emb_a[i], emb_b[i]) with gold[i].

  sentence-transformers' EmbeddingSimilarityEvaluator with cosine (its
  "pearson_cosine" and "spearman_cosine"), on the same scale: plain
  correlations in [-1, 1], not multiplied by 100. A zero vector's cosine is 0
  (its norm is clamped at 1e-12, as torch's `normalize` does).

  Args:
    emb_a, emb_b: float [n, dim], n >= 2: the two sides of each pair.
    gold: float [n], not all equal: the gold similarity of each pair.
  """
  a = _finite("emb_a", emb_a, 2)
  b = _finite("emb_b", emb_b, 2)
  gold = _finite("gold", gold, 1)
  if a.shape != b.shape:
    raise DataError(f"emb_b has shape {b.shape}, emb_a {a.shape}: give one "
                    "vector of each side per pair")
  if len(gold) != len(a):
    raise DataError(f"gold has {len(gold)} scores for {len(a)} pairs")
  if len(a) < 2:
    raise DataError(f"emb_a has {len(a)} pair(s); a correlation needs 2 or "
                    "more")
  if np.all(gold == gold[0]):
    raise DataError(f"gold is constant ({gold[0]}): no correlation to "
                    "measure")
  unit = lambda x: x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True),
                                  1e-12)
  cosine = np.sum(unit(a) * unit(b), axis=1)   # [n]
  return dict(pearson=float(stats.pearsonr(gold, cosine)[0]),
              spearman=float(stats.spearmanr(gold, cosine)[0]))


def retrieval_metrics(ranked_ids, relevant: Sequence[Collection],
                      ks: Sequence[int] = (1, 5, 10), mrr_at: int = 10,
                      ndcg_at: int = 10, map_at: Optional[int] = None
                      ) -> Dict[str, float]:
  """Information-retrieval metrics of rankings, averaged over the queries.

  The definitions of sentence-transformers' InformationRetrievalEvaluator
  (binary relevance), with its names: for each k in `ks` "accuracy@k" (a
  relevant id in the top k), "precision@k" (relevant among the top k, / k)
  and "recall@k" (/ the query's relevant count); "mrr@{mrr_at}" (1 / rank of
  the first relevant id, 0 past the cutoff), "ndcg@{ndcg_at}" (DCG with
  1/log2(rank + 1) discounts over the ideal DCG of the query's relevant
  count) and with `map_at` "map@{map_at}" (precision at each relevant rank,
  summed, / min(map_at, relevant count)). Values are fractions in [0, 1].

  Args:
    ranked_ids: [n_queries, depth] integer or string ids, each row best
      first (e.g. `bert.retrieval.Index.search`'s ids), no id twice in a row
      (-1, the index's "no result", may repeat); depth >= every cutoff.
    relevant: n_queries collections (sets) of the relevant ids, none empty.
    ks: the cutoffs of accuracy, precision and recall.
    mrr_at, ndcg_at, map_at: the cutoffs of MRR, nDCG and MAP (None: no MAP).
  """
  try:
    ranked = np.asarray(ranked_ids)
  except ValueError:
    raise DataError("ranked_ids is ragged: give [n_queries, depth], the same "
                    "depth for every query") from None
  if ranked.ndim != 2 or ranked.dtype.kind not in "iuU" or not ranked.size:
    raise DataError(f"ranked_ids must be a non-empty [n_queries, depth] array "
                    f"of integer or string ids, got shape {ranked.shape} of "
                    f"{ranked.dtype}")
  if isinstance(relevant, (str, bytes)) or not hasattr(relevant, "__len__"):
    raise DataError(f"relevant must be a list of sets of ids, got "
                    f"{type(relevant).__name__}")
  if len(relevant) != len(ranked):
    raise DataError(f"relevant has {len(relevant)} entries for "
                    f"{len(ranked)} queries in ranked_ids")
  depth = ranked.shape[1]
  if (isinstance(ks, (str, bytes)) or not hasattr(ks, "__len__")
      or len(ks) == 0):
    raise DataError(f"ks must be a non-empty list of cutoffs, got {ks!r}")
  cutoffs = [("ks", k) for k in ks] + [("mrr_at", mrr_at),
                                       ("ndcg_at", ndcg_at)]
  for name, k in cutoffs + ([] if map_at is None else [("map_at", map_at)]):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
      raise DataError(f"{name}: each cutoff must be an integer >= 1, got {k!r}")
    if k > depth:
      raise DataError(f"{name}: cutoff {k} is deeper than ranked_ids' "
                      f"{depth} columns; search deeper or lower the cutoff")
  rows = ranked.tolist()
  sets = []
  for i, (row, rel) in enumerate(zip(rows, relevant)):
    if isinstance(rel, (str, bytes)) or not hasattr(rel, "__iter__"):
      raise DataError(f"relevant[{i}] must be a set of ids, got {rel!r}")
    rel = set(rel)
    if not rel:
      raise DataError(f"relevant[{i}] is empty: each query needs a relevant "
                      "id (leave such queries out, as sentence-transformers "
                      "does)")
    real = [d for d in row if d != -1]
    if len(set(real)) != len(real):
      twice = next(d for d in real if real.count(d) > 1)
      raise DataError(f"ranked_ids[{i}] holds id {twice!r} twice")
    sets.append(rel)
  hit = np.array([[d in rel for d in row] for row, rel in zip(rows, sets)],
                 np.float64)   # [n_queries, depth]
  count = np.array([len(rel) for rel in sets], np.float64)   # [n_queries]
  out = {}
  for k in ks:
    found = hit[:, :k].sum(1)
    out[f"accuracy@{k}"] = float(np.mean(found > 0))
    out[f"precision@{k}"] = float(np.mean(found / k))
    out[f"recall@{k}"] = float(np.mean(found / count))
  first = np.where(hit.any(1), hit.argmax(1), depth)   # rank - 1
  out[f"mrr@{mrr_at}"] = float(np.mean(
      np.where(first < mrr_at, 1 / (first + 1), 0.0)))
  discount = 1 / np.log2(np.arange(depth) + 2)   # [depth]
  dcg = hit[:, :ndcg_at] @ discount[:ndcg_at]
  ideal = np.cumsum(discount)[np.minimum(count, ndcg_at).astype(int) - 1]
  out[f"ndcg@{ndcg_at}"] = float(np.mean(dcg / ideal))
  if map_at is not None:
    h = hit[:, :map_at]
    precision = np.cumsum(h, 1) / np.arange(1, map_at + 1)
    out[f"map@{map_at}"] = float(np.mean(
        (precision * h).sum(1) / np.minimum(map_at, count)))
  return out


def _finite(name: str, value, ndim: int) -> np.ndarray:
  """`value` as a float64 array of `ndim` dimensions, every entry finite."""
  try:
    array = np.asarray(value, np.float64)
  except (TypeError, ValueError):
    raise DataError(f"{name} must be a {ndim}-D array of numbers (not ragged)"
                    ) from None
  if array.ndim != ndim or not array.size:
    raise DataError(f"{name} must be a non-empty {ndim}-D array, got shape "
                    f"{array.shape}")
  if not np.isfinite(array).all():
    where = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
    raise DataError(f"{name} holds NaN or inf (at {where})")
  return array


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
