"""The network stage on OpenVINO, an optional runtime
(`pip install "bert-tf2[openvino]"`).

OpenVINO reads the network stage's TensorFlow graph itself
(`openvino.convert_model` on its concrete function): the same weights, no
ONNX step. The export writes the converted network beside the SavedModel
(`assets.extra/network_openvino.xml` and `.bin`, fp32 weights); the
tokenizer and post-processing stay in the SavedModel's graphs, as for
TFLite (`bert.serving.stages`).

Precisions: fp32 computes in fp32 (OpenVINO's `INFERENCE_PRECISION_HINT`
f32; its own default on a bf16-capable CPU is bf16); bf16 computes the
matmuls in bf16 on AVX512_BF16 or AMX; int8 is the network quantized by
NNCF's post-training quantization (int8 weights and activations, VNNI or
AMX int8 where the CPU has them; what stays in floating point computes in
bf16 where the CPU has it), its activation ranges measured on calibration
inputs (`quantize`; the export takes them from the accuracy gate's rows).
"""

import importlib
import os
from typing import Dict, Optional

import numpy as np

from bert import hardware
from bert.serving.grouped import INVOKE_COST_TOKENS, GroupedNetwork
from bert.validation import ConfigError

NETWORK_FILE = "network_openvino.xml"
PRECISIONS = ("fp32", "bf16", "int8")
# OpenVINO's names for them (int8: the precision of what is not quantized).
_HINT = {"fp32": "f32", "bf16": "bf16"}
# Calibration inputs NNCF measures activation ranges on (its default).
CALIBRATION_ROWS = 300


def _installed(module: str) -> bool:
  try:
    importlib.import_module(module)
  except ImportError:
    return False
  return True


def available() -> bool:
  """Whether OpenVINO is installed."""
  return _installed("openvino")


def quantizer_available() -> bool:
  """Whether NNCF (int8 quantization for OpenVINO) is installed."""
  return _installed("nncf")


def require():
  """The `openvino` module, or a one-line ConfigError saying how to get it."""
  try:
    import openvino  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ConfigError("runtime=openvino needs OpenVINO: pip install "
                      "\"bert-tf2[openvino]\"") from None
  return openvino


def convert(network):
  """The `openvino.Model` of `network` (a serving module's network concrete
  function, dict in and out), each input and output named by its key alone
  (`input_word_ids`, ..., `logits`): OpenVINO also names them after
  TensorFlow's tensors ("input_mask:0", ".../MatMul:0")."""
  ov = require()
  model = ov.convert_model(network)
  keys = sorted(network.structured_outputs)      # TF flattens dicts by key
  for port, key in zip(model.outputs, keys):
    found = set(port.get_names()) & set(keys)
    port.get_tensor().set_names(found if len(found) == 1 else {key})
  for port in model.inputs:
    port.get_tensor().set_names({_plain(n) for n in port.get_names()})
  return model


def quantize(model, feeds):
  """`model` (an `openvino.Model`) with int8 weights and activations, by
  NNCF's post-training quantization for transformers; the activation ranges
  from `feeds` (dicts of int32 [1, length] NumPy arrays by input name, one
  row each)."""
  require()
  if not quantizer_available():
    raise ConfigError("runtime=openvino at int8 needs NNCF: pip install "
                      "\"bert-tf2[openvino]\"")
  import nncf  # pylint: disable=g-import-not-at-top
  feeds = list(feeds)
  if not feeds:
    raise ConfigError("OpenVINO int8: no calibration inputs")
  return nncf.quantize(model, nncf.Dataset(feeds),
                       model_type=nncf.ModelType.TRANSFORMER,
                       subset_size=len(feeds))


def save(model, path: str) -> None:
  """Writes `model` as `path` (.xml) and its weights beside it (.bin), in
  fp32 (OpenVINO's default would halve them to fp16)."""
  require().save_model(model, path, compress_to_fp16=False)


def _plain(name: str) -> str:
  return name.split(":")[0]


class OpenVINONetwork(GroupedNetwork):
  """Runs a converted network on the CPU: int32 [batch, seq] NumPy arrays ->
  dict of float32 outputs, in length groups (`bert.serving.grouped`).

  Args:
    model: an `openvino.Model` (`convert`) or the path of its .xml file.
    precision: fp32, bf16 or int8 (a model from `quantize`; see the
      module's docstring).
    num_threads: inference threads (default: OpenVINO's, every core).
  """

  def __init__(self, model, precision: str = "fp32",
               num_threads: Optional[int] = None, granularity: int = 8,
               invoke_cost: float = INVOKE_COST_TOKENS):
    super().__init__(granularity, invoke_cost)
    if precision not in PRECISIONS:
      raise ConfigError(f"OpenVINO runs {' or '.join(PRECISIONS)}; got "
                        f"precision={precision!r}")
    ov = require()
    core = ov.Core()
    if isinstance(model, (str, os.PathLike)):
      model = core.read_model(os.fspath(model))
    hint = _HINT.get(precision) or ("bf16" if hardware.has_bf16() else "f32")
    config = {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY"}
    if num_threads:
      config["INFERENCE_NUM_THREADS"] = int(num_threads)
    self._compiled = core.compile_model(model, "CPU", config)
    self._request = self._compiled.create_infer_request()
    self._inputs = {port.get_any_name(): port for port in self._compiled.inputs}
    self._outputs = {port.get_any_name(): port for port in self._compiled.outputs}
    # Outputs with a sequence axis ([batch, seq, ...]) are padded back
    # together; the others ([batch, ...]) are only reordered.
    self._sequence_outputs = {
        name: port.get_partial_shape().rank.get_length() >= 3 or (
            port.get_partial_shape().rank.get_length() == 2 and
            port.get_partial_shape()[1].is_dynamic)
        for name, port in self._outputs.items()}

  @property
  def inference_precision(self) -> str:
    """What OpenVINO computes in (its name: f32, bf16)."""
    return self._compiled.get_property("INFERENCE_PRECISION_HINT").to_string()

  def _run(self, inputs, rows, length) -> Dict[str, np.ndarray]:
    feed = {self._inputs[k]: np.ascontiguousarray(v[rows, :length], np.int32)
            for k, v in inputs.items()}
    result = self._request.infer(feed)
    return {name: np.array(result[port]) for name, port in self._outputs.items()}
