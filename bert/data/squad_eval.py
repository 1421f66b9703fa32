"""SQuAD answers from span logits, scored with the official EM/F1 rules.

`postprocess` turns the start/end logits of the windows that
`bert.data.squad_examples.encode_examples` made into answers cut from the
original context. EM/F1 reimplement the official evaluation scripts' rules
(v1.1, and v2.0 with no-answer handling and the best null-score threshold).
"""

import collections
import re
import string
from typing import Dict, Optional, Sequence

import numpy as np

from bert.data.errors import DataError
from bert.data.squad_config import SquadConfig
from bert.data.squad_examples import SquadExample

# The logit a position past a window's tokens gets before the n-best search
# (also what cut batches are padded back with): the rows of a window run at
# the length bucket of their batch, and the model's outputs on [PAD] must
# not decide which real positions make the n-best.
PAD_LOGIT = -1e4


def postprocess(examples: Sequence[SquadExample], meta: Sequence[dict],
                start_logits: np.ndarray, end_logits: np.ndarray,
                squad: SquadConfig = SquadConfig()):
  """Answers from the logits of every feature (`squad`: n_best_size,
  max_answer_length, version_2, null_score_diff_threshold).

  Returns (predictions {id: text}, nbest {id: [{text, probability,
  start_logit, end_logit, start, end}]} (start/end: the answer's character
  offsets in the context, end exclusive; None for no answer), null_odds
  {id: null score - best span score},
  v2 only). A span must lie in the context, start in its max-context window,
  end at or after its start and span at most `max_answer_length` pieces.
  The n-best positions of a window are searched with its positions past the
  row's tokens (meta `row_length`) at PAD_LOGIT.
  """
  n_best_size, max_answer_length = squad.n_best_size, squad.max_answer_length
  check_unique_ids(examples)
  by_example = collections.defaultdict(list)
  for f, m in enumerate(meta):
    by_example[m["example"]].append(f)
  predictions, nbest_out, null_odds = {}, {}, {}
  for ex_index, ex in enumerate(examples):
    candidates = []
    null_score = None
    for f in by_example[ex_index]:
      m, s_log, e_log = meta[f], start_logits[f], end_logits[f]
      if "row_length" in m:
        s_log, e_log = (np.where(np.arange(len(t)) < m["row_length"], t,
                                 np.float32(PAD_LOGIT)) for t in (s_log, e_log))
      score_null = float(s_log[0] + e_log[0])
      if null_score is None or score_null < null_score:
        null_score = score_null
      starts = np.argsort(-s_log)[:n_best_size]
      ends = np.argsort(-e_log)[:n_best_size]
      for s in starts:
        for e in ends:
          s, e = int(s), int(e)
          if s not in m["char_spans"] or e not in m["char_spans"]:
            continue
          if e < s or e - s + 1 > max_answer_length or not m["max_context"][s]:
            continue
          candidates.append((float(s_log[s] + e_log[e]), float(s_log[s]),
                             float(e_log[e]), m["char_spans"][s][0],
                             m["char_spans"][e][1]))
    candidates.sort(key=lambda c: -c[0])
    seen, best = set(), []
    for score, s_logit, e_logit, c0, c1 in candidates:
      text = ex.context[c0:c1]
      if text in seen:
        continue
      seen.add(text)
      best.append(dict(text=text, start_logit=s_logit, end_logit=e_logit,
                       score=score, start=c0, end=c1))
      if len(best) >= n_best_size:
        break
    if squad.version_2 and null_score is not None:
      best.append(dict(text="", start_logit=None, end_logit=None,
                       score=null_score, start=None, end=None))
      best.sort(key=lambda b: -b["score"])
    if not best:
      best = [dict(text="", start_logit=0.0, end_logit=0.0, score=0.0,
                   start=None, end=None)]
    scores = np.array([b["score"] for b in best])
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    nbest_out[ex.qas_id] = [
        dict(text=b["text"], probability=float(p), start_logit=b["start_logit"],
             end_logit=b["end_logit"], start=b["start"], end=b["end"])
        for b, p in zip(best, probs)]
    non_null = [b for b in best if b["text"]]
    if not squad.version_2:
      predictions[ex.qas_id] = non_null[0]["text"] if non_null else ""
    else:
      diff = null_score - (non_null[0]["score"] if non_null else -1e9)
      null_odds[ex.qas_id] = float(diff)
      predictions[ex.qas_id] = (
          "" if diff > squad.null_score_diff_threshold or not non_null
          else non_null[0]["text"])
  return predictions, nbest_out, null_odds


def check_unique_ids(examples: Sequence[SquadExample]) -> None:
  """Answers and scores are keyed by question id: two questions with one id
  would be merged silently (`read_squad` refuses such files; this guards
  examples built in code)."""
  first = {}
  for i, ex in enumerate(examples):
    if ex.qas_id in first:
      raise DataError(f"examples[{first[ex.qas_id]}] and examples[{i}] share "
                      f"question id {ex.qas_id!r} (ids must be unique)")
    first[ex.qas_id] = i


# ------------------------------------------------------ official metrics
def normalize_answer(text: str) -> str:
  """Lowercase, drop punctuation, drop articles (a, an, the), squeeze spaces."""
  text = text.lower()
  text = "".join(ch for ch in text if ch not in set(string.punctuation))
  text = re.sub(r"\b(a|an|the)\b", " ", text)
  return " ".join(text.split())


def f1_score(prediction: str, truth: str, version_2: bool = True) -> float:
  """Token-overlap F1. v2.0 scores an empty prediction against an empty
  (normalised) truth as 1; v1.1's script scores any empty side as 0."""
  pred_tokens = normalize_answer(prediction).split()
  truth_tokens = normalize_answer(truth).split()
  if not pred_tokens or not truth_tokens:
    return float(version_2 and pred_tokens == truth_tokens)
  common = collections.Counter(pred_tokens) & collections.Counter(truth_tokens)
  same = sum(common.values())
  if same == 0:
    return 0.0
  precision = same / len(pred_tokens)
  recall = same / len(truth_tokens)
  return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, truth: str) -> float:
  return float(normalize_answer(prediction) == normalize_answer(truth))


def squad_metrics(examples: Sequence[SquadExample], predictions: Dict[str, str],
                  null_odds: Optional[Dict[str, float]] = None,
                  version_2: Optional[bool] = None) -> Dict[str, float]:
  """EM and F1 (percent) as the official scripts: the max over the gold
  answers, averaged over questions (a no-answer question's gold is "").
  With `null_odds` (v2) also the best threshold and its EM/F1. `version_2`
  (default: whether null_odds is given) picks the script's F1 rule."""
  if version_2 is None:
    version_2 = null_odds is not None
  check_unique_ids(examples)
  em, f1 = {}, {}
  for ex in examples:
    truths = [t for t, _ in ex.answers] if not ex.is_impossible else [""]
    truths = truths or [""]
    pred = predictions.get(ex.qas_id, "")
    em[ex.qas_id] = max(exact_match(pred, t) for t in truths)
    f1[ex.qas_id] = max(f1_score(pred, t, version_2) for t in truths)
  n = len(examples)
  out = dict(exact_match=100.0 * sum(em.values()) / n,
             f1=100.0 * sum(f1.values()) / n)
  if null_odds is not None:
    has_answer = {ex.qas_id: not ex.is_impossible for ex in examples}
    for name, scores in (("exact_match", em), ("f1", f1)):
      best, threshold = _best_threshold(predictions, scores, null_odds, has_answer)
      out[f"best_{name}"], out[f"best_{name}_threshold"] = best, threshold
  return out


def _best_threshold(predictions, scores, null_odds, has_answer):
  """The official v2 `find_best_thresh`: predicting no-answer whenever the
  null odds exceed a threshold; the best score over thresholds."""
  score = sum(1 for q in has_answer if not has_answer[q])
  best, best_threshold = score, 0.0
  for q in sorted(null_odds, key=lambda k: null_odds[k]):
    if q not in scores:
      continue
    if has_answer[q]:
      diff = scores[q]
    else:
      diff = -1 if predictions.get(q) else 0
    score += diff
    if score > best:
      best, best_threshold = score, null_odds[q]
  return 100.0 * best / len(scores), best_threshold
