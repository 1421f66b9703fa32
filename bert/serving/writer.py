"""Writing a serving export: the module's SavedModel at a precision, its
network on a runtime (TensorFlow, TFLite, OpenVINO), checked by the accuracy
gate, with the manifest `bert.serving.loader` reads (`write_serving`). The
per-task writers are in `bert.export`."""

import json
import os
from typing import Any, Callable, Dict, Optional

from absl import logging
import tensorflow as tf

from bert import hardware as cpu
from bert import precision as precision_lib
from bert.io import atomic_folder
from bert.serving import host, openvino_runtime, tflite
from bert.serving.gate import AccuracyGate
from bert.serving.loader import (MANIFEST, MANIFEST_FORMAT, RUNTIME_PRECISIONS,
                                 StagedServing)
from bert.serving.precision import bf16_copy
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


def write_serving(make_module: Callable[[Any], ServingModule], model, path: str,
                  kind: str, precision: str = "fp32",
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

  A reduced precision, or a network converted to another runtime, is checked
  by `gate` first: evaluated against the fp32 SavedModel and refused
  (AccuracyGateError, nothing written) when it drops more than the gate
  allows; with `require_gate`, a reduced precision without a gate is a
  ConfigError. `info`: more fields for the manifest. Returns the manifest
  written (with the gate's figures).
  """
  precision = check_precision(precision)
  requested = precision
  if precision == "auto":
    choice = precision_lib.choose("auto", gpu=None, cpu_flags=(
        None if bf16_cpu is None else
        frozenset({"avx512_bf16"} if bf16_cpu else ())))
    logging.info("export %s", choice.describe())
    precision = "bf16" if choice.bf16 else "fp32"
  if precision == "bf16":
    has_bf16 = cpu.has_bf16() if bf16_cpu is None else bf16_cpu
    if not has_bf16:
      logging.warning("precision=bf16: this CPU has neither AVX512_BF16 nor AMX; "
                      "writing fp32 instead")
      precision = "fp32"
  runtime = check_runtime(runtime, precision)
  if runtime == "openvino":
    openvino_runtime.require()
  if require_gate and gate is None and precision != "fp32":
    raise ConfigError(f"{kind} export at {precision} needs an accuracy gate "
                      "(gate=, or --gate_data: a dev set to compare with fp32)")
  fp32 = make_module(model)
  module, blob, converted = fp32, None, None
  candidate = None            # builds the reduced-precision serving callable
  manifest = dict(format=MANIFEST_FORMAT, kind=kind,
                  requested_precision=requested,
                  string_inputs=list(fp32.string_inputs),
                  buckets=list(fp32.buckets), **(info or {}))
  if runtime == "saved_model" and precision == "bf16":
    module = make_module(bf16_copy(model))
    candidate = lambda: _in_memory(module)
  if runtime == "tflite":
    blob = tflite.convert(fp32.network.get_concrete_function(), fp32)
    candidate = lambda: _in_memory(fp32, tflite.TFLiteNetwork(blob))
    manifest["network"] = "network_int8.tflite"
  if runtime == "openvino":
    converted = openvino_runtime.convert(fp32.network.get_concrete_function())
    candidate = lambda: _in_memory(fp32, openvino_runtime.OpenVINONetwork(
        converted, precision))
    manifest["network"] = openvino_runtime.NETWORK_FILE
  manifest.update(precision=precision, runtime=runtime)
  # Small batches skip the graphs where the network runs outside them.
  hosted = fp32.host() if runtime in ("tflite", "openvino") else None
  if hosted is not None:
    manifest["host"] = hosted[0]
  if gate is not None and candidate is not None:
    # The gate's name for the candidate: its precision, and the runtime
    # where that is not the precision's own (an OpenVINO fp32 network is
    # checked against the SavedModel's fp32 too).
    label = (precision if runtime in ("saved_model", "tflite")
             else f"{runtime}_{precision}")
    manifest["gate"] = dict(gate.check(_in_memory(fp32), candidate(), label),
                            candidate=label)
  with output_folder(path) as tmp:
    tf.saved_model.save(module, tmp, signatures=module.signatures())
    extra = os.path.join(tmp, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    if blob is not None:
      with open(os.path.join(extra, manifest["network"]), "wb") as f:
        f.write(blob)
    if converted is not None:
      openvino_runtime.save(converted, os.path.join(extra, manifest["network"]))
    if hosted is not None:
      host.write_vocab(hosted[1], extra)
    with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
      json.dump(manifest, f, indent=2)
  return manifest
