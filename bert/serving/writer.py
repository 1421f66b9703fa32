"""Writing a serving export: the module's SavedModel at a precision, its
network on a runtime (TensorFlow, TFLite, OpenVINO), checked by the accuracy
gate, with the manifest `bert.serving.loader` reads (`write_serving`). The
per-task writers are in `bert.export`."""

import dataclasses
import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging
import tensorflow as tf

from bert import hardware as cpu
from bert import precision as precision_lib
from bert.io import atomic_folder, tracing_for_savedmodel
from bert.serving import autotune, host, openvino_runtime, tflite
from bert.serving.gate import AccuracyGate
from bert.serving.loader import (MANIFEST, MANIFEST_FORMAT, RUNTIME_PRECISIONS,
                                 StagedServing)
from bert.serving.precision import policy_copy
from bert.features import ENCODER_INPUTS
from bert.serving.stages import ServingModule
from bert.serving.tflite import PRECISIONS
from bert.validation import ConfigError


def output_folder(path: str):
  """The SavedModel folder `path`, written atomically: it replaces an empty
  folder or an earlier SavedModel, and a failed export leaves nothing."""
  return atomic_folder(
      path, lambda p: os.path.isdir(p) and (
          not os.listdir(p) or os.path.exists(os.path.join(p, "saved_model.pb"))),
      "a SavedModel folder", FileExistsError)


def check_precision(precision: str) -> str:
  """`precision` as an export precision (auto, fp32, bf16, int8; earlier
  names read as theirs); a ConfigError otherwise."""
  return precision_lib.canonical(precision, "precision",
                                 ("auto",) + PRECISIONS)


def _in_memory(module: ServingModule, network=None) -> StagedServing:
  """The serving callable of an unsaved module (what `load_serving` gives
  for its export), with `network` replacing the module's own."""
  return StagedServing(lambda **s: module.preprocess(s),
                       network or (lambda **x: module.network(x)),
                       lambda **f: module.postprocess(f), module.string_inputs,
                       empty_network=lambda **x: module.network(x))


def check_runtime(runtime: Optional[str], precision: str) -> str:
  """The runtime of the network stage for `precision` (fp32, bf16, int8):
  `runtime` None picks the one that has always run it (int8: tflite,
  else saved_model); a ConfigError for a runtime that cannot run it."""
  if runtime is None:
    return "tflite" if precision == "int8" else "saved_model"
  if runtime not in RUNTIME_PRECISIONS:
    raise ConfigError(f"runtime must be one of "
                      f"{', '.join(RUNTIME_PRECISIONS)}; got {runtime!r}")
  if precision not in RUNTIME_PRECISIONS[runtime]:
    raise ConfigError(f"runtime={runtime} runs precision "
                      f"{' or '.join(RUNTIME_PRECISIONS[runtime])}, not "
                      f"{precision}")
  return runtime


@dataclasses.dataclass
class _Candidate:
  """One way to serve: the network's runtime and precision, the module the
  SavedModel holds, and the converted network beside it (TFLite's
  flatbuffer, OpenVINO's model)."""
  runtime: str
  precision: str
  module: ServingModule
  blob: Optional[bytes] = None
  converted: Any = None

  @property
  def label(self) -> str:
    """Its name in the gate's figures and the manifest: the precision, and
    the runtime where that is not the precision's own (an OpenVINO fp32
    network is checked against the SavedModel's fp32 too)."""
    return (self.precision if self.runtime in ("saved_model", "tflite")
            else f"{self.runtime}_{self.precision}")

  @property
  def network_file(self) -> Optional[str]:
    return {"tflite": "network_int8.tflite",
            "openvino": openvino_runtime.NETWORK_FILE}.get(self.runtime)

  def serve(self, fp32: ServingModule) -> StagedServing:
    """Its serving callable in memory (what `load_serving` gives)."""
    if self.runtime == "tflite":
      return _in_memory(fp32, tflite.TFLiteNetwork(self.blob))
    if self.runtime == "openvino":
      return _in_memory(fp32, openvino_runtime.OpenVINONetwork(
          self.converted, self.precision))
    return _in_memory(self.module)


def _calibration_feeds(fp32: ServingModule, gate: AccuracyGate):
  """The network's inputs for the gate's first rows (OpenVINO int8's
  activation ranges), one row each, cut to its length."""
  features = fp32.preprocess({
      k: tf.constant(list(v[:openvino_runtime.CALIBRATION_ROWS]), tf.string)
      for k, v in gate.inputs.items()})
  inputs = {k: features[k].numpy() for k in ENCODER_INPUTS}
  for row, length in enumerate(inputs["input_mask"].sum(axis=1)):
    yield {k: v[row:row + 1, :max(int(length), 1)] for k, v in inputs.items()}


def _candidate(make_module, model, fp32: ServingModule, runtime: str,
               precision: str, gate: Optional[AccuracyGate]) -> _Candidate:
  network = fp32.network
  if runtime == "tflite":
    return _Candidate(runtime, precision, fp32, blob=tflite.convert(network, fp32))
  if runtime == "openvino":
    converted = openvino_runtime.convert(network)
    if precision == "int8":
      if gate is None:
        raise ConfigError("runtime=openvino at int8 needs an accuracy gate: "
                          "its activation ranges are measured on the gate's "
                          "inputs")
      converted = openvino_runtime.quantize(converted,
                                            _calibration_feeds(fp32, gate))
    return _Candidate(runtime, precision, fp32, converted=converted)
  if precision == "bf16":
    return _Candidate(runtime, precision, make_module(policy_copy(model, "bf16")))
  return _Candidate(runtime, precision, fp32)


def _choices(precision: str, runtime: Optional[str], has_bf16: bool
             ) -> List[Tuple[str, str]]:
  """The (runtime, precision) pairs to measure: `precision`, or for "auto"
  every precision this CPU runs fast (bf16 only with AVX512_BF16 or AMX);
  on `runtime`, on every runtime here for "auto" (OpenVINO where
  installed; its int8 where NNCF is), or on each precision's own for None."""
  precisions = ([p for p in PRECISIONS if p != "bf16" or has_bf16]
                if precision == "auto" else [precision])

  def runs(r, p):
    # OpenVINO's int8 needs NNCF to quantize (not to run).
    return p in RUNTIME_PRECISIONS.get(r, (p,)) and (
        (r, p) != ("openvino", "int8") or openvino_runtime.quantizer_available())

  if runtime != "auto":
    # Each precision on `runtime`, or on its own: one-line errors as given.
    return [(check_runtime(runtime, p), p) for p in precisions
            if runtime is None or len(precisions) == 1 or runs(runtime, p)]
  runtimes = [r for r in RUNTIME_PRECISIONS
              if r != "openvino" or openvino_runtime.available()]
  pairs = [(r, p) for r in runtimes for p in precisions if runs(r, p)]
  if not pairs:
    raise ConfigError(f"runtime={runtime}: runs none of precision "
                      f"{', '.join(precisions)} here")
  return pairs


def write_serving(make_module: Callable[[Any], ServingModule], model, path: str,
                  kind: str, precision: Optional[str] = None,
                  gate: Optional[AccuracyGate] = None,
                  bf16_cpu: Optional[bool] = None, require_gate: bool = False,
                  info: Optional[Dict[str, Any]] = None,
                  runtime: Optional[str] = None) -> Dict[str, Any]:
  """Writes the serving SavedModel `make_module(model)` at `precision`.

  fp32: the module as is. bf16: the network under Keras' `mixed_bfloat16`
  policy (fp32 where the CPU has neither AVX512_BF16 nor AMX, with a log
  line saying so). auto: bf16 where this CPU runs it fast (AVX512_BF16 or
  AMX, and oneDNN on: `bert.precision.choose`), else fp32. int8: the
  SavedModel as for fp32 (its `serving_default` stays the fp32 reference)
  plus the network as a dynamic-range int8 TFLite model in `assets.extra/`,
  which `load_serving` runs.

  `runtime` (None: saved_model, or tflite for int8): what runs the network
  stage; "openvino" converts it to OpenVINO (fp32 or bf16,
  `bert.serving.openvino_runtime`), written beside the fp32 SavedModel.
  "auto" measures, on this machine, every runtime at `precision` (at every
  precision for "auto") that passes the gate, and writes the fastest
  (`bert.serving.autotune`); the manifest's `auto` says what was measured
  and why the choice. It needs a gate.

  `precision` None is the default: "auto", unless the environment variable
  BERT_PRECISION names another (`bert.precision.default`). With a gate,
  "auto" is measured: the fastest of fp32, bf16 (where the CPU has it) and
  int8 on every runtime installed (or on `runtime`) that passes the gate;
  without one it is bf16 or fp32 by the CPU's flags (fp32 with
  `require_gate`).

  A reduced precision, or a network converted to another runtime, is checked
  by `gate` first: evaluated against the fp32 SavedModel and refused
  (AccuracyGateError, nothing written) when it drops more than the gate
  allows; with `require_gate`, a reduced precision without a gate is a
  ConfigError. `info`: more fields for the manifest. Returns the manifest
  written (with the gate's figures).
  """
  precision = check_precision(precision_lib.default(precision))
  requested = precision
  has_bf16 = cpu.has_bf16() if bf16_cpu is None else bf16_cpu
  if precision == "auto" and runtime is None and gate is not None:
    runtime = "auto"    # the fastest gated export, on any runtime here
  if runtime == "auto" and gate is None:
    raise ConfigError(f"{kind} export with runtime=auto needs an accuracy "
                      "gate (gate=, or --gate_data): it chooses among the "
                      "exports that pass it")
  if runtime == "openvino":
    openvino_runtime.require()
  if runtime == "auto":
    # Measured: the fastest export that passes the gate.
    pairs = _choices(precision, runtime, has_bf16)
  else:
    if precision == "auto":
      choice = precision_lib.choose("auto", gpu=None, cpu_flags=(
          None if bf16_cpu is None else
          frozenset({"avx512_bf16"} if bf16_cpu else ())))
      precision = "bf16" if choice.bf16 else "fp32"
      if precision == "bf16" and require_gate and gate is None:
        precision, choice = "fp32", precision_lib.choose("fp32")
        logging.info("export precision auto: fp32, no accuracy gate to check "
                     "bf16 against (a %s export needs one)", kind)
      logging.info("export %s", choice.describe())
    if precision == "bf16" and not has_bf16:
      logging.warning("precision=bf16: this CPU has neither AVX512_BF16 nor "
                      "AMX; writing fp32 instead")
      precision = "fp32"
    runtime = check_runtime(runtime, precision)
    if require_gate and gate is None and precision != "fp32":
      raise ConfigError(f"{kind} export at {precision} needs an accuracy gate "
                        "(gate=, or --gate_data: a dev set to compare with fp32)")
    pairs = [(runtime, precision)]
  model = policy_copy(model, "fp32")   # the reference the gate compares with
  fp32 = make_module(model)
  candidates = [_candidate(make_module, model, fp32, r, p, gate)
                for r, p in pairs]
  manifest = dict(format=MANIFEST_FORMAT, kind=kind,
                  requested_precision=requested,
                  string_inputs=list(fp32.string_inputs),
                  buckets=list(fp32.buckets), **(info or {}))
  if len(candidates) == 1:
    chosen = candidates[0]
    if gate is not None and (chosen.runtime, chosen.precision) != (
        "saved_model", "fp32"):
      manifest["gate"] = dict(gate.check(_in_memory(fp32), chosen.serve(fp32),
                                         chosen.label), candidate=chosen.label)
  else:
    chosen, manifest["gate"], manifest["auto"] = autotune.choose(
        candidates, gate, lambda c: c.serve(fp32), _in_memory(fp32))
  manifest.update(precision=chosen.precision, runtime=chosen.runtime)
  if chosen.network_file:
    manifest["network"] = chosen.network_file
  # Small batches skip the graphs where the network runs outside them.
  hosted = fp32.host() if chosen.runtime in ("tflite", "openvino") else None
  if hosted is not None:
    manifest["host"] = hosted[0]
  module = chosen.module
  with output_folder(path) as tmp:
    with tracing_for_savedmodel():
      tf.saved_model.save(module, tmp, signatures=module.signatures())
    extra = os.path.join(tmp, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    if chosen.blob is not None:
      with open(os.path.join(extra, manifest["network"]), "wb") as f:
        f.write(chosen.blob)
    if chosen.converted is not None:
      openvino_runtime.save(chosen.converted,
                            os.path.join(extra, manifest["network"]))
    if hosted is not None:
      host.write_files(hosted[1], extra)
    with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
      json.dump(manifest, f, indent=2)
  return manifest
