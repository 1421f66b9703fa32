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

import collections
import os
from typing import Dict

import numpy as np
import tensorflow as tf

PRECISIONS = ("fp32", "bf16", "int8")


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


class TFLiteNetwork:
  """Runs a converted network: dict of int32 [batch, seq] numpy arrays ->
  dict of float32 outputs.

  One interpreter per sequence length (the serving module's buckets), each
  resized when the batch size changes: a TFLite interpreter re-plans its
  memory on every shape change, so keeping one per length makes a stream
  of mixed lengths cost no re-planning. XNNPACK takes its thread count at
  construction only.
  """

  def __init__(self, model_content: bytes, num_threads: int = None,
               max_interpreters: int = 8):
    self._content = model_content
    self._threads = num_threads or os.cpu_count() or 1
    self._max = max_interpreters
    self._runners = collections.OrderedDict()

  def _runner(self, length: int):
    runner = self._runners.pop(length, None)
    if runner is None:
      interpreter = _interpreter_class()(model_content=self._content,
                                         num_threads=self._threads)
      runner = interpreter.get_signature_runner()
      if len(self._runners) >= self._max:
        self._runners.popitem(last=False)
    self._runners[length] = runner       # most recently used last
    return runner

  def __call__(self, **inputs: np.ndarray) -> Dict[str, np.ndarray]:
    arrays = {k: np.ascontiguousarray(v, np.int32) for k, v in inputs.items()}
    length = next(iter(arrays.values())).shape[1]
    return self._runner(length)(**arrays)
