"""Sequence packing: several short examples per row, no compute on padding.

Examples are encoded one per row at `seq_length` (padded). Packing moves the
real tokens of up to `max_per_row` examples into one row of the same length:

  input_word_ids, input_type_ids, other per-token features: concatenated;
  input_mask:      each token's 1-based example index in its row (0 = pad),
                   from which the encoder builds a block-diagonal attention
                   mask, so examples never attend to each other;
  input_positions: position ids that restart at 0 for every example;
  cls_positions:   [rows, k] each example's first token (its [CLS]), where
                   the encoder pools per example;
  packed_example_mask  [rows, k]: 1 for a real example, 0 for an empty slot;
  packed_example_index [rows, k]: the example's row before packing (-1).

Per-example features (labels, `example_row`, ...) become [rows, k, ...];
features that index the sequence (`masked_lm_positions`) are shifted by the
example's offset and, with their companions (`masked_lm_ids`,
`masked_lm_weights`), concatenated to [rows, k * P].

Rows are filled by best-fit decreasing over a histogram of lengths: take the
longest example left, then repeatedly the longest that still fits, which
packs typical length distributions to within a few percent of the ideal row
count in O(examples x seq_length).
"""

from typing import Dict, List, Optional, Sequence

import numpy as np

from bert.data import length_buckets as lb

PACKED_KEYS = ("input_positions", "cls_positions", "packed_example_mask",
               "packed_example_index")


def pack_rows(lengths: Sequence[int], seq_length: int,
              max_per_row: int = 8) -> List[List[int]]:
  """Groups example indices into rows of total length <= `seq_length` and at
  most `max_per_row` examples (best-fit decreasing; deterministic)."""
  if max_per_row < 1:
    raise ValueError(f"max_per_row must be >= 1, got {max_per_row}")
  lengths = np.asarray(lengths, np.int64)
  if len(lengths) and (lengths.min() < 1 or lengths.max() > seq_length):
    bad = int(np.argmax((lengths < 1) | (lengths > seq_length)))
    raise ValueError(f"example {bad} has length {int(lengths[bad])}, outside "
                     f"[1, seq_length={seq_length}]")
  # by_length[L]: the indices of examples of length L, last = next taken.
  by_length: List[List[int]] = [[] for _ in range(seq_length + 1)]
  for i in reversed(range(len(lengths))):   # so pop() takes the lowest index
    by_length[lengths[i]].append(i)
  count = np.array([len(b) for b in by_length])
  rows = []
  longest = seq_length
  remaining = len(lengths)
  while remaining:
    while count[longest] == 0:
      longest -= 1
    row = [by_length[longest].pop()]
    count[longest] -= 1
    space = seq_length - longest
    while len(row) < max_per_row and space > 0:
      fit = min(space, longest)
      while fit > 0 and count[fit] == 0:
        fit -= 1
      if fit == 0:
        break
      row.append(by_length[fit].pop())
      count[fit] -= 1
      space -= fit
    remaining -= len(row)
    rows.append(row)
  return rows


def pack(features: Dict[str, np.ndarray], seq_length: int,
         max_per_row: int = 8, *,
         position_keys: Sequence[str] = ("masked_lm_positions",),
         concat_keys: Sequence[str] = ("masked_lm_ids", "masked_lm_weights"),
         rows: Optional[List[List[int]]] = None) -> Dict[str, np.ndarray]:
  """Packs one-example-per-row `features` (see the module docstring).

  Args:
    features: arrays with the examples on axis 0; those of shape
      [n, seq_length] (except `input_mask`) are per-token, `position_keys`
      and `concat_keys` are per-example sequences concatenated per row, all
      others are per-example values stacked to [rows, k, ...].
    seq_length: row length (the features' padded length).
    max_per_row: k, the most examples in one row.
    rows: a grouping from `pack_rows` (default: computed here).
  """
  if "input_mask" not in features or "input_word_ids" not in features:
    raise ValueError("pack needs input_word_ids and input_mask")
  mask = np.asarray(features["input_mask"])
  if mask.ndim != 2 or mask.shape[1] != seq_length:
    raise ValueError(f"input_mask has shape {mask.shape}; expected "
                     f"[examples, seq_length={seq_length}]")
  lengths = mask.astype(bool).sum(-1)
  if rows is None:
    rows = pack_rows(lengths, seq_length, max_per_row)
  k = max(max_per_row, max(len(r) for r in rows) if rows else 1)
  n_rows = len(rows)
  listed = set(position_keys) | set(concat_keys)
  token_keys = [key for key in lb.sequence_keys(features, seq_length)
                if key != "input_mask" and key not in listed]
  concat = [key for key in features if key in listed]
  stacked = [key for key in features
             if key not in token_keys and key not in listed and key != "input_mask"]

  out = {key: np.zeros((n_rows, seq_length), features[key].dtype)
         for key in token_keys}
  out["input_mask"] = np.zeros((n_rows, seq_length), np.int32)
  out["input_positions"] = np.zeros((n_rows, seq_length), np.int32)
  out["cls_positions"] = np.zeros((n_rows, k), np.int32)
  out["packed_example_mask"] = np.zeros((n_rows, k), np.int32)
  out["packed_example_index"] = np.full((n_rows, k), -1, np.int64)
  for key in stacked:
    v = features[key]
    out[key] = np.zeros((n_rows, k) + v.shape[1:], v.dtype)
  for key in concat:
    v = features[key]
    out[key] = np.zeros((n_rows, k * v.shape[1]), v.dtype)

  for r, row in enumerate(rows):
    offset = 0
    for slot, i in enumerate(row):
      n = int(lengths[i])
      span = slice(offset, offset + n)
      for key in token_keys:
        out[key][r, span] = features[key][i, :n]
      out["input_mask"][r, span] = slot + 1
      out["input_positions"][r, span] = np.arange(n)
      out["cls_positions"][r, slot] = offset
      out["packed_example_mask"][r, slot] = 1
      out["packed_example_index"][r, slot] = i
      for key in stacked:
        out[key][r, slot] = features[key][i]
      for key in concat:
        v = features[key][i]
        width = v.shape[0]
        out[key][r, slot * width:(slot + 1) * width] = (
            v + offset if key in position_keys else v)
      offset += n
  return out


def packing_summary(lengths: Sequence[int], rows: List[List[int]],
                    seq_length: int) -> str:
  """A log line: rows before/after and the share of positions that are
  real tokens."""
  tokens = int(np.sum(lengths))
  return (f"packing: {len(lengths)} examples into {len(rows)} rows of "
          f"{seq_length} ({len(lengths) / max(1, len(rows)):.2f} per row); "
          f"{100.0 * tokens / max(1, len(rows) * seq_length):.0f}% of the "
          f"positions are real tokens (unpacked: "
          f"{100.0 * tokens / max(1, len(lengths) * seq_length):.0f}%)")
