"""The contrastive losses of sentence embeddings, as (numerator,
denominator) sums of this replica's batch (`bert.losses.Stats`).

The formulas are sentence-transformers' (6.2): `ranking_stats` is
`MultipleNegativesRankingLoss` (and its symmetric form), `cosent_stats`
`CoSENTLoss`, `triplet_stats` `TripletLoss`, each with the same defaults.
Embeddings come in any float dtype (bf16 under mixed precision) and are
scored in float32. Shapes: embeddings [batch, dim], row i of every column
belonging to example i.

Across replicas (`tf.distribute`, `num_replicas_in_sync` > 1) the ranking
loss gathers the candidates, as sentence-transformers'
`gather_across_devices=True` does, and CoSENT gathers its scores, so that
with `bert.train_step` (each loss over its denominator summed over the
global batch; gradients summed over replicas) N replicas take the step of
one replica on all their rows. The gather is `ReplicaContext.all_gather`,
whose gradient sums each replica's gradient of the gathered tensor over the
replicas and hands every replica the rows it gave: each embedding gets the
gradient of every replica's loss terms that use it.

Accumulated micro-batches (`bert.train_step`) are not gathered: each ranks
within its own rows, and CoSENT's step is the mean of their values, as in
sentence-transformers' gradient accumulation.
"""

from typing import List, Sequence, Tuple

import tensorflow as tf

from bert.losses import Stats
from bert.validation import ConfigError, check_choice, check_float

# TripletLoss' distances (sentence-transformers' TripletDistanceMetric).
DISTANCES = ("euclidean", "cosine", "manhattan")


def _unit(x) -> tf.Tensor:
  """float32 rows over max(norm, 1e-12), as torch's F.normalize (an epsilon
  of 1e-24 on the squared norm is the same bound)."""
  return tf.math.l2_normalize(tf.cast(x, tf.float32), -1, epsilon=1e-24)


def _gathered(values: List[tf.Tensor]) -> Tuple[List[tf.Tensor], tf.Tensor]:
  """`values` ([local, ...] each) concatenated over the replicas of the
  step, in replica order, and where this replica's rows start in them.

  One replica (or none): `values` and 0. The start is the sum of the
  batch sizes of the replicas before this one (replica_id * local batch
  when all are equal; a last, smaller batch is split unevenly)."""
  ctx = tf.distribute.get_replica_context()
  if ctx is None or ctx.num_replicas_in_sync == 1:
    return values, tf.constant(0, tf.int32)
  gathered = ctx.all_gather(list(values), axis=0)
  sizes = ctx.all_gather(tf.shape(values[0])[:1], axis=0)     # [replicas]
  start = tf.reduce_sum(sizes[:ctx.replica_id_in_sync_group])
  return gathered, start


def _check_rows(owner: str, named: Sequence[Tuple[str, tf.Tensor]]
                ) -> List[tf.Tensor]:
  """Every tensor is [batch, dim] with the first one's batch and dim, where
  the shapes are known (always in eager mode; in a trace with unknown
  batch sizes they are checked when run). Returns the tensors, those checked
  at run time behind their check: an op that reads them cannot run first
  and fail with an error of its own."""
  first_name, first = named[0]
  checked = []
  for name, x in named:
    if x.shape.rank is not None and x.shape.rank != 2:
      raise ConfigError(f"{owner}: {name} must be [batch, dim], got shape "
                        f"{x.shape}")
    for axis, what in ((0, "batch size"), (1, "dim")):
      mine, theirs = x.shape[axis], first.shape[axis]
      if mine is not None and theirs is not None and mine != theirs:
        raise ConfigError(f"{owner}: {name} has {what} {mine}, "
                          f"{first_name} has {theirs}")
    if x.shape[0] is None or first.shape[0] is None:
      with tf.control_dependencies([tf.debugging.assert_equal(
          tf.shape(x)[0], tf.shape(first)[0],
          message=f"{owner}: {name} and {first_name} differ in batch size")]):
        x = tf.identity(x)
    checked.append(x)
  return checked


def ranking_stats(anchors, candidates: Sequence, scale: float = 20.0,
                  symmetric: bool = False) -> Stats:
  """In-batch negatives ranking: sentence-transformers'
  MultipleNegativesRankingLoss(scale), directions ("query_to_doc",), joint.

  Anchor i's logits are scale * cos(anchor i, c) over every candidate c of
  the batch (the positives of all anchors, then each hard-negative column),
  its target its own positive; the loss is the softmax cross-entropy.
  `symmetric`: MultipleNegativesSymmetricRankingLoss (= directions
  ("query_to_doc", "doc_to_query"), per_direction): the mean of that loss
  and the backward one, where positive i is scored against every anchor of
  the batch and its target is anchor i (hard negatives are candidates of
  the forward direction only, as in sentence-transformers' code).

  Across replicas the candidate columns (and for `symmetric` the anchors)
  are gathered, with gradients; this replica's anchors (and positives, for
  the backward direction) rank against all of them, their targets offset
  by the rows of the replicas before.

  Args:
    anchors: float [batch, dim].
    candidates: float [batch, dim] tensors: the positives, then zero or
      more hard-negative columns (row i of each belonging to anchor i).
    scale: > 0; the inverse of the softmax temperature.
    symmetric: also the backward (positive -> anchors) direction.
  Returns:
    `loss` (sum of the anchors' losses, anchors) and `accuracy` (anchors
    whose highest-scoring candidate is their positive, anchors).
  """
  owner = "ranking_stats"
  scale = check_float(owner, "scale", scale, minimum=0.0, min_open=True)
  if not isinstance(candidates, (list, tuple)) or not candidates:
    raise ConfigError(f"{owner}: candidates must be a non-empty list of "
                      "[batch, dim] columns (the positives first), got "
                      f"{type(candidates).__name__}")
  anchors = _unit(anchors)                                      # [b, d]
  columns = [_unit(c) for c in candidates]                      # [b, d] each
  anchors, *columns = _check_rows(owner, [("anchors", anchors)] + [
      (f"candidates[{i}]", c) for i, c in enumerate(columns)])
  # [global, d] each: the columns (and the anchors) of every replica.
  gathered, start = _gathered(columns + ([anchors] if symmetric else []))
  rows = tf.shape(anchors)[0]
  targets = start + tf.range(rows)                              # [b]
  docs = tf.concat(gathered[:len(columns)], 0)          # [k * global, d]
  logits = scale * tf.matmul(anchors, docs, transpose_b=True)  # [b, k*g]
  per_anchor = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=targets, logits=logits)                            # [b]
  if symmetric:
    # [b, global]: this replica's positives against every anchor.
    backward = scale * tf.matmul(columns[0], gathered[-1], transpose_b=True)
    per_anchor = (per_anchor + tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=targets, logits=backward)) / 2.0
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                             targets), tf.float32)
  n = tf.cast(rows, tf.float32)
  return dict(loss=(tf.reduce_sum(per_anchor), n),
              accuracy=(tf.reduce_sum(correct), n))


def cosent_stats(emb_a, emb_b, scores, scale: float = 20.0) -> Stats:
  """CoSENT: sentence-transformers' CoSENTLoss(scale).

  With s_i = scale * cos(a_i, b_i) over the pairs of the batch and y_i their
  gold scores, the loss is log(1 + sum over pairs (i, j) with y_i < y_j of
  exp(s_i - s_j)): a pair scored lower must not have the higher cosine.

  It is one value of the whole batch, not a sum over examples. With one
  replica, `loss` is (that value, 1). Across replicas the cosines and gold
  scores are gathered (with gradients), every replica computes the value
  of the global batch and returns (value, 1): over the global denominator
  (the replica count) it is the global batch's value, whose gradient each
  replica's embeddings get through the gather, so N replicas take the step
  of one on all their rows. (sentence-transformers' distributed CoSENT does
  not gather: it averages the replicas' own values.)

  Args:
    emb_a, emb_b: float [batch, dim], the two sides of each pair.
    scores: float (or int, bool) [batch], the gold similarity of each pair.
    scale: > 0.
  Returns:
    `loss` as above.
  """
  owner = "cosent_stats"
  scale = check_float(owner, "scale", scale, minimum=0.0, min_open=True)
  emb_a, emb_b = _unit(emb_a), _unit(emb_b)
  emb_a, emb_b = _check_rows(owner, [("emb_a", emb_a), ("emb_b", emb_b)])
  # [batch]: one per pair, whatever its shape (e.g. [batch, 1]).
  scores = tf.reshape(tf.cast(scores, tf.float32), [-1])
  _, scores = _check_rows(owner, [("emb_a", emb_a[:, :1]),
                                  ("scores", scores[:, None])])
  scores = scores[:, 0]
  cosines = scale * tf.reduce_sum(emb_a * emb_b, -1)            # [b]
  (cosines, scores), _ = _gathered([cosines, scores])           # [global]
  # [g, g]: s_i - s_j where y_i < y_j; -inf elsewhere (ties included).
  lower = scores[:, None] < scores[None, :]
  differences = tf.where(lower, cosines[:, None] - cosines[None, :],
                         tf.constant(-float("inf")))
  value = tf.reduce_logsumexp(
      tf.concat([tf.zeros([1]), tf.reshape(differences, [-1])], 0))
  return dict(loss=(value, tf.constant(1.0)))


def _distance(kind: str, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
  """[batch] distances of the rows of x and y (float32)."""
  if kind == "cosine":
    return 1.0 - tf.reduce_sum(_unit(x) * _unit(y), -1)
  difference = x - y
  if kind == "manhattan":
    return tf.reduce_sum(tf.abs(difference), -1)
  # The norm with a zero gradient where x == y, as torch's (tf.norm's
  # gradient there is NaN).
  squares = tf.reduce_sum(tf.square(difference), -1)
  positive = squares > 0.0
  return tf.where(positive, tf.sqrt(tf.where(positive, squares, 1.0)), 0.0)


def triplet_stats(anchor, positive, negative, margin: float = 5.0,
                  distance: str = "euclidean") -> Stats:
  """Triplets: sentence-transformers' TripletLoss(distance_metric,
  triplet_margin): per triplet relu(d(a, p) - d(a, n) + margin).

  Args:
    anchor, positive, negative: float [batch, dim].
    margin: the margin (sentence-transformers' default 5, for euclidean).
    distance: "euclidean" (default), "cosine" (1 - cosine) or "manhattan".
  Returns:
    `loss` (sum over triplets, triplets) and `accuracy` (triplets with
    d(a, p) < d(a, n), triplets).
  """
  owner = "triplet_stats"
  margin = check_float(owner, "margin", margin)
  check_choice(owner, "distance", distance, DISTANCES)
  named = [(name, tf.cast(x, tf.float32)) for name, x in
           (("anchor", anchor), ("positive", positive), ("negative", negative))]
  a, p, n = _check_rows(owner, named)
  to_positive = _distance(distance, a, p)                       # [b]
  to_negative = _distance(distance, a, n)
  per_triplet = tf.nn.relu(to_positive - to_negative + margin)
  correct = tf.cast(to_positive < to_negative, tf.float32)
  count = tf.cast(tf.shape(a)[0], tf.float32)
  return dict(loss=(tf.reduce_sum(per_triplet), count),
              accuracy=(tf.reduce_sum(correct), count))
