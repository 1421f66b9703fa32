"""Sequence packing: several short examples per row, no compute on padding.

Examples are encoded one per row at `seq_length` (padded). Packing moves the
real tokens of up to `max_per_row` examples into one row of `row_length`
(default: the same length; `choose_row_length` picks a shorter one where the
examples are short, so attention spans fewer positions):

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

from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert.data import length_buckets as lb
from bert.features import ENCODER_INPUTS, PACKED_ROW_INPUTS



def pack_rows(lengths: Sequence[int], row_length: int,
              max_per_row: int = 8) -> List[List[int]]:
  """Groups example indices into rows of total length <= `row_length` and at
  most `max_per_row` examples (best-fit decreasing; deterministic)."""
  if max_per_row < 1:
    raise ValueError(f"max_per_row must be >= 1, got {max_per_row}")
  lengths = np.asarray(lengths, np.int64)
  if len(lengths) and (lengths.min() < 1 or lengths.max() > row_length):
    bad = int(np.argmax((lengths < 1) | (lengths > row_length)))
    raise ValueError(f"example {bad} has length {int(lengths[bad])}, outside "
                     f"[1, row length {row_length}]")
  # by_length[L]: the indices of examples of length L, last = next taken.
  by_length: List[List[int]] = [[] for _ in range(row_length + 1)]
  for i in reversed(range(len(lengths))):   # so pop() takes the lowest index
    by_length[lengths[i]].append(i)
  count = np.array([len(b) for b in by_length])
  rows = []
  longest = row_length
  remaining = len(lengths)
  while remaining:
    while count[longest] == 0:
      longest -= 1
    row = [by_length[longest].pop()]
    count[longest] -= 1
    space = row_length - longest
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
         rows: Optional[List[List[int]]] = None,
         pad_values: Optional[Mapping[str, int]] = None,
         row_length: Optional[int] = None) -> Dict[str, np.ndarray]:
  """Packs one-example-per-row `features` (see the module docstring).

  Args:
    features: arrays with the examples on axis 0; those of shape
      [n, seq_length] (except `input_mask`) are per-token, `position_keys`
      and `concat_keys` are per-example sequences concatenated per row, all
      others are per-example values stacked to [rows, k, ...].
    seq_length: the features' padded length.
    max_per_row: k, the most examples in one row.
    rows: a grouping from `pack_rows` (default: computed here).
    pad_values: fill value of per-token features outside any example
      (default 0; e.g. -1 for `label_ids`, which marks "no label").
    row_length: the packed rows' length, <= seq_length (default seq_length);
      every example must fit in it.
  """
  if "input_mask" not in features or "input_word_ids" not in features:
    raise ValueError("pack needs input_word_ids and input_mask")
  mask = np.asarray(features["input_mask"])
  if mask.ndim != 2 or mask.shape[1] != seq_length:
    raise ValueError(f"input_mask has shape {mask.shape}; expected "
                     f"[examples, seq_length={seq_length}]")
  row_length = seq_length if row_length is None else row_length
  if not 1 <= row_length <= seq_length:
    raise ValueError(f"row_length={row_length} must be in [1, seq_length="
                     f"{seq_length}]")
  lengths = mask.astype(bool).sum(-1)
  if rows is None:
    rows = pack_rows(lengths, row_length, max_per_row)
  k = max(max_per_row, max(len(r) for r in rows) if rows else 1)
  n_rows = len(rows)
  listed = set(position_keys) | set(concat_keys)
  token_keys = [key for key in lb.sequence_keys(features, seq_length)
                if key != "input_mask" and key not in listed]
  concat = [key for key in features if key in listed]
  stacked = [key for key in features
             if key not in token_keys and key not in listed and key != "input_mask"]

  pad_values = dict(pad_values or {})
  out = {key: np.full((n_rows, row_length), pad_values.get(key, 0),
                      features[key].dtype)
         for key in token_keys}
  out["input_mask"] = np.zeros((n_rows, row_length), np.int32)
  out["input_positions"] = np.zeros((n_rows, row_length), np.int32)
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


def choose_row_length(lengths: Sequence[int], candidates: Sequence[int],
                      hidden_size: int, batch_size: Optional[int] = None,
                      max_per_row: int = 8, sample: int = 4096) -> int:
  """The packed row length, among `candidates`, of the least estimated cost.

  Per layer, a row of L positions costs about L * (24 H^2 + 4 H L) FLOPs
  (H = hidden_size): the dense layers' 24 H^2 per position plus attention's
  4 H per pair of positions. Shorter rows make attention cheaper but may
  leave more of each row empty (two examples of 60 tokens share a row of
  128, not one of 96), so each candidate's cost is estimated as the
  positions it packs a sample of `lengths` into, times (6 H + L). The
  sample (seeded) is packed as the real data will be: in batches of
  `batch_size` examples (training steps), or all at once (None).
  Candidates shorter than the longest example are not considered.
  """
  lengths = np.asarray(lengths, np.int64)
  if not len(lengths):
    raise ValueError("choose_row_length: no examples")
  longest = int(lengths.max())
  fitting = sorted(c for c in candidates if c >= longest)
  if not fitting:
    raise ValueError(f"choose_row_length: no candidate row length in "
                     f"{sorted(candidates)} holds the longest example "
                     f"({longest} tokens)")
  if len(fitting) == 1:
    return int(fitting[0])
  rng = np.random.default_rng(0)
  drawn = rng.permutation(lengths)[:sample]
  step = batch_size or len(drawn)
  batches = [drawn[i:i + step] for i in range(0, len(drawn), step)]
  costs = [sum(len(pack_rows(b, c, max_per_row)) for b in batches) * c
           * (6 * hidden_size + c) for c in fitting]
  return int(fitting[int(np.argmin(costs))])


def batch_packer(element_spec: Mapping[str, tf.TensorSpec], seq_length: int,
                 max_per_row: int = 8,
                 pad_values: Optional[Mapping[str, int]] = None,
                 row_length: Optional[int] = None) -> Callable:
  """A tf.data map function that packs each batch of one-example-per-row
  features (all of the batch's examples, into as many rows of `row_length`,
  default `seq_length`, as they need: the number of examples per step stays
  the batch size). `element_spec` is the batched dataset's; per-token
  features must have `seq_length` as their last dimension."""
  keys = list(element_spec)
  probe = {k: np.zeros([2] + [d or seq_length for d in spec.shape[1:]],
                       spec.dtype.as_numpy_dtype)
           for k, spec in element_spec.items()}
  probe["input_mask"][:, 0] = 1
  layout = pack(probe, seq_length, max_per_row, pad_values=pad_values,
                row_length=row_length)
  out_keys = list(layout)
  out_types = [tf.as_dtype(layout[k].dtype) for k in out_keys]
  out_shapes = [[None] + list(layout[k].shape[1:]) for k in out_keys]

  def pack_numpy(*arrays):
    packed = pack(dict(zip(keys, arrays)), seq_length, max_per_row,
                  pad_values=pad_values, row_length=row_length)
    return [packed[k] for k in out_keys]

  def pack_batch(features):
    values = tf.numpy_function(pack_numpy, [features[k] for k in keys],
                               out_types, stateful=False)
    out = {}
    for k, v, shape in zip(out_keys, values, out_shapes):
      v.set_shape(shape)
      out[k] = v
    return out

  return pack_batch


def predict_packed(fn: Callable, features: Mapping[str, np.ndarray],
                   batch_rows: int, seq_length: int, max_per_row: int = 8,
                   sequence_outputs: Sequence[str] = (),
                   pad_value: float = -1e4,
                   row_length: Optional[int] = None) -> Dict[str, np.ndarray]:
  """`fn(batch)` (a dict of outputs) over all examples of `features`, packed.

  Examples are packed into rows of `row_length` (default `seq_length`; see
  `choose_row_length`) and run `batch_rows` rows at
  a time; outputs come back per example in the examples' order: per-example
  outputs ([rows, k, ...]) by slot, those named in `sequence_outputs`
  ([rows, seq, ...]) cut back out of the rows and padded to `seq_length`
  with `pad_value`.
  """
  model_keys = [k for k in features if k in ENCODER_INPUTS]
  packed = pack({k: np.asarray(features[k]) for k in model_keys}, seq_length,
                max_per_row, row_length=row_length)
  inputs = ENCODER_INPUTS + PACKED_ROW_INPUTS
  index, slot_mask = packed["packed_example_index"], packed["packed_example_mask"]
  n = len(features["input_mask"])
  lengths = np.asarray(features["input_mask"]).astype(bool).sum(-1)
  merged: Dict[str, np.ndarray] = {}
  for start in range(0, len(index), batch_rows):
    rows = slice(start, start + batch_rows)
    out = fn({k: tf.constant(packed[k][rows]) for k in inputs if k in packed})
    for key, value in out.items():
      value = np.asarray(value)
      if key in sequence_outputs:
        if key not in merged:
          merged[key] = np.full((n, seq_length) + value.shape[2:], pad_value,
                                value.dtype)
        for r, row in enumerate(range(start, start + len(value))):
          for s in np.nonzero(slot_mask[row])[0]:
            i = index[row, s]
            offset = packed["cls_positions"][row, s]
            merged[key][i, :lengths[i]] = value[r, offset:offset + lengths[i]]
      else:
        if key not in merged:
          merged[key] = np.zeros((n,) + value.shape[2:], value.dtype)
        taken = slot_mask[rows] > 0
        merged[key][index[rows][taken]] = value[taken]
  if not merged:
    raise ValueError("predict_packed: no rows")
  return merged
