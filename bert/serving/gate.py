"""The accuracy gate: a reduced-precision export must score within a limit of
its fp32 export on a labelled dev set, or it is not written.

Both exports run end to end from the raw strings (the serving callables of
`bert.serving.loader`), so the gate measures what serving will answer.
Scores are in points (0-100): accuracy for classification (Pearson r x 100
for regression), entity F1 for tagging, F1 for SQuAD (limits 0.5, 0.5 and
1.0 points by default).
"""

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from bert.validation import ConfigError

DEFAULT_MAX_DROP = {"classifier": 0.5, "tagger": 0.5, "span_labeler": 1.0}


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
            precision: str) -> Dict[str, object]:
    """The figures of both; AccuracyGateError when the drop is too large."""
    ref = self.evaluate(reference)
    got = self.evaluate(candidate)
    drop = ref - got
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
