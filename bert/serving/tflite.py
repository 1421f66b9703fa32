"""The network stage in TFLite: int8 dynamic-range quantization on XNNPACK.

Dynamic-range quantization stores each dense kernel as int8 with one scale
per output channel and quantizes the activations per row at run time; on
x86 the XNNPACK delegate (on by default) runs those FULLY_CONNECTED ops with
int8 dot products (VNNI where the CPU has it), the rest (attention's two
activation-activation matmuls, LayerNorm, softmax, GELU) in fp32.

Only the network goes to TFLite: the exact WordPiece tokenizer uses string
ops (regex, Unicode decoding) that TFLite has no kernels for, and the
TF Text ops it does have (FastBertTokenizer) differ from the reference
tokenizer on some text. Tokenization and post-processing stay in the
SavedModel's graphs (`bert.serving.stages`).
"""

import os
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

from bert import precision as precision_lib

PRECISIONS = precision_lib.SERVING

# What one interpreter call costs beyond its tokens, in tokens of compute
# (MiniLM, 2 threads, Zen 5: see bench/SERVING.md).
INVOKE_COST_TOKENS = 32.0


def convert(network: tf.types.experimental.ConcreteFunction, module,
            quantize: bool = True) -> bytes:
  """The TFLite flatbuffer of `network` (the serving module's network
  concrete function), int8 dynamic-range quantized when `quantize`."""
  converter = tf.lite.TFLiteConverter.from_concrete_functions([network], module)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if quantize:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  return converter.convert()


def _interpreter_class():
  """TF 2.20 deprecates `tf.lite.Interpreter` for ai_edge_litert's (the same
  runtime); use it where installed."""
  try:
    from ai_edge_litert import interpreter  # pylint: disable=g-import-not-at-top
  except ImportError:
    interpreter = tf.lite
  return interpreter.Interpreter


def plan_groups(lengths: np.ndarray, granularity: int,
                invoke_cost: float) -> List[Tuple[np.ndarray, int]]:
  """Splits a batch's rows into groups that each run at their own length.

  Rows are taken in order of length (rounded up to `granularity`); a group
  costs its rows times its longest length, in tokens, plus `invoke_cost`
  tokens for the call itself (the interpreter's resize and the delegate's
  re-planning). The split with the least total cost is found exactly by
  dynamic programming over the distinct rounded lengths (at most
  seq_length / granularity of them).

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


class TFLiteNetwork:
  """Runs a converted network: dict of int32 [batch, seq] numpy arrays ->
  dict of float32 outputs.

  No compute on padding beyond `granularity` tokens per row: the rows are
  split by length into groups (`plan_groups`), and each group runs cut to
  its longest row rounded up to `granularity` tokens (a batch of one row:
  to its length, faster than rounding for single requests; figures in
  bench/SERVING_RUNS.md). Trailing
  padding changes no real token's output. Sequence outputs come back as
  long as the longest group, zero past each row's group length; the
  post-processing reads real positions only. On SST-2 dev in batches of 32,
  cutting each batch to its longest row leaves 49% of the computed tokens
  real; the split (4.7 calls a batch) raises that to 86%.

  One interpreter is resized to each group's shape: measured on MiniLM
  (2 threads, SST-2 dev), that is faster than one interpreter per length,
  whose separate packed weights compete for the cache. XNNPACK takes its
  thread count at construction.
  """

  def __init__(self, model_content: bytes, num_threads: int = None,
               granularity: int = 8, invoke_cost: float = INVOKE_COST_TOKENS):
    interpreter = _interpreter_class()(model_content=model_content,
                                       num_threads=num_threads or os.cpu_count() or 1)
    # Resizes the inputs to each call's arrays (a no-op when unchanged).
    self._runner = interpreter.get_signature_runner()
    # Outputs with a sequence axis ([batch, seq, ...]) are padded back
    # together; the others ([batch, ...]) are only reordered.
    self._sequence_outputs = {
        name: len(detail["shape_signature"]) >= 3 or (
            len(detail["shape_signature"]) == 2 and detail["shape_signature"][1] < 0)
        for name, detail in self._runner.get_output_details().items()}
    self._granularity = granularity
    self._invoke_cost = invoke_cost

  def _run(self, inputs, rows, length):
    return self._runner(**{k: np.ascontiguousarray(v[rows, :length], np.int32)
                           for k, v in inputs.items()})

  def __call__(self, **inputs: np.ndarray) -> Dict[str, np.ndarray]:
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    mask = inputs["input_mask"]
    full = mask.shape[1]
    # A single row has no other row to share a shape with: its exact length.
    step = 1 if mask.shape[0] == 1 else self._granularity
    groups = plan_groups(mask.sum(-1), step, self._invoke_cost)
    groups = [(rows, min(full, length)) for rows, length in groups]
    if len(groups) == 1:
      return self._run(inputs, slice(None), groups[0][1])
    longest = groups[-1][1]
    outputs = {}
    for rows, length in groups:
      for name, value in self._run(inputs, rows, length).items():
        if name not in outputs:
          shape = (mask.shape[0],) + ((longest,) + value.shape[2:]
                                      if self._sequence_outputs[name] else value.shape[1:])
          outputs[name] = np.zeros(shape, value.dtype)
        if self._sequence_outputs[name]:
          outputs[name][rows, :length] = value
        else:
          outputs[name][rows] = value
    return outputs
