"""The OpenVINO runtime of a serving export's network: written, gated and
loaded like the others, run in length groups, and optional (an export
without OpenVINO installed is served by its SavedModel)."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import BertEncoder, export
from bert import hardware as cpu
from bert.models import BertTokenClassifier
from bert.serving import gate, loader, openvino_runtime
from bert.validation import ConfigError
from conftest import small_config, vocab
from serving_helpers import (classifier, padded_inputs, self_labelled_gate,
                             sst2_texts)

pytest.importorskip("openvino")   # in the test extra; optional for users


def _export(model, path, precision, gate_=None):
  return export.export_classifier(model, str(path), vocab(), True, 64,
                                  ["neg", "pos"], pairs=False,
                                  precision=precision, length_buckets=(16, 32, 64),
                                  gate=gate_, runtime="openvino")


def test_openvino_export_serves_as_its_saved_model(tmp_path):
  model = classifier(scale=20.0)
  texts = sst2_texts(40) + [""]
  gate_ = self_labelled_gate(model, texts[:32], 5.0)
  manifest = _export(model, tmp_path / "fp32", "fp32", gate_)
  assert (manifest["runtime"], manifest["precision"]) == ("openvino", "fp32")
  # The converted network was checked against the SavedModel's fp32 one.
  assert manifest["gate"]["candidate"] == "openvino_fp32"
  assert manifest["gate"]["fp32"] == manifest["gate"]["openvino_fp32"] == 100.0
  extra = tmp_path / "fp32" / "assets.extra"
  assert (extra / "network_openvino.xml").is_file()
  assert (extra / "network_openvino.bin").is_file()
  assert json.load(open(extra / "serving.json"))["runtime"] == "openvino"

  serve = export.load_serving(str(tmp_path / "fp32"), num_threads=2)
  assert serve.runtime == "openvino"
  out = loader.as_numpy(serve(text=texts))
  ref = loader.as_numpy(tf.saved_model.load(str(tmp_path / "fp32")).signatures[
      "serving_default"](text=tf.constant(texts)))
  assert set(out) == set(ref) == {"probabilities", "label"}
  assert np.abs(out["probabilities"] - ref["probabilities"]).max() <= 1e-5
  assert (out["label"] == ref["label"]).all()
  assert loader.as_numpy(serve(text=[]))["label"].shape == (0,)
  assert serve(text=texts[:1])["label"].shape == (1,)

  # bf16 computes in bf16 where the CPU has it (not fp32 in disguise).
  manifest = _export(model, tmp_path / "bf16", "bf16")
  bf16 = loader.as_numpy(export.load_serving(str(tmp_path / "bf16"))(text=texts))
  diff = np.abs(bf16["probabilities"] - ref["probabilities"]).max()
  assert diff <= 0.05 and (bf16["label"] == ref["label"]).mean() >= 0.9
  if cpu.has_bf16():
    assert manifest["precision"] == "bf16" and diff > 1e-6
    network = openvino_runtime.OpenVINONetwork(
        str(tmp_path / "bf16" / "assets.extra" / "network_openvino.xml"), "bf16")
    assert network.inference_precision == "bf16"
  else:
    assert manifest["precision"] == "fp32"


def test_openvino_network_runs_rows_in_length_groups():
  tf_keras.utils.set_random_seed(4)
  model = BertTokenClassifier(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=64)), 3)
  module = export.TaggerServing(model, vocab(), True, 64, ["O", "B", "I"], (64,))
  converted = openvino_runtime.convert(module.network)
  lengths = np.array([60, 5, 3, 41, 9, 17, 64, 2])
  inputs = padded_inputs(lengths)
  real = inputs["input_mask"].astype(bool)
  grouped = openvino_runtime.OpenVINONetwork(converted, invoke_cost=0.0)(**inputs)
  whole = openvino_runtime.OpenVINONetwork(converted, invoke_cost=1e9)(**inputs)
  ref = model({k: tf.constant(v) for k, v in inputs.items()})["logits"].numpy()
  assert set(grouped) == {"logits"}
  assert grouped["logits"].shape == whole["logits"].shape == (8, 64, 3)
  assert np.abs(grouped["logits"][real] - ref[real]).max() <= 1e-4
  assert np.abs(whole["logits"][real] - ref[real]).max() <= 1e-4
  # One row runs at its exact length.
  one = openvino_runtime.OpenVINONetwork(converted)(
      **{k: v[1:2] for k, v in inputs.items()})["logits"]
  assert one.shape == (1, 5, 3)
  assert np.abs(one[0] - ref[1, :5]).max() <= 1e-4


def test_without_openvino_export_refuses_and_loading_falls_back(
    tmp_path, monkeypatch, caplog):
  model = classifier(scale=20.0)
  _export(model, tmp_path / "ov", "fp32")
  monkeypatch.setitem(sys.modules, "openvino", None)     # import fails
  assert not openvino_runtime.available()
  with pytest.raises(ConfigError, match=r"pip install .*openvino") as e:
    _export(model, tmp_path / "again", "fp32")
  assert "\n" not in str(e.value) and not (tmp_path / "again").exists()
  with caplog.at_level("WARNING"):
    serve = export.load_serving(str(tmp_path / "ov"))
  assert serve.runtime == "saved_model"
  assert any("not installed" in r.getMessage() for r in caplog.records)
  texts = sst2_texts(8)
  ref = tf.saved_model.load(str(tmp_path / "ov")).signatures["serving_default"](
      text=tf.constant(texts))
  assert np.array_equal(serve(text=texts)["probabilities"].numpy(),
                        ref["probabilities"].numpy())


def test_runtime_and_precision_errors_name_the_field_or_file(tmp_path):
  model = classifier()
  for runtime, precision, fragment in (("onnx", "fp32", "runtime must be one of"),
                                       ("tflite", "fp32", "runtime=tflite runs "
                                        "precision int8, not fp32"),
                                       ("openvino", "int8", "runtime=openvino at "
                                        "int8 needs an accuracy gate")):
    with pytest.raises(ConfigError, match=fragment):
      export.export_classifier(model, str(tmp_path / runtime), vocab(), True,
                               64, ["neg", "pos"], pairs=False,
                               precision=precision, runtime=runtime)
    assert not (tmp_path / runtime).exists()
  _export(model, tmp_path / "ov", "fp32")
  manifest_path = tmp_path / "ov" / "assets.extra" / "serving.json"
  manifest = json.load(open(manifest_path))
  # The weights beside the graph are part of the network.
  os.remove(tmp_path / "ov" / "assets.extra" / "network_openvino.bin")
  with pytest.raises(loader.ServingError,
                     match=r"serving.json: .*network_openvino.bin is not in "
                           "assets.extra"):
    export.load_serving(str(tmp_path / "ov"))
  # A runtime that does not run the precision named.
  json.dump(dict(manifest, runtime="saved_model", precision="int8"),
            open(manifest_path, "w"))
  with pytest.raises(loader.ServingError,
                     match="runtime saved_model does not run precision 'int8'"):
    loader.read_manifest(str(tmp_path / "ov"))
  # A graph that is not OpenVINO's.
  json.dump(manifest, open(manifest_path, "w"))
  (tmp_path / "ov" / "assets.extra" / "network_openvino.bin").write_bytes(b"")
  (tmp_path / "ov" / "assets.extra" / "network_openvino.xml").write_text("<net")
  with pytest.raises(loader.ServingError,
                     match="network_openvino.xml: not an OpenVINO network"):
    export.load_serving(str(tmp_path / "ov"))


def test_gate_refuses_an_openvino_network_that_scores_too_low(tmp_path,
                                                              monkeypatch):
  model = classifier(scale=20.0)
  texts = sst2_texts(32)
  gate_ = self_labelled_gate(model, texts, 0.5)
  real_run = openvino_runtime.OpenVINONetwork._run

  def negated(self, inputs, rows, length):
    # A network that answers the opposite: every label flips.
    return {k: -v for k, v in real_run(self, inputs, rows, length).items()}

  monkeypatch.setattr(openvino_runtime.OpenVINONetwork, "_run", negated)
  with pytest.raises(gate.AccuracyGateError,
                     match=r"openvino_fp32 export refused: accuracy on "
                           r"sst2-dev-sample is 0\.00 at openvino_fp32 vs "
                           r"100\.00 at fp32"):
    _export(model, tmp_path / "bad", "fp32", gate_)
  assert not (tmp_path / "bad").exists()


@pytest.mark.heavy
def test_openvino_int8_is_quantized_on_the_gates_rows_and_gated(
    tmp_path, monkeypatch):
  pytest.importorskip("nncf")
  model = classifier(scale=20.0)
  texts = sst2_texts(64)
  gate_ = self_labelled_gate(model, texts, 10.0)
  seen = []
  real = openvino_runtime.quantize
  monkeypatch.setattr(openvino_runtime, "quantize", lambda m, feeds: real(
      m, seen.extend(feeds) or seen))
  manifest = _export(model, tmp_path / "int8", "int8", gate_)
  assert (manifest["runtime"], manifest["precision"]) == ("openvino", "int8")
  assert manifest["gate"]["candidate"] == "openvino_int8"
  assert manifest["gate"]["openvino_int8"] >= 90.0
  # Calibrated on the gate's rows, each cut to its own length.
  assert len(seen) == len(texts)
  assert all(f["input_mask"].shape[0] == 1 and f["input_mask"].all()
             for f in seen)     # no padding: the mask is all ones
  # Quantized: int8 fake-quantization nodes, which the fp32 network has none
  # of (negative control).
  extra = tmp_path / "int8" / "assets.extra"
  assert "FakeQuantize" in (extra / "network_openvino.xml").read_text()
  _export(model, tmp_path / "fp32", "fp32", gate_)
  assert "FakeQuantize" not in (tmp_path / "fp32" / "assets.extra" /
                                "network_openvino.xml").read_text()
  serve = export.load_serving(str(tmp_path / "int8"))
  assert serve.runtime == "openvino"
  ref = tf.saved_model.load(str(tmp_path / "int8")).signatures[
      "serving_default"](text=tf.constant(texts))["label"].numpy()
  agree = (loader.as_numpy(serve(text=texts))["label"] == ref).mean()
  assert agree >= 0.9
