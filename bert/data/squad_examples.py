"""SQuAD examples and their windowed model features (1.1 and 2.0 files).

Features follow google-research `run_squad.py` (with the settings of a
`bert.data.squad_config.SquadConfig`): [CLS] question [SEP] context window
[SEP], the question cut to `max_query_length` pieces, the context covered by
windows of `seq_length - len(question) - 3` pieces every `doc_stride`
pieces; a piece is scored only in the window where it has the most context
on both sides. Answer character spans map to piece spans through
the tokenizer's character offsets, so `bert.data.squad_eval` can cut predicted
answers from the original context with its own casing and spacing.
"""

import collections
import random
from typing import Dict, List, Sequence, Tuple

import numpy as np

# The one checked reader of SQuAD files; its names are this module's API too.
from bert.data.errors import DataError
from bert.data.squad_config import SquadConfig
from bert.data.squad_json import (  # pylint: disable=unused-import
    SquadExample, article_titles, load_squad, read_squad)


def split_articles(titles: Sequence[str], train_fraction: float, seed: int = 0
                   ) -> Tuple[List[str], List[str]]:
  """Article titles for training and for held-out evaluation (never split
  an article's questions between the two; a repeated title is one
  article: on both sides, it would put its questions on both)."""
  shuffled = list(dict.fromkeys(titles))
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
                    squad: SquadConfig, training: bool = False
                    ) -> Tuple[Dict[str, np.ndarray], List[dict]]:
  """Windowed features of the examples (`squad`: seq_length, doc_stride,
  max_query_length).

  Returns (arrays, meta): arrays has int32 `input_word_ids`, `input_mask`,
  `input_type_ids` [n, seq_length], `feature_id` [n], and when training
  `start_positions`/`end_positions` (0 = [CLS]: no answer in the window);
  meta[i] has the example index, the row's length in tokens, each
  position's character span in the
  context (None outside the context) and whether it is the piece's
  max-context window.
  """
  template = tokenizer.template
  specials = template.special_count(2)
  questions = tokenizer.tokenize([e.question for e in examples])
  contexts = {}
  unique = list(dict.fromkeys(e.context for e in examples))
  for text, (ids, b_start, b_end) in zip(
      unique, tokenizer.tokenize_with_offsets(unique)):
    c_start, c_end = _char_offsets(text, b_start, b_end)
    contexts[text] = (ids, c_start, c_end)
  rows = collections.defaultdict(list)
  meta = []
  seq_length = squad.seq_length
  for ex_index, ex in enumerate(examples):
    q = [int(x) for x in questions[ex_index][:squad.max_query_length]]
    ids, c_start, c_end = contexts[ex.context]
    room = seq_length - len(q) - specials
    if room < 1:
      raise DataError(f"seq_length={seq_length} leaves no room for the "
                      f"context after a {len(q)}-piece question and "
                      f"{specials} special tokens; lower max_query_length")
    spans, start = [], 0
    while True:
      length = min(len(ids) - start, room)
      spans.append((start, length))
      if start + length >= len(ids):
        break
      start += min(length, squad.doc_stride)
    if training and ex.answers and not ex.is_impossible:
      text, char_start = ex.answers[0]
      char_end = char_start + len(text)
      inside = np.nonzero((c_end > char_start) & (c_start < char_end))[0]
      answer = (int(inside[0]), int(inside[-1])) if len(inside) else None
    else:
      answer = None
    for span_index, (start, length) in enumerate(spans):
      window = [int(x) for x in ids[start:start + length]]
      word_ids, mask, types = template.pack([q, window], seq_length)
      offset = len(q) + 1 + template.separators_between_segments
      n = sum(mask)
      rows["input_word_ids"].append(word_ids)
      rows["input_mask"].append(mask)
      rows["input_type_ids"].append(types)
      rows["feature_id"].append(len(meta))
      char_spans, max_context = {}, {}
      for j in range(length):
        piece = start + j
        char_spans[offset + j] = (int(c_start[piece]), int(c_end[piece]))
        max_context[offset + j] = _is_max_context(spans, span_index, piece)
      meta.append(dict(example=ex_index, row_length=n, char_spans=char_spans,
                       max_context=max_context))
      if training:
        s = e = 0
        if answer is not None and start <= answer[0] and answer[1] < start + length:
          s, e = answer[0] - start + offset, answer[1] - start + offset
        rows["start_positions"].append(s)
        rows["end_positions"].append(e)
  return {k: np.asarray(v, np.int32) for k, v in rows.items()}, meta


# The windows' post-processing data as arrays (what TFRecords store):
# example index and real length per window; per position, the character
# span in the context (-1 outside it) and the max-context flag.
META_FEATURES = ("window_example", "window_length", "window_char_start",
                 "window_char_end", "window_max_context")


def meta_arrays(meta: Sequence[dict], seq_length: int,
                first_example: int = 0) -> Dict[str, np.ndarray]:
  """`encode_examples`' meta as arrays (example indices offset by
  `first_example`); `meta_from_arrays` gives it back."""
  n = len(meta)
  start = np.full((n, seq_length), -1, np.int32)
  end = np.full((n, seq_length), -1, np.int32)
  best = np.zeros((n, seq_length), np.int32)
  for i, m in enumerate(meta):
    for position, (a, b) in m["char_spans"].items():
      start[i, position], end[i, position] = a, b
      best[i, position] = int(m["max_context"][position])
  return dict(
      window_example=np.array([m["example"] + first_example for m in meta],
                              np.int32),
      window_length=np.array([m["row_length"] for m in meta], np.int32),
      window_char_start=start, window_char_end=end, window_max_context=best)


def meta_from_arrays(arrays: Dict[str, np.ndarray]) -> List[dict]:
  """The meta list of `encode_examples` from `meta_arrays`' arrays."""
  meta = []
  for i in range(len(arrays["window_example"])):
    positions = np.nonzero(arrays["window_char_start"][i] >= 0)[0]
    meta.append(dict(
        example=int(arrays["window_example"][i]),
        row_length=int(arrays["window_length"][i]),
        char_spans={int(p): (int(arrays["window_char_start"][i, p]),
                             int(arrays["window_char_end"][i, p]))
                    for p in positions},
        max_context={int(p): bool(arrays["window_max_context"][i, p])
                     for p in positions}))
  return meta


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
