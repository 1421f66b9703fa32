"""SQuAD 1.1 / 2.0: reading, windowed features, post-processing, official metrics.

Features follow google-research `run_squad.py`: [CLS] question [SEP] context
window [SEP], the question cut to `max_query_length` pieces, the context
covered by windows of `max_seq_length - len(question) - 3` pieces every
`doc_stride` pieces; a piece is scored only in the window where it has the
most context on both sides. Answer character spans map to piece spans through
the tokenizer's character offsets, so predicted answers are cut from the
original context with its own casing and spacing. EM/F1 reimplement the
official evaluation scripts' rules (v1.1, and v2.0 with no-answer handling
and the best null-score threshold).
"""

import collections
import dataclasses
import json
import random
import re
import string
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from bert.data._io import read_text
from bert.data.errors import DataError
from bert.validation import ConfigError


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question: str
  context: str
  answers: List[Tuple[str, int]]        # (text, answer_start in characters)
  is_impossible: bool = False
  title: str = ""


def read_squad(path: str, articles: Optional[Sequence[str]] = None
               ) -> List[SquadExample]:
  """Examples of a SQuAD json (v1.1 or v2.0), optionally of some articles
  (by title). An answer whose `answer_start` does not point at its text is
  an error naming the file and question id."""
  try:
    data = json.loads(read_text(path))["data"]
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
  except (KeyError, TypeError) as e:
    raise DataError(f"{path}: not a SQuAD json file (no {e})") from None
  wanted = set(articles) if articles is not None else None
  examples = []
  for article in data:
    title = article.get("title", "")
    if wanted is not None and title not in wanted:
      continue
    for paragraph in article["paragraphs"]:
      context = paragraph["context"]
      for qa in paragraph["qas"]:
        impossible = bool(qa.get("is_impossible", False))
        answers = []
        for answer in qa.get("answers", []):
          text, start = answer["text"], int(answer["answer_start"])
          if context[start:start + len(text)] != text:
            raise DataError(
                f"{path}: question {qa['id']}: answer {text!r} is not at "
                f"answer_start {start} (the context there reads "
                f"{context[start:start + len(text)]!r})")
          answers.append((text, start))
        if not impossible and not answers:
          raise DataError(f"{path}: question {qa['id']} has no answer and is "
                          "not marked is_impossible")
        examples.append(SquadExample(qa["id"], qa["question"], context, answers,
                                     impossible, title))
  if not examples:
    raise DataError(f"{path}: no questions")
  return examples


def article_titles(path: str) -> List[str]:
  return [a.get("title", "") for a in json.loads(read_text(path))["data"]]


def split_articles(titles: Sequence[str], train_fraction: float, seed: int = 0
                   ) -> Tuple[List[str], List[str]]:
  """Article titles for training and for held-out evaluation (never split
  an article's questions between the two)."""
  shuffled = list(titles)
  random.Random(seed).shuffle(shuffled)
  k = int(round(len(shuffled) * train_fraction))
  return sorted(shuffled[:k]), sorted(shuffled[k:])


def _char_offsets(text: str, byte_starts, byte_ends):
  """UTF-8 byte offsets -> character offsets in `text`."""
  sizes = np.array([len(c.encode("utf-8")) for c in text], np.int64)
  to_char = np.zeros(int(sizes.sum()) + 1, np.int64)
  to_char[np.cumsum(sizes)] = 1
  to_char = np.cumsum(to_char)
  return to_char[np.asarray(byte_starts)], to_char[np.asarray(byte_ends)]


def encode_examples(examples: Sequence[SquadExample], tokenizer,
                    max_seq_length: int = 384, doc_stride: int = 128,
                    max_query_length: int = 64, training: bool = False
                    ) -> Tuple[Dict[str, np.ndarray], List[dict]]:
  """Windowed features of the examples.

  Returns (arrays, meta): arrays has int32 `input_word_ids`, `input_mask`,
  `input_type_ids` [n, max_seq_length], `feature_id` [n], and when training
  `start_positions`/`end_positions` (0 = [CLS]: no answer in the window);
  meta[i] has the example index, each position's character span in the
  context (None outside the context) and whether it is the piece's
  max-context window.
  """
  special = tokenizer.get_special_tokens_dict()
  cls, sep = special["start_of_sequence_id"], special["end_of_segment_id"]
  questions = tokenizer.tokenize([e.question for e in examples])
  contexts = {}
  unique = list(dict.fromkeys(e.context for e in examples))
  for text, (ids, b_start, b_end) in zip(
      unique, tokenizer.tokenize_with_offsets(unique)):
    c_start, c_end = _char_offsets(text, b_start, b_end)
    contexts[text] = (ids, c_start, c_end)
  rows = collections.defaultdict(list)
  meta = []
  for ex_index, ex in enumerate(examples):
    q = [int(x) for x in questions[ex_index][:max_query_length]]
    ids, c_start, c_end = contexts[ex.context]
    room = max_seq_length - len(q) - 3
    if room < 1:
      raise ConfigError(f"max_seq_length={max_seq_length} leaves no room for "
                        f"the context after a {len(q)}-piece question")
    spans, start = [], 0
    while True:
      length = min(len(ids) - start, room)
      spans.append((start, length))
      if start + length >= len(ids):
        break
      start += min(length, doc_stride)
    if training and ex.answers and not ex.is_impossible:
      text, char_start = ex.answers[0]
      char_end = char_start + len(text)
      inside = np.nonzero((c_end > char_start) & (c_start < char_end))[0]
      answer = (int(inside[0]), int(inside[-1])) if len(inside) else None
    else:
      answer = None
    for span_index, (start, length) in enumerate(spans):
      window = [int(x) for x in ids[start:start + length]]
      word_ids = [cls] + q + [sep] + window + [sep]
      offset = len(q) + 2
      n = len(word_ids)
      pad = max_seq_length - n
      rows["input_word_ids"].append(word_ids + [0] * pad)
      rows["input_mask"].append([1] * n + [0] * pad)
      rows["input_type_ids"].append([0] * offset + [1] * (length + 1) + [0] * pad)
      rows["feature_id"].append(len(meta))
      char_spans, max_context = {}, {}
      for j in range(length):
        piece = start + j
        char_spans[offset + j] = (int(c_start[piece]), int(c_end[piece]))
        max_context[offset + j] = _is_max_context(spans, span_index, piece)
      meta.append(dict(example=ex_index, char_spans=char_spans,
                       max_context=max_context))
      if training:
        s = e = 0
        if answer is not None and start <= answer[0] and answer[1] < start + length:
          s, e = answer[0] - start + offset, answer[1] - start + offset
        rows["start_positions"].append(s)
        rows["end_positions"].append(e)
  return {k: np.asarray(v, np.int32) for k, v in rows.items()}, meta


def _is_max_context(spans, span_index, position):
  """Whether window `span_index` gives piece `position` the most context
  (min of left and right context, + 0.01 * window length; as the reference)."""
  best, best_index = None, None
  for i, (start, length) in enumerate(spans):
    end = start + length - 1
    if position < start or position > end:
      continue
    score = min(position - start, end - position) + 0.01 * length
    if best is None or score > best:
      best, best_index = score, i
  return best_index == span_index


def postprocess(examples: Sequence[SquadExample], meta: Sequence[dict],
                start_logits: np.ndarray, end_logits: np.ndarray,
                n_best_size: int = 20, max_answer_length: int = 30,
                version_2: bool = False, null_score_diff_threshold: float = 0.0):
  """Answers from the logits of every feature.

  Returns (predictions {id: text}, nbest {id: [{text, probability,
  start_logit, end_logit, start, end}]} (start/end: the answer's character
  offsets in the context, end exclusive; None for no answer), null_odds
  {id: null score - best span score},
  v2 only). A span must lie in the context, start in its max-context window,
  end at or after its start and span at most `max_answer_length` pieces.
  """
  by_example = collections.defaultdict(list)
  for f, m in enumerate(meta):
    by_example[m["example"]].append(f)
  predictions, nbest_out, null_odds = {}, {}, {}
  for ex_index, ex in enumerate(examples):
    candidates = []
    null_score = None
    for f in by_example[ex_index]:
      m, s_log, e_log = meta[f], start_logits[f], end_logits[f]
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
    if version_2 and null_score is not None:
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
    if not version_2:
      predictions[ex.qas_id] = non_null[0]["text"] if non_null else ""
    else:
      diff = null_score - (non_null[0]["score"] if non_null else -1e9)
      null_odds[ex.qas_id] = float(diff)
      predictions[ex.qas_id] = ("" if diff > null_score_diff_threshold or not non_null
                                else non_null[0]["text"])
  return predictions, nbest_out, null_odds


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
