"""Running a network stage outside TensorFlow in length groups.

A runtime that takes NumPy arrays (TFLite, OpenVINO) computes whatever shape
it is given, padding included. `GroupedNetwork` splits a batch's rows by
length (`plan_groups`), runs each group cut to its own longest row, and puts
the outputs back in row order, so a runtime only implements `_run` (one
group at one length).
"""

from typing import Dict, List, Mapping, Tuple

import numpy as np

# What one runtime call costs beyond its tokens, in tokens of compute
# (measured for TFLite on MiniLM, 2 threads, Zen 5: bench/SERVING.md; OpenVINO
# takes the same until measured apart).
INVOKE_COST_TOKENS = 32.0


def plan_groups(lengths: np.ndarray, granularity: int,
                invoke_cost: float) -> List[Tuple[np.ndarray, int]]:
  """Splits a batch's rows into groups that each run at their own length.

  Rows are taken in order of length (rounded up to `granularity`); a group
  costs its rows times its longest length, in tokens, plus `invoke_cost`
  tokens for the call itself (the runtime's resize and re-planning). The
  split with the least total cost is found exactly by dynamic programming
  over the distinct rounded lengths (at most seq_length / granularity of
  them).

  Returns: [(row indices, length)], shortest group first.
  """
  rounded = np.maximum(granularity, -(-lengths // granularity) * granularity)
  values, counts = np.unique(rounded, return_counts=True)
  k = len(values)
  best = [0.0] + [float("inf")] * k   # best[j]: cost of the j shortest values
  start = [0] * (k + 1)
  for j in range(1, k + 1):
    rows = 0
    for i in range(j - 1, -1, -1):   # a group of values[i:j], run at values[j-1]
      rows += counts[i]
      cost = best[i] + rows * values[j - 1] + invoke_cost
      if cost < best[j]:
        best[j], start[j] = cost, i
  bounds, j = [], k
  while j > 0:
    bounds.append((start[j], j))
    j = start[j]
  groups = []
  for i, j in reversed(bounds):
    rows = np.flatnonzero((rounded >= values[i]) & (rounded <= values[j - 1]))
    groups.append((rows, int(values[j - 1])))
  return groups


class GroupedNetwork:
  """Encoder inputs (int32 [batch, seq] NumPy arrays) -> the network's
  outputs, with no compute on padding beyond `granularity` tokens per row.

  The rows are split by length into groups (`plan_groups`), and each group
  runs cut to its longest row rounded up to `granularity` tokens (a batch of
  one row: to its exact length). Trailing padding changes no real token's
  output. Sequence outputs come back as long as the longest group, zero past
  each row's group length; post-processing reads real positions only.

  Subclasses implement `_run(inputs, rows, length)` -> dict of NumPy
  outputs, and say which outputs have a sequence axis
  (`self._sequence_outputs`: name -> bool); they may run a single row
  their own way (`_run_single`).
  """

  def __init__(self, granularity: int, invoke_cost: float):
    self._granularity = granularity
    self._invoke_cost = invoke_cost
    self._sequence_outputs: Dict[str, bool] = {}

  def _run(self, inputs: Mapping[str, np.ndarray], rows, length: int
           ) -> Dict[str, np.ndarray]:
    raise NotImplementedError

  def _run_single(self, inputs: Mapping[str, np.ndarray], length: int
                  ) -> Dict[str, np.ndarray]:
    """One row of `length` tokens: it has no other row to share a shape
    with, so by default its exact length."""
    return self._run(inputs, slice(None), length)

  def __call__(self, **inputs: np.ndarray) -> Dict[str, np.ndarray]:
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    mask = inputs["input_mask"]
    full = mask.shape[1]
    if mask.shape[0] == 1:
      return self._run_single(inputs, min(full, max(1, int(mask.sum()))))
    groups = plan_groups(mask.sum(-1), self._granularity, self._invoke_cost)
    groups = [(rows, min(full, length)) for rows, length in groups]
    if len(groups) == 1:
      return self._run(inputs, slice(None), groups[0][1])
    longest = groups[-1][1]
    outputs = {}
    for rows, length in groups:
      for name, value in self._run(inputs, rows, length).items():
        sequence = self._sequence_outputs[name]
        if name not in outputs:
          shape = (mask.shape[0],) + ((longest,) + value.shape[2:]
                                      if sequence else value.shape[1:])
          outputs[name] = np.zeros(shape, value.dtype)
        if sequence:
          outputs[name][rows, :length] = value
        else:
          outputs[name][rows] = value
    return outputs
