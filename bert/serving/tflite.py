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

  The batch is cut further than the SavedModel's length buckets: to its
  longest row rounded up to `granularity` tokens (trailing padding changes
  no real token's output; sequence outputs come back that long, and the
  post-processing reads real positions only). One interpreter is resized to
  each batch's shape: measured on MiniLM (2 threads, SST-2 dev), that is
  faster than one interpreter per length, whose separate packed weights
  compete for the cache. XNNPACK takes its thread count at construction.
  """

  def __init__(self, model_content: bytes, num_threads: int = None,
               granularity: int = 8):
    interpreter = _interpreter_class()(model_content=model_content,
                                       num_threads=num_threads or os.cpu_count() or 1)
    # Resizes the inputs to each call's arrays (a no-op when unchanged).
    self._runner = interpreter.get_signature_runner()
    self._granularity = granularity

  def __call__(self, **inputs: np.ndarray) -> Dict[str, np.ndarray]:
    mask = np.asarray(inputs["input_mask"])
    longest = int(mask.sum(-1).max()) if mask.size else 0
    step = self._granularity
    length = min(mask.shape[1], max(step, -(-longest // step) * step))
    return self._runner(**{k: np.ascontiguousarray(np.asarray(v)[:, :length], np.int32)
                            for k, v in inputs.items()})
