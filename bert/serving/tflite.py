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
from typing import Sequence

import numpy as np
import tensorflow as tf

from bert import precision as precision_lib
from bert.serving.grouped import INVOKE_COST_TOKENS, GroupedNetwork

PRECISIONS = precision_lib.SERVING
# The longest single row with an interpreter of its own (`TFLiteNetwork`).
SINGLE_ROW_MAX = 64


def _to_width(x: np.ndarray, width: int) -> np.ndarray:
  """int32 [1, width]: `x` [1, n] cut or zero-padded (padding is masked)."""
  out = np.zeros((1, width), np.int32)
  n = min(width, x.shape[1])
  out[:, :n] = x[:, :n]
  return out



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


class TFLiteNetwork(GroupedNetwork):
  """Runs a converted network: dict of int32 [batch, seq] numpy arrays ->
  dict of float32 outputs, in length groups (`bert.serving.grouped`).

  On SST-2 dev in batches of 32, cutting each batch to its longest row
  leaves 49% of the computed tokens real; the split (4.7 calls a batch)
  raises that to 86%.

  One interpreter is resized to each group's shape: measured on MiniLM
  (2 threads, SST-2 dev), that is faster than one interpreter per length,
  whose separate packed weights compete for the cache. XNNPACK takes its
  thread count at construction.

  A single short row (at most SINGLE_ROW_MAX tokens) runs at the smallest
  of `single_row_lengths` (the export's length buckets) that holds it, on an
  interpreter of its own that stays at that shape: a request then pays no
  resize and re-planning, which cost more than the padding (SST-2 dev one
  at a time: bench/SERVING_RUNS.md run 7). That is at most one more copy of
  the packed weights per such length; longer rows, whose compute dwarfs the
  re-planning, run on the shared interpreter at their exact length.
  """

  def __init__(self, model_content: bytes, num_threads: int = None,
               granularity: int = 8, invoke_cost: float = INVOKE_COST_TOKENS,
               single_row_lengths: Sequence[int] = ()):
    super().__init__(granularity, invoke_cost)
    self._model_content = model_content
    self._threads = num_threads or os.cpu_count() or 1
    # Resizes the inputs to each call's arrays (a no-op when unchanged).
    self._runner = self._new_runner()
    self._single_lengths = sorted(int(n) for n in single_row_lengths
                                  if 0 < int(n) <= SINGLE_ROW_MAX)
    self._single_runners = {}     # length -> its runner, made on first use
    # Outputs with a sequence axis ([batch, seq, ...]) are padded back
    # together; the others ([batch, ...]) are only reordered.
    self._sequence_outputs = {
        name: len(detail["shape_signature"]) >= 3 or (
            len(detail["shape_signature"]) == 2 and detail["shape_signature"][1] < 0)
        for name, detail in self._runner.get_output_details().items()}

  def _new_runner(self):
    return _interpreter_class()(model_content=self._model_content,
                                num_threads=self._threads).get_signature_runner()

  def _run_single(self, inputs, length):
    width = next((n for n in self._single_lengths if n >= length), None)
    if width is None:
      return self._run(inputs, slice(None), length)
    runner = self._single_runners.get(width)
    if runner is None:
      runner = self._single_runners[width] = self._new_runner()
    return runner(**{k: _to_width(v, width) for k, v in inputs.items()})

  def _run(self, inputs, rows, length):
    return self._runner(**{k: np.ascontiguousarray(v[rows, :length], np.int32)
                           for k, v in inputs.items()})
