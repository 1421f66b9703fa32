"""`runtime="auto"` / `precision="auto"` with a gate: the fastest export
that passes the gate, measured on this machine, and the record of why."""

import sys

import numpy as np
import pytest

from bert import export
from bert import hardware as cpu
from bert.serving import autotune, gate, loader, openvino_runtime, writer
from bert.validation import ConfigError
from conftest import vocab
from serving_helpers import classifier, self_labelled_gate, sst2_texts


def _export(model, path, gate_, precision="auto", runtime="auto"):
  return export.export_classifier(model, str(path), vocab(), True, 64,
                                  ["neg", "pos"], pairs=False,
                                  precision=precision, length_buckets=(16, 32, 64),
                                  gate=gate_, runtime=runtime)


def test_auto_measures_every_gated_export_and_writes_the_fastest(tmp_path):
  model = classifier(scale=20.0)
  texts = sst2_texts(48)
  manifest = _export(model, tmp_path / "auto", self_labelled_gate(model, texts, 5.0))
  auto = manifest["auto"]
  expected = {"fp32", "int8"} | ({"bf16"} if cpu.has_bf16() else set())
  if openvino_runtime.available():
    expected |= {"openvino_fp32"} | ({"openvino_bf16"} if cpu.has_bf16() else set())
    if openvino_runtime.quantizer_available():
      expected |= {"openvino_int8"}
  assert set(auto["rows_per_second"]) | set(auto["refused"]) == expected
  assert auto["chosen"] == max(auto["rows_per_second"],
                               key=auto["rows_per_second"].get)
  assert auto["cpu"] == cpu.describe() and auto["rows"] == 48
  assert all(lo <= auto["rows_per_second"][k] <= hi
             for k, (lo, hi) in auto["spread"].items())
  chosen = auto["chosen"]
  runtime, _, precision = chosen.rpartition("_")
  assert manifest["precision"] == precision
  assert manifest["runtime"] == (runtime or {"int8": "tflite"}.get(
      precision, "saved_model"))
  assert manifest["gate"]["candidate"] == chosen
  serve = export.load_serving(str(tmp_path / "auto"))
  assert serve.runtime == manifest["runtime"]
  assert serve(text=texts[:3])["label"].shape == (3,)


def test_auto_skips_what_the_gate_refuses_and_says_so(tmp_path, monkeypatch):
  model = classifier(scale=20.0)
  texts = sst2_texts(32)
  gate_ = self_labelled_gate(model, texts, 0.5)
  # int8 would be the fastest by far, but its network answers the opposite.
  rates = {"fp32": 10.0, "int8": 1000.0, "bf16": 20.0, "openvino_fp32": 30.0,
           "openvino_bf16": 40.0, "openvino_int8": 50.0}
  monkeypatch.setattr(autotune, "measure", lambda serves, inputs: {
      k: [rates[k] * f for f in (0.9, 1.0, 1.1)] for k in serves})
  real_call = writer.tflite.TFLiteNetwork.__call__
  monkeypatch.setattr(writer.tflite.TFLiteNetwork, "__call__", lambda self, **x: {
      k: -v for k, v in real_call(self, **x).items()})
  manifest = _export(model, tmp_path / "m", gate_)
  auto = manifest["auto"]
  assert "int8" in auto["refused"] and "int8" not in auto["rows_per_second"]
  assert "int8 export refused: accuracy" in auto["refused"]["int8"]
  fastest = max(auto["rows_per_second"], key=auto["rows_per_second"].get)
  assert auto["chosen"] == fastest != "int8"
  assert auto["rows_per_second"][fastest] == rates[fastest]
  # precision=auto with a gate measures every runtime, as runtime=auto does.
  again = _export(model, tmp_path / "p", gate_, runtime=None)["auto"]
  assert (set(again["rows_per_second"]) | set(again["refused"])
          == set(auto["rows_per_second"]) | set(auto["refused"]))
  assert again["chosen"] == auto["chosen"]


def test_auto_needs_a_gate_and_lists_only_what_this_machine_has(monkeypatch,
                                                               tmp_path):
  model = classifier()
  with pytest.raises(ConfigError, match="runtime=auto needs an accuracy gate"):
    _export(model, tmp_path / "x", None)
  assert not (tmp_path / "x").exists()
  pairs = writer._choices("auto", "auto", has_bf16=False)  # pylint: disable=protected-access
  assert ("saved_model", "bf16") not in pairs and ("tflite", "int8") in pairs
  assert writer._choices("bf16", None, True) == [("saved_model", "bf16")]  # pylint: disable=protected-access
  assert writer._choices("auto", "openvino", True) == [  # pylint: disable=protected-access
      ("openvino", "fp32"), ("openvino", "bf16"), ("openvino", "int8")]
  # Without NNCF, OpenVINO's int8 is left out (it quantizes, not runs, it).
  monkeypatch.setitem(sys.modules, "nncf", None)
  assert ("openvino", "int8") not in writer._choices("auto", "auto", True)  # pylint: disable=protected-access
  assert writer._choices("auto", "openvino", True) == [  # pylint: disable=protected-access
      ("openvino", "fp32"), ("openvino", "bf16")]
  monkeypatch.setitem(sys.modules, "openvino", None)
  assert all(r != "openvino" for r, _ in writer._choices("auto", "auto", True))  # pylint: disable=protected-access
  with pytest.raises(ConfigError, match="runtime=tflite runs precision int8"):
    writer._choices("fp32", "tflite", True)  # pylint: disable=protected-access
  assert np.isfinite(autotune.throughput_pass(lambda **x: None, {"text": ["a"]}))
