"""The contrastive losses of sentence embeddings (bert.embedding_losses):
against values worked out by hand on a 3x2 example, against
sentence-transformers' own loss classes (values and gradients), and two
replicas against one on the global batch (loss and gradients)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import torch
from sentence_transformers.sentence_transformer import losses as st_losses

from bert import embedding_losses as el
from bert.validation import ConfigError
from conftest import REPO_ROOT, one_line

# ------------------------------------------------------------ by hand
# Three anchors, their positives and one hard negative each, in 2-d.
A = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
P = np.array([[2, 0], [1, 1], [0, -1]], np.float32)
N = np.array([[0, 3], [-1, 0], [1, -1]], np.float32)
R = 1 / math.sqrt(2)
# cos(A[i], P[j]) and cos(A[i], N[j]), worked out on paper.
COS_AP = np.array([[1, R, 0], [0, R, -1], [R, 1, -R]])
COS_AN = np.array([[0, -1, R], [1, 0, -R], [R, -R, 0]])


def _mean(stats, name="loss"):
  numerator, denominator = stats[name]
  return float(numerator) / float(denominator)


def _cross_entropy(logits, targets):
  """Mean softmax cross-entropy of rows, in float64."""
  logits = np.asarray(logits, np.float64)
  top = logits.max(1, keepdims=True)
  log_z = top[:, 0] + np.log(np.exp(logits - top).sum(1))
  return float(np.mean(log_z - logits[np.arange(len(logits)), targets]))


def test_the_hand_example_cosines():
  """The written-out matrices are the example's cosines (so the values
  below rest on them, not on the code under test)."""
  def cos(x, y):
    return x @ y.T / np.outer(np.linalg.norm(x, axis=1),
                              np.linalg.norm(y, axis=1))
  np.testing.assert_allclose(cos(A, P), COS_AP, atol=1e-7)
  np.testing.assert_allclose(cos(A, N), COS_AN, atol=1e-7)


@pytest.mark.parametrize("scale", [20.0, 1.0])
def test_ranking_by_hand(scale):
  targets = np.arange(3)
  # Anchor i against every positive: its own is the target.
  pairs = el.ranking_stats(A, [P], scale=scale)
  assert _mean(pairs) == pytest.approx(
      _cross_entropy(scale * COS_AP, targets), rel=1e-6)
  # Anchors 0 and 1 rank their positive first; anchor 2's is at -1/sqrt 2.
  assert _mean(pairs, "accuracy") == pytest.approx(2 / 3)
  assert float(pairs["loss"][1]) == 3.0
  # With the negatives as three more candidates (anchor 1 is closest to
  # N[0]).
  triples = el.ranking_stats(A, [P, N], scale=scale)
  assert _mean(triples) == pytest.approx(_cross_entropy(
      scale * np.concatenate([COS_AP, COS_AN], 1), targets), rel=1e-6)
  assert _mean(triples, "accuracy") == pytest.approx(1 / 3)


@pytest.mark.parametrize("negatives", [False, True])
def test_symmetric_ranking_by_hand(negatives):
  """The mean of the forward loss (with the hard negatives) and the
  backward one: positive j against the anchors (column j of COS_AP), the
  negatives not among them."""
  targets = np.arange(3)
  forward = 20 * (np.concatenate([COS_AP, COS_AN], 1) if negatives
                  else COS_AP)
  backward = 20 * COS_AP.T
  expected = (_cross_entropy(forward, targets)
              + _cross_entropy(backward, targets)) / 2
  columns = [P, N] if negatives else [P]
  symmetric = el.ranking_stats(A, columns, symmetric=True)
  assert _mean(symmetric) == pytest.approx(expected, rel=1e-6)
  # The accuracy stays the forward one.
  assert _mean(symmetric, "accuracy") == pytest.approx(
      1 / 3 if negatives else 2 / 3)
  # Negative control: the one-directional loss is not that.
  one_way = _mean(el.ranking_stats(A, columns))
  assert one_way == pytest.approx(_cross_entropy(forward, targets), rel=1e-6)
  assert abs(one_way - expected) > 0.1


@pytest.mark.parametrize("scale", [20.0, 1.0])
def test_cosent_by_hand(scale):
  cosines = np.diag(COS_AP)                      # 1, 1/sqrt 2, -1/sqrt 2
  # log(1 + sum over y_i < y_j of exp(scale * (c_i - c_j))).
  gold = [0.9, 0.2, 0.5]
  pairs = [(1, 0), (1, 2), (2, 0)]
  expected = math.log(1 + sum(math.exp(scale * (cosines[i] - cosines[j]))
                              for i, j in pairs))
  stats = el.cosent_stats(A, P, gold, scale=scale)
  assert float(stats["loss"][1]) == 1.0
  assert _mean(stats) == pytest.approx(expected, rel=1e-6)
  # Ties make no pair: only (0, 2) and (1, 2).
  tied = [0.5, 0.5, 0.9]
  expected = math.log(1 + sum(math.exp(scale * (cosines[i] - cosines[j]))
                              for i, j in [(0, 2), (1, 2)]))
  assert _mean(el.cosent_stats(A, P, tied, scale=scale)) == pytest.approx(
      expected, rel=1e-6)


@pytest.mark.parametrize("distance,margin,losses,accuracy", [
    # d(a, p) = 1, 1, sqrt 5; d(a, n) = sqrt 10, sqrt 2, 2.
    ("euclidean", 5.0, [6 - math.sqrt(10), 6 - math.sqrt(2),
                        3 + math.sqrt(5)], 2 / 3),
    # d(a, p) = 1, 1, 3; d(a, n) = 4, 2, 2.
    ("manhattan", 1.0, [0.0, 0.0, 2.0], 2 / 3),
    # 1 - cos: d(a, p) = 0, 1 - R, 1 + R; d(a, n) = 1, 1, 1.
    ("cosine", 0.5, [0.0, 0.0, R + 0.5], 2 / 3),
])
def test_triplet_by_hand(distance, margin, losses, accuracy):
  stats = el.triplet_stats(A, P, N, margin=margin, distance=distance)
  assert float(stats["loss"][1]) == 3.0
  assert _mean(stats) == pytest.approx(np.mean(losses), rel=1e-6, abs=1e-7)
  assert _mean(stats, "accuracy") == pytest.approx(accuracy)


def test_triplet_default_is_euclidean_margin_5():
  assert _mean(el.triplet_stats(A, P, N)) == pytest.approx(
      (15 - math.sqrt(10) - math.sqrt(2) + math.sqrt(5)) / 3, rel=1e-6)


# ----------------------------------------------- sentence-transformers
def _reference(loss, columns, labels=None):
  """sentence-transformers' loss value and its gradients w.r.t. each
  column of embeddings."""
  tensors = [torch.tensor(c, requires_grad=True) for c in columns]
  value = loss.compute_loss_from_embeddings(
      tensors, None if labels is None else torch.tensor(labels))
  value.backward()
  return value.item(), [t.grad.numpy() for t in tensors]


def _ours(stats_fn, columns):
  """Our mean loss (numerator / denominator) and its gradients."""
  tensors = [tf.constant(c) for c in columns]
  with tf.GradientTape() as tape:
    tape.watch(tensors)
    numerator, denominator = stats_fn(tensors)["loss"]
    value = numerator / denominator
  return float(value), [g.numpy() for g in tape.gradient(value, tensors)]


def _check(reference, ours):
  (want, want_grads), (got, got_grads) = reference, ours
  assert got == pytest.approx(want, rel=1e-5)
  for g, w in zip(got_grads, want_grads):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _embeddings(columns, rows=8, dim=16, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.normal(size=(rows, dim)).astype(np.float32)
          for _ in range(columns)]


@pytest.mark.parametrize("negatives", [0, 1, 2])
@pytest.mark.parametrize("scale", [20.0, 7.5])
@pytest.mark.parametrize("symmetric", [False, True])
def test_ranking_equals_sentence_transformers(negatives, scale, symmetric):
  columns = _embeddings(2 + negatives, seed=negatives)
  directions = (("query_to_doc", "doc_to_query") if symmetric
                else ("query_to_doc",))
  reference = st_losses.MultipleNegativesRankingLoss(
      None, scale=scale, directions=directions,
      partition_mode="per_direction" if symmetric else "joint")
  _check(_reference(reference, columns),
         _ours(lambda t: el.ranking_stats(t[0], t[1:], scale=scale,
                                          symmetric=symmetric), columns))


def test_symmetric_equals_the_symmetric_class():
  """MultipleNegativesSymmetricRankingLoss (deprecated in 6.2 for the
  directions above) is the same loss."""
  columns = _embeddings(2, seed=5)
  reference = st_losses.MultipleNegativesSymmetricRankingLoss(None)
  symmetric = _ours(lambda t: el.ranking_stats(t[0], t[1:], symmetric=True),
                    columns)
  _check(_reference(reference, columns), symmetric)
  one_way = _ours(lambda t: el.ranking_stats(t[0], t[1:]), columns)
  assert abs(one_way[0] - symmetric[0]) > 1e-3


@pytest.mark.parametrize("scale", [20.0, 3.0])
@pytest.mark.parametrize("kind", ["float", "ties", "int"])
def test_cosent_equals_sentence_transformers(scale, kind):
  columns = _embeddings(2, seed=7)
  rng = np.random.default_rng(1)
  labels = {"float": rng.uniform(size=8).astype(np.float32),
            "ties": np.array([0.2, 0.5, 0.5, 0.1, 0.9, 0.2, 0.2, 1.0],
                             np.float32),
            "int": rng.integers(0, 3, size=8)}[kind]
  reference = st_losses.CoSENTLoss(None, scale=scale)
  _check(_reference(reference, columns, labels),
         _ours(lambda t: el.cosent_stats(t[0], t[1], labels, scale=scale),
               columns))


@pytest.mark.parametrize("distance,margin", [
    ("euclidean", 5.0), ("euclidean", 1.0), ("cosine", 0.3),
    ("manhattan", 8.0)])
def test_triplet_equals_sentence_transformers(distance, margin):
  columns = _embeddings(3, seed=11)
  metric = getattr(st_losses.TripletDistanceMetric, distance.upper())
  reference = st_losses.TripletLoss(None, distance_metric=metric,
                                    triplet_margin=margin)
  _check(_reference(reference, columns),
         _ours(lambda t: el.triplet_stats(*t, margin=margin,
                                          distance=distance), columns))


def test_triplet_gradient_is_zero_not_nan_where_anchor_is_positive():
  """torch's norm has gradient 0 at 0; tf.norm's would be NaN."""
  anchor = tf.constant(A)
  with tf.GradientTape() as tape:
    tape.watch(anchor)
    value = el.triplet_stats(anchor, anchor, N)["loss"][0]
  assert np.isfinite(tape.gradient(value, anchor).numpy()).all()


def test_bf16_embeddings_are_scored_in_float32():
  columns = _embeddings(3, seed=3)
  halves = [tf.cast(c, tf.bfloat16) for c in columns]
  exact = [tf.cast(h, tf.float32) for h in halves]
  scores = np.linspace(0, 1, 8)
  for fn in (lambda c: el.ranking_stats(c[0], c[1:], symmetric=True),
             lambda c: el.cosent_stats(c[0], c[1], scores),
             lambda c: el.triplet_stats(*c)):
    got, want = fn(halves), fn(exact)
    for name in want:
      assert got[name][0].dtype == tf.float32
      assert float(got[name][0]) == pytest.approx(float(want[name][0]),
                                                  rel=1e-6)


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize("call,fragments", [
    (lambda: el.ranking_stats(A, [P], scale=0.0), ["ranking_stats.scale"]),
    (lambda: el.ranking_stats(A, [P], scale=-1), ["ranking_stats.scale"]),
    (lambda: el.ranking_stats(A, []), ["candidates"]),
    (lambda: el.ranking_stats(A, P), ["candidates"]),
    (lambda: el.ranking_stats(A, [P, N[:2]]), ["candidates[1]", "batch"]),
    (lambda: el.ranking_stats(A[:2], [P]), ["candidates[0]", "batch"]),
    (lambda: el.ranking_stats(A, [P[:, :1]]), ["candidates[0]", "dim"]),
    (lambda: el.cosent_stats(A, P, [1.0, 2.0]), ["scores", "batch"]),
    (lambda: el.cosent_stats(A, P[:2], [1.0, 2.0, 3.0]), ["emb_b"]),
    (lambda: el.cosent_stats(A, P, [1.0, 2.0, 3.0], scale=0),
     ["cosent_stats.scale"]),
    (lambda: el.triplet_stats(A, P, N, distance="dot"),
     ["triplet_stats.distance", "euclidean"]),
    (lambda: el.triplet_stats(A, P, N[:1]), ["negative", "batch"]),
    (lambda: el.triplet_stats(A, P, N, margin="5"), ["triplet_stats.margin"]),
])
def test_bad_arguments_raise_one_line(call, fragments):
  with pytest.raises(ConfigError) as error:
    call()
  one_line(error, *fragments)


def test_a_traced_batch_mismatch_fails_when_run():
  spec = tf.TensorSpec([None, 2], tf.float32)
  fn = tf.function(lambda a, p: el.ranking_stats(a, [p])["loss"][0],
                   input_signature=[spec, spec])
  assert np.isfinite(float(fn(A, P)))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"candidates\[0\] and anchors differ"):
    fn(A, P[:2])


# ------------------------------------------------------------ replicas
# Two logical CPUs must be set before TensorFlow starts: a process of its
# own. A Dense "encoder" on random inputs, 7 rows split 3 + 4 (the second
# replica's rows start at 3, not at replica_id * its own batch size); each
# loss's step as KerasTraining.train_step takes it (bert.train_step: global
# denominators, the loss, gradients summed over the replicas), on one
# replica with all rows and on two; then again with the gather replaced by
# the identity (each replica ranks only its own rows).
MIRRORED = """
import json
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import tf_keras
from bert import embedding_losses
from bert import train_step as step

rng = np.random.default_rng(0)
rows, width, dim = 7, 6, 5
columns = [rng.normal(size=(rows, width)).astype(np.float32) for _ in range(3)]
scores = rng.uniform(size=rows).astype(np.float32)
kernel = rng.normal(size=(width, dim)).astype(np.float32)
OPTIMIZER = tf_keras.optimizers.SGD()
LOSSES = {
    "ranking": lambda e, y: embedding_losses.ranking_stats(e[0], e[1:]),
    "symmetric": lambda e, y: embedding_losses.ranking_stats(
        e[0], e[1:], symmetric=True),
    "cosent": lambda e, y: embedding_losses.cosent_stats(e[0], e[1], y),
}

def build():
  dense = tf_keras.layers.Dense(dim)
  dense.build([None, width])
  dense.set_weights([kernel, np.linspace(-1, 1, dim).astype(np.float32)])
  return dense

def step_fn(dense, loss_fn, inputs, y):
  variables = dense.trainable_variables
  with tf.GradientTape() as tape:
    stats = loss_fn([dense(x) for x in inputs], y)
    sums = step.global_sums({k: d for k, (_, d) in stats.items()})
    loss = step.loss(stats, sums, ["loss"])
  grads = step.gradients(tape, loss, variables, OPTIMIZER)
  numerators = step.global_sums({k: v for k, (v, _) in stats.items()})
  ctx = tf.distribute.get_replica_context()
  if ctx.num_replicas_in_sync > 1:     # as step.apply_gradients
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
  return {k: numerators[k] / sums[k] for k in sums}, grads

def one(loss_fn):
  values, grads = step_fn(build(), loss_fn, [tf.constant(c) for c in columns],
                          tf.constant(scores))
  return {k: float(v) for k, v in values.items()}, [g.numpy() for g in grads]

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
  mirrored = build()

def split(array):
  return strategy.experimental_distribute_values_from_function(
      lambda ctx: tf.constant(array[:3] if ctx.replica_id_in_sync_group == 0
                              else array[3:]))

def two(loss_fn):
  run = tf.function(lambda inputs, y: strategy.run(
      lambda inputs, y: step_fn(mirrored, loss_fn, inputs, y),
      args=(inputs, y)))
  values, grads = run([split(c) for c in columns], split(scores))
  local = strategy.experimental_local_results
  return ({k: [float(x) for x in local(v)] for k, v in values.items()},
          [[x.numpy().tolist() for x in local(g)] for g in grads])

out = {}
for name, loss_fn in LOSSES.items():
  values, grads = one(loss_fn)
  out[name] = dict(one=values, one_grads=[g.tolist() for g in grads])
  out[name]["two"], out[name]["two_grads"] = two(loss_fn)
embedding_losses._gathered = lambda values: (values, tf.constant(0))
for name, loss_fn in LOSSES.items():
  out[name]["local"], out[name]["local_grads"] = two(loss_fn)
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def mirrored():
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [REPO_ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  done = subprocess.run([sys.executable, "-c", MIRRORED], env=env,
                        capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  line, = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
  return json.loads(line[len("RESULT "):])


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["ranking", "symmetric", "cosent"])
def test_two_replicas_take_the_step_of_one_on_the_global_batch(mirrored,
                                                                name):
  run = mirrored[name]
  for stat, value in run["one"].items():
    # Every replica reports the global value.
    assert run["two"][stat] == pytest.approx([value] * 2, rel=1e-6), stat
  for one, two in zip(run["one_grads"], run["two_grads"]):
    for replica in two:       # the summed gradients, on each replica
      np.testing.assert_allclose(replica, one, rtol=0, atol=1e-6)
  # Negative control: without the gather the step is not that.
  assert run["local"]["loss"][0] != pytest.approx(run["one"]["loss"],
                                                  rel=1e-3)
  gap = max(np.abs(np.array(two[0]) - np.array(one)).max()
            for one, two in zip(run["one_grads"], run["local_grads"]))
  assert gap > 1e-2
