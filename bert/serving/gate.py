"""The accuracy gate: a reduced-precision export must score within a limit of
its fp32 export on a labelled dev set, or it is not written.

Both exports run end to end from the raw strings (the serving callables of
`bert.serving.loader`), so the gate measures what serving will answer.
Scores are in points (0-100): accuracy for classification (Pearson r x 100
for regression), entity F1 for tagging, F1 for SQuAD (limits 0.5, 0.5 and
1.0 points by default); for a text embedder, retrieval recall@1 x 100 or STS
Spearman x 100 (limit 0.5 points: 0.005 of recall or of Spearman's rho).
"""

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from bert.errors import DataError
from bert.validation import ConfigError

DEFAULT_MAX_DROP = {"classifier": 0.5, "tagger": 0.5, "span_labeler": 1.0,
                    "embedder": 0.5}


class AccuracyGateError(ValueError):
  """A reduced-precision export scored too far below fp32."""


@dataclasses.dataclass
class AccuracyGate:
  """A labelled dev set and how to score a serving callable on it.

  Attributes:
    inputs: the serving inputs, name -> list of strings (all one length).
    score: (predictions: name -> NumPy array over all rows) -> points.
    metric: what `score` measures, e.g. "accuracy".
    source: where the rows come from (a file), for messages.
    max_drop: the largest drop, in points, that passes.
    batch_size: rows per serving call.
  """
  inputs: Mapping[str, Sequence[str]]
  score: Callable[[Dict[str, np.ndarray]], float]
  metric: str
  source: str
  max_drop: float
  batch_size: int = 32

  def __post_init__(self):
    sizes = {len(v) for v in self.inputs.values()}
    if len(sizes) != 1 or not sizes.pop():
      raise ConfigError(f"accuracy gate on {self.source}: the inputs must be "
                        "non-empty lists of one length")
    if not (isinstance(self.max_drop, (int, float)) and self.max_drop >= 0):
      raise ConfigError(f"max_accuracy_drop must be a number >= 0 (points), "
                        f"got {self.max_drop!r}")

  def evaluate(self, serve: Callable) -> float:
    """`serve`'s score on the dev set, in points."""
    n = len(next(iter(self.inputs.values())))
    parts: List[Dict[str, np.ndarray]] = []
    for start in range(0, n, self.batch_size):
      batch = {k: list(v[start:start + self.batch_size])
               for k, v in self.inputs.items()}
      parts.append({k: np.asarray(v) for k, v in serve(**batch).items()})
    merged = {k: _concat([p[k] for p in parts]) for k in parts[0]}
    return float(self.score(merged))

  def check(self, reference: Callable, candidate: Callable,
            precision: str, reference_score: Optional[float] = None
            ) -> Dict[str, object]:
    """The figures of both; AccuracyGateError when the drop is too large.
    `reference_score`: the reference's, when already evaluated."""
    ref = (self.evaluate(reference) if reference_score is None
           else reference_score)
    got = self.evaluate(candidate)
    drop = ref - got
    if not np.isfinite(drop):     # a NaN would pass any comparison
      raise AccuracyGateError(
          f"{precision} export refused: {self.metric} on {self.source} is "
          f"{got} at {precision} vs {ref} at fp32, not a number")
    figures = dict(metric=self.metric, source=self.source, fp32=round(ref, 4),
                   **{precision: round(got, 4)}, max_drop=self.max_drop)
    if drop > self.max_drop:
      raise AccuracyGateError(
          f"{precision} export refused: {self.metric} on {self.source} is "
          f"{got:.2f} at {precision} vs {ref:.2f} at fp32, a drop of "
          f"{drop:.2f} points > max_accuracy_drop={self.max_drop:g}")
    return figures


def _concat(arrays: List[np.ndarray]) -> np.ndarray:
  """Rows of every batch; 2-D string outputs (tagger words/tags) are padded
  to the widest batch first."""
  if arrays[0].ndim == 2 and arrays[0].dtype.kind in "SUO":
    width = max(a.shape[1] for a in arrays)
    arrays = [np.pad(a, [(0, 0), (0, width - a.shape[1])], constant_values=b"")
              for a in arrays]
  return np.concatenate(arrays)


def _text_inputs(texts, texts_b) -> Dict[str, List[str]]:
  """The classifier's serving inputs: `text`, and `text_b` for pairs."""
  inputs = {"text": list(texts)}
  if texts_b is not None:
    inputs["text_b"] = list(texts_b)
  return inputs


def classification_gate(texts: Sequence[str], labels: Sequence[str],
                        source: str, texts_b: Optional[Sequence[str]] = None,
                        max_drop: Optional[float] = None) -> AccuracyGate:
  """Accuracy of the served `label` against `labels` (label names)."""
  inputs = _text_inputs(texts, texts_b)
  truth = np.array([str(l) for l in labels])

  def score(out):
    predicted = np.array([l.decode("utf-8") for l in out["label"]])
    return 100.0 * float(np.mean(predicted == truth))

  return AccuracyGate(inputs, score, "accuracy", source,
                      DEFAULT_MAX_DROP["classifier"] if max_drop is None
                      else max_drop)


def regression_gate(texts: Sequence[str], targets: Sequence[float],
                    source: str, texts_b: Optional[Sequence[str]] = None,
                    max_drop: Optional[float] = None) -> AccuracyGate:
  """Pearson r (x 100, points) of the served `score` against `targets`."""
  inputs = _text_inputs(texts, texts_b)
  truth = np.asarray(targets, np.float64)

  def score(out):
    return 100.0 * float(np.corrcoef(np.asarray(out["score"], np.float64),
                                     truth)[0, 1])

  return AccuracyGate(inputs, score, "Pearson r x100", source,
                      DEFAULT_MAX_DROP["classifier"] if max_drop is None
                      else max_drop)


def tagging_gate(texts: Sequence[str], tags: Sequence[Sequence[str]],
                 source: str, max_drop: Optional[float] = None) -> AccuracyGate:
  """Entity F1 (seqeval, CoNLL rules) of the served tags: `texts` are the
  sentences' words joined by spaces, `tags` one gold tag per word."""
  from seqeval.metrics import f1_score  # pylint: disable=g-import-not-at-top

  def score(out):
    predicted = [[t.decode("utf-8") or "O" for t in row[:len(gold)]]
                 for row, gold in zip(out["tags"], tags)]
    return 100.0 * f1_score([list(t) for t in tags], predicted)

  return AccuracyGate({"text": list(texts)}, score, "entity F1", source,
                      DEFAULT_MAX_DROP["tagger"] if max_drop is None else max_drop)


def squad_gate(questions: Sequence[str], contexts: Sequence[str],
               answers: Sequence[Sequence[str]], source: str,
               max_drop: Optional[float] = None) -> AccuracyGate:
  """SQuAD F1 (the official v1.1 rules: best over the gold answers)."""
  from bert.data import squad_eval  # pylint: disable=g-import-not-at-top

  def score(out):
    f1 = [max(squad_eval.f1_score(a.decode("utf-8"), g, version_2=False)
              for g in gold) for a, gold in zip(out["answer"], answers)]
    return 100.0 * float(np.mean(f1))

  return AccuracyGate({"question": list(questions), "context": list(contexts)},
                      score, "F1", source,
                      DEFAULT_MAX_DROP["span_labeler"] if max_drop is None
                      else max_drop)


# ---------------------------------------------------------------- embedder
def _distinct_texts(texts: Sequence[str]):
  """(the distinct texts, shortest first; each text's index among them):
  the gate's batches then hold texts of similar length, each cut to a
  short bucket, and a text given twice is embedded once."""
  distinct = sorted(set(texts), key=lambda t: (len(t), t))
  where = {t: i for i, t in enumerate(distinct)}
  return distinct, np.array([where[t] for t in texts], np.int64)


def _embedder_max_drop(max_drop):
  return DEFAULT_MAX_DROP["embedder"] if max_drop is None else max_drop


def retrieval_gate(queries: Sequence[str], documents: Sequence[str],
                   relevant: Sequence[int], source: str,
                   max_drop: Optional[float] = None) -> AccuracyGate:
  """Recall@1 (x 100, points) of the served `embeddings`: query i is right
  when its most cosine-similar document is `documents[relevant[i]]` (or a
  document of the same text)."""
  if not len(queries) or len(queries) != len(relevant):
    raise ConfigError(f"retrieval gate on {source}: give one relevant "
                      "document index per query, and at least one query")
  n = len(documents)
  if any(not 0 <= int(r) < n for r in relevant):
    raise ConfigError(f"retrieval gate on {source}: relevant indices must be "
                      f"in [0, {n})")
  texts, index = _distinct_texts(list(queries) + list(documents))
  query_rows, document_rows = index[:len(queries)], index[len(queries):]
  gold = document_rows[np.asarray(relevant, np.int64)]

  def score(out):
    from bert import metrics, retrieval  # pylint: disable=g-import-not-at-top
    e = out["embeddings"]
    search = retrieval.Index(e.shape[-1])
    search.add(e[document_rows])         # ids: positions in document_rows
    _, nearest = search.search(e[query_rows], k=1)           # [queries, 1]
    found = document_rows[nearest]            # a duplicate text counts too
    relevant = [{g} for g in gold]
    return 100.0 * metrics.retrieval_metrics(found, relevant, ks=(1,), mrr_at=1,
                                             ndcg_at=1)["recall@1"]

  return AccuracyGate({"text": texts}, score, "recall@1", source,
                      _embedder_max_drop(max_drop))


def sts_gate(texts_a: Sequence[str], texts_b: Sequence[str],
             scores: Sequence[float], source: str,
             max_drop: Optional[float] = None) -> AccuracyGate:
  """Spearman's rho (x 100, points) of the cosine of each pair's served
  `embeddings` against the gold `scores`."""
  if not len(texts_a) or not len(texts_a) == len(texts_b) == len(scores):
    raise ConfigError(f"STS gate on {source}: texts_a, texts_b and scores must "
                      "be non-empty and of one length")
  gold = np.asarray(scores, np.float64)
  if not np.all(np.isfinite(gold)) or np.ptp(gold) == 0:
    raise ConfigError(f"STS gate on {source}: the scores must be finite and "
                      "not all equal")
  texts, index = _distinct_texts(list(texts_a) + list(texts_b))
  a, b = index[:len(texts_a)], index[len(texts_a):]

  def score(out):
    from bert import metrics  # pylint: disable=g-import-not-at-top
    e = out["embeddings"]
    return 100.0 * metrics.sts_metrics(e[a], e[b], gold)["spearman"]

  return AccuracyGate({"text": texts}, score, "STS Spearman", source,
                      _embedder_max_drop(max_drop))


def embedding_gate(path: str, max_drop: Optional[float] = None) -> AccuracyGate:
  """The gate of an embedder export from a dev file:

  - a SQuAD json (v1.1 or v2.0): retrieval, every question against every
    distinct paragraph of the file (`retrieval_gate`);
  - a tab-separated file whose header names `sentence1`, `sentence2` and
    `score` (GLUE's STS-B, sentence-transformers' stsbenchmark.tsv): STS
    (`sts_gate`).
  """
  if str(path).endswith(".json"):
    from bert.data import squad_json  # pylint: disable=g-import-not-at-top
    examples = squad_json.read_squad(str(path))
    contexts = list(dict.fromkeys(e.context for e in examples))
    where = {c: i for i, c in enumerate(contexts)}
    return retrieval_gate([e.question for e in examples], contexts,
                          [where[e.context] for e in examples], str(path),
                          max_drop)
  from bert.data import text_columns  # pylint: disable=g-import-not-at-top
  rows = text_columns.read_text_columns(str(path), ("sentence1", "sentence2"),
                                        score_column="score")
  if len(rows) < 2:
    raise DataError(f"{path}: {len(rows)} scored pair(s); a rank correlation "
                    "needs at least 2")
  return sts_gate(rows.texts[0], rows.texts[1], rows.scores, str(path),
                  max_drop)
