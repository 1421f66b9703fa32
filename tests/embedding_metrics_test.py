"""sts_metrics and retrieval_metrics against sentence-transformers' own
evaluators (EmbeddingSimilarityEvaluator, InformationRetrievalEvaluator's
compute_metrics), a hand-computed case, and their one-line errors."""

import math

import numpy as np
import pytest

from bert.metrics import retrieval_metrics, sts_metrics
from conftest import one_line

KS = (1, 3, 5, 10)


class _Encoder:
  """What EmbeddingSimilarityEvaluator asks of a model: fixed vectors."""
  similarity_fn_name = "cosine"

  class model_card_data:  # pylint: disable=invalid-name
    set_evaluation_metrics = staticmethod(lambda *args: None)

  def __init__(self, table):
    self.table = table

  def encode(self, sentences, **_):
    return np.stack([self.table[s] for s in sentences])


def test_sts_metrics_equal_sentence_transformers_evaluator():
  from sentence_transformers.sentence_transformer.evaluation import (  # pylint: disable=import-outside-toplevel
      EmbeddingSimilarityEvaluator)
  rng = np.random.default_rng(0)
  a = rng.standard_normal((300, 16)).astype(np.float32)
  b = (a + 1.5 * rng.standard_normal((300, 16))).astype(np.float32)
  b[7] = 0                                   # a zero vector: cosine 0
  gold = rng.random(300) * 5 + np.sum(a * b, 1) / 8
  table = {f"a{i}": v for i, v in enumerate(a)}
  table.update({f"b{i}": v for i, v in enumerate(b)})
  theirs = EmbeddingSimilarityEvaluator(
      [f"a{i}" for i in range(300)], [f"b{i}" for i in range(300)],
      gold.tolist(), write_csv=False)(_Encoder(table))
  ours = sts_metrics(a, b, gold)
  assert 0.2 < ours["spearman"] < 0.95     # a correlation, neither 0 nor 1
  # Their cosines are float32 (torch), ours float64.
  assert abs(ours["pearson"] - theirs["pearson_cosine"]) < 1e-6
  assert abs(ours["spearman"] - theirs["spearman_cosine"]) < 1e-6
  # The textbook formula, and the scale: a fraction, not x100.
  a64, b64 = a.astype(np.float64), b.astype(np.float64)
  cos = np.sum(a64 * b64, 1) / np.maximum(
      np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1), 1e-12)
  assert abs(ours["pearson"] - np.corrcoef(cos, gold)[0, 1]) < 1e-9
  # Control: gold scores of other pairs correlate with nothing.
  shuffled = sts_metrics(a, b, rng.permutation(gold))
  assert abs(shuffled["spearman"]) < 0.15 < ours["spearman"]
  perfect = sts_metrics(np.eye(4), [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0],
                                    [1, 1, 1, 1]], [4, 3, 2, 1])
  assert perfect["spearman"] == pytest.approx(1.0)


def _their_metrics(ranked, relevant, mrr_at, ndcg_at, map_at):
  """InformationRetrievalEvaluator.compute_metrics of the same rankings
  (scores falling with the rank, so its re-sort keeps the order)."""
  from sentence_transformers.sentence_transformer.evaluation import (  # pylint: disable=import-outside-toplevel
      InformationRetrievalEvaluator)
  n, depth = ranked.shape
  evaluator = InformationRetrievalEvaluator(
      queries={f"q{i}": f"query {i}" for i in range(n)},
      corpus={d: f"doc {d}" for d in np.unique(ranked).tolist()},
      relevant_docs={f"q{i}": rel for i, rel in enumerate(relevant)},
      mrr_at_k=[mrr_at], ndcg_at_k=[ndcg_at], accuracy_at_k=list(KS),
      precision_recall_at_k=list(KS), map_at_k=[map_at], write_csv=False)
  results = [[{"corpus_id": d, "score": float(depth - r)}
              for r, d in enumerate(row)] for row in ranked.tolist()]
  out = evaluator.compute_metrics(results)
  flat = {}
  for name, values in out.items():
    for k, value in values.items():
      flat[name.replace("@k", f"@{k}")] = float(value)
  return flat


# sentence-transformers' defaults, and cutoffs below the relevant counts
# (the denominators' min(cutoff, relevant count) then bites).
@pytest.mark.parametrize("mrr_at, ndcg_at, map_at", [(10, 10, 100),
                                                     (3, 5, 4)])
def test_retrieval_metrics_equal_sentence_transformers_on_random_rankings(
    mrr_at, ndcg_at, map_at):
  rng = np.random.default_rng(1)
  for trial in range(5):
    n, corpus = 60, 300
    ranked = np.stack([rng.permutation(corpus)[:100] for _ in range(n)])
    relevant = []
    for row in ranked:
      # Some relevant ids high in the ranking, some deep, some not ranked.
      size = rng.integers(1, 16)
      picks = rng.choice(np.r_[row[:15], row[50:], np.arange(corpus)],
                         size, replace=False)
      relevant.append(set(int(d) for d in picks))
    ours = retrieval_metrics(ranked, relevant, ks=KS, mrr_at=mrr_at,
                             ndcg_at=ndcg_at, map_at=map_at)
    theirs = _their_metrics(ranked, relevant, mrr_at, ndcg_at, map_at)
    assert set(ours) == set(theirs), (sorted(ours), sorted(theirs))
    for name, value in theirs.items():
      assert abs(ours[name] - value) < 1e-9, (trial, name, ours[name], value)
    assert 0 < ours[f"mrr@{mrr_at}"] < 1 and 0 < ours[f"ndcg@{ndcg_at}"] < 1
    # Control: a worse ranking (reversed) scores differently.
    reversed_ = retrieval_metrics(ranked[:, ::-1], relevant, ks=KS,
                                  mrr_at=mrr_at, ndcg_at=ndcg_at)
    assert reversed_[f"ndcg@{ndcg_at}"] != ours[f"ndcg@{ndcg_at}"]


def test_retrieval_metrics_hand_computed():
  ranked = [[3, 7, 1, 9, 4],     # relevant 7 and 4: ranks 2 and 5
            [2, 5, 8, 6, 0]]     # relevant 2: rank 1
  got = retrieval_metrics(ranked, [{7, 4}, {2}], ks=(1, 5), mrr_at=5,
                          ndcg_at=5, map_at=5)
  ndcg_1 = (1 / math.log2(3) + 1 / math.log2(6)) / (1 + 1 / math.log2(3))
  want = {"accuracy@1": 0.5, "accuracy@5": 1.0,
          "precision@1": 0.5, "precision@5": (2 / 5 + 1 / 5) / 2,
          "recall@1": 0.5, "recall@5": 1.0,
          "mrr@5": (1 / 2 + 1) / 2, "ndcg@5": (ndcg_1 + 1) / 2,
          "map@5": ((1 / 2 + 2 / 5) / 2 + 1) / 2}
  assert got == pytest.approx(want, abs=1e-12)
  # String ids, as sentence-transformers' corpora have; no MAP by default.
  got = retrieval_metrics(np.array(ranked).astype(str),
                          [{"7", "4"}, {"2"}], ks=(1,), mrr_at=5, ndcg_at=5)
  assert got == pytest.approx({k: want[k] for k in got}, abs=1e-12)
  assert set(got) == {"accuracy@1", "precision@1", "recall@1", "mrr@5",
                      "ndcg@5"}


@pytest.mark.parametrize("ranked, relevant, kwargs, fragments", [
    ([[1, 2, 3], [4, 5]], [{1}, {4}], {}, ["ranked_ids", "ragged"]),
    ([], [], {}, ["ranked_ids", "non-empty"]),
    ([[1.0, 2.0]], [{1}], dict(ks=(1,), mrr_at=1, ndcg_at=1),
     ["ranked_ids", "integer or string"]),
    ([[1, 2, 3]], [{1}, {2}], dict(ks=(1,), mrr_at=3, ndcg_at=3),
     ["relevant has 2 entries for 1 queries"]),
    ([[1, 2, 3]], [{1}], {}, ["ks", "cutoff 5", "3 columns"]),
    ([[1, 2, 3]], [{1}], dict(ks=(1,)), ["mrr_at", "cutoff 10"]),
    ([[1, 2, 3]], [{1}], dict(ks=(1,), mrr_at=3, ndcg_at=4), ["ndcg_at"]),
    ([[1, 2, 3]], [{1}], dict(ks=(1,), mrr_at=3, ndcg_at=3, map_at=100),
     ["map_at", "cutoff 100"]),
    ([[1, 2, 3]], [{1}], dict(ks=(0,), mrr_at=3, ndcg_at=3),
     ["ks", "integer >= 1"]),
    ([[1, 2, 3]], [{1}], dict(ks=(), mrr_at=3, ndcg_at=3), ["ks", "empty"]),
    ([[1, 2, 3]], [set()], dict(ks=(1,), mrr_at=3, ndcg_at=3),
     ["relevant[0] is empty"]),
    ([[1, 2, 1]], [{1}], dict(ks=(1,), mrr_at=3, ndcg_at=3),
     ["ranked_ids[0] holds id 1 twice"]),
    ([[1, 2, 3]], [5], dict(ks=(1,), mrr_at=3, ndcg_at=3),
     ["relevant[0] must be a set"]),
])
def test_retrieval_metrics_bad_input_is_one_line(ranked, relevant, kwargs,
                                                 fragments):
  with pytest.raises(ValueError) as e:
    retrieval_metrics(ranked, relevant, **kwargs)
  one_line(e, *fragments)


def test_retrieval_metrics_accept_the_index_padding():
  # -1 (no result) may repeat; it is never relevant.
  got = retrieval_metrics([[4, -1, -1]], [{4}], ks=(3,), mrr_at=3, ndcg_at=3)
  assert got["recall@3"] == 1.0 and got["precision@3"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("a, b, gold, fragments", [
    (np.ones((3, 4)), np.ones((3, 5)), [1, 2, 3], ["emb_b", "(3, 5)"]),
    (np.ones((3, 4)), np.ones((3, 4)), [1, 2], ["gold has 2 scores for 3"]),
    (np.ones((1, 4)), np.ones((1, 4)), [1], ["emb_a", "2 or more"]),
    (np.ones((3, 4)), np.ones((3, 4)), [2, 2, 2], ["gold is constant"]),
    (np.ones((0, 4)), np.ones((0, 4)), [], ["emb_a", "non-empty"]),
    (np.ones(4), np.ones(4), [1, 2, 3, 4], ["emb_a", "2-D"]),
    ([[1, 2], [3]], [[1, 2], [3, 4]], [1, 2], ["emb_a", "ragged"]),
    (np.ones((3, 4)), np.full((3, 4), np.nan), [1, 2, 3],
     ["emb_b holds NaN or inf", "(0, 0)"]),
    (np.ones((3, 4)), np.ones((3, 4)), None, ["gold", "1-D"]),
])
def test_sts_metrics_bad_input_is_one_line(a, b, gold, fragments):
  with pytest.raises(ValueError) as e:
    sts_metrics(a, b, gold)
  one_line(e, *fragments)
