"""The default precision is "auto" (issue 46): training, `from_pretrained`
and export take it where no precision is named, BERT_PRECISION replaces it,
a named precision always wins, and the run says which precision ran and why.

The suite itself runs with BERT_PRECISION=fp32 (tests/conftest.py); the
tests here remove it, and inject the CPU's flags, so every branch runs on
any machine."""

import os

import gin
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import export
from bert import hardware as cpu
from bert import precision
from bert.models import BertClassifier
from bert.serving import autotune, loader, openvino_runtime
from bert.training import run
from bert.validation import ConfigError
from conftest import minilm_dir, vocab
from serving_helpers import (classifier, self_labelled_gate, sst2_texts,
                             tiny_embedder)

ZEN5 = frozenset({"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"})
ZEN3 = frozenset({"avx2", "fma"})


@pytest.fixture
def default(monkeypatch):
  """The library's own default (no BERT_PRECISION); `default(flags)` also
  sets what the CPU is detected to have."""
  monkeypatch.delenv(precision.DEFAULT_ENV, raising=False)
  monkeypatch.setattr(precision, "onednn_enabled", lambda: True)
  monkeypatch.setattr(precision, "gpu_capability", lambda: None)

  def with_flags(flags):
    monkeypatch.setattr(cpu, "flags", lambda cpuinfo=None: flags)
  return with_flags


def test_the_default_is_auto_and_the_environment_replaces_it(
    default, monkeypatch):
  default(ZEN5)
  assert precision.default() == "auto" and precision.default("fp16") == "fp16"
  choice = precision.choose()
  assert choice.policy == "mixed_bfloat16"
  assert choice.reason.startswith("auto (the default): the CPU has avx512_bf16")
  # An explicit "auto" is not the default: said so.
  assert precision.choose("auto").reason.startswith("auto: ")
  monkeypatch.setenv(precision.DEFAULT_ENV, "fp32")
  assert precision.choose() == precision.PrecisionChoice(
      "float32", False, "the default, from BERT_PRECISION")
  # A named precision wins over the environment.
  assert precision.choose("bf16").policy == "mixed_bfloat16"
  monkeypatch.setenv(precision.DEFAULT_ENV, "fast")
  with pytest.raises(ConfigError, match=r"^the environment variable "
                     r"BERT_PRECISION must be one of auto, fp32, bf16; got "
                     r"'fast'$"):
    precision.choose()


@pytest.mark.parametrize("flags,policy,xla", [(ZEN5, "mixed_bfloat16", False),
                                              (ZEN3, "float32", True)])
def test_a_run_left_at_the_default_is_auto_and_says_so(
    default, flags, policy, xla):
  default(flags)
  runtime = run.RuntimeConfig(strategy="one_device")
  assert runtime.mixed_precision is None
  lines = []
  run.setup(runtime, log_fn=lines.append)
  try:
    assert tf_keras.mixed_precision.global_policy().name == policy
    choice = runtime.precision()
    assert (choice.policy, choice.jit_compile) == (policy, xla)
    assert lines == [choice.describe()]
    assert "(auto (the default): " in lines[0]
    # operative_config.gin carries the line as a comment: gin reads past it.
    text = run.run_config_text(lambda: "RuntimeConfig.seed = 3\n", choice)
    assert text.endswith(f"\n# {choice.describe()}\n")
    with gin.unlock_config():
      gin.parse_config(text)
    assert gin.query_parameter("RuntimeConfig.seed") == 3
  finally:
    gin.clear_config()
    tf_keras.mixed_precision.set_global_policy("float32")


def test_pretraining_configs_name_fp32_and_fine_tuning_configs_the_default():
  # pylint: disable=g-import-not-at-top
  from bert import configs
  from bert.scripts import _gin_config
  for name, expected in (("pretrain_tiny_wikitext2", "fp32"),
                         ("pretrain_base", "fp32"), ("glue_mrpc", None),
                         ("squad_v1", None), ("ner_wnut17", None)):
    gin.clear_config()
    try:
      _gin_config.parse_sources(
          [os.path.join(os.path.dirname(configs.__file__), name + ".gin")], [])
      assert run.RuntimeConfig().mixed_precision == expected, name
    finally:
      gin.clear_config()


def test_from_pretrained_at_the_default_follows_the_cpu(default, monkeypatch):
  default(ZEN5)
  model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2,
                                         seq_length=32)
  assert model.encoder.dtype_policy.name == "mixed_bfloat16"
  assert model.precision_choice.reason.startswith("auto (the default)")
  monkeypatch.setenv(precision.DEFAULT_ENV, "fp32")
  model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2,
                                         seq_length=32)
  assert model.encoder.dtype_policy.name == "float32"


def _export(model, path, gate_=None, precision_=None):
  return export.export_classifier(model, str(path), vocab(), True, 64,
                                  ["neg", "pos"], pairs=False,
                                  precision=precision_,
                                  length_buckets=(16, 32, 64), gate=gate_)


@pytest.mark.heavy
def test_the_default_export_is_the_fastest_that_passes_the_gate(
    default, monkeypatch, tmp_path):
  default(ZEN5)
  model = classifier(scale=20.0)
  texts = sst2_texts(32)
  gate_ = self_labelled_gate(model, texts, 5.0)
  # Made-up rates (the measuring itself, and OpenVINO's candidates:
  # autotune_test): int8 fastest.
  monkeypatch.setattr(openvino_runtime, "available", lambda: False)
  monkeypatch.setattr(autotune, "measure", lambda serves, inputs: {
      k: [100.0 if k == "int8" else 10.0] * 3 for k in serves})
  manifest = _export(model, tmp_path / "default", gate_)
  assert manifest["requested_precision"] == "auto"
  assert (manifest["precision"], manifest["runtime"]) == ("int8", "tflite")
  assert set(manifest["auto"]["rows_per_second"]) == {"fp32", "bf16", "int8"}
  # Without a gate: bf16 where the CPU has it, else fp32 (nothing measured).
  manifest = _export(model, tmp_path / "no_gate")
  assert (manifest["precision"], "auto" in manifest) == ("bf16", False)
  default(ZEN3)
  assert _export(model, tmp_path / "zen3")["precision"] == "fp32"
  # BERT_PRECISION=fp32: fp32, gate or not.
  monkeypatch.setenv(precision.DEFAULT_ENV, "fp32")
  manifest = _export(model, tmp_path / "fp32", gate_)
  assert (manifest["precision"], manifest["requested_precision"]) == (
      "fp32", "fp32")
  assert "auto" not in manifest


def test_an_embedder_without_a_gate_exports_fp32_at_the_default(
    default, tmp_path):
  default(ZEN5)
  model = tiny_embedder()
  assert model.export(str(tmp_path / "e"))["precision"] == "fp32"
  # Named, bf16 without a gate is still refused.
  with pytest.raises(ConfigError, match="needs an accuracy gate"):
    model.export(str(tmp_path / "bf16"), precision="bf16")


@pytest.mark.heavy
def test_an_fp32_export_of_a_bf16_model_computes_in_fp32(tmp_path):
  """The export's fp32 reference (and the gate's) is the model at fp32,
  whatever policy the model was built in (the default builds bf16 on a CPU
  with bf16)."""
  fp32_model = classifier(scale=20.0)
  with precision.policy_scope("bf16"):
    bf16_model = BertClassifier.from_config(fp32_model.get_config())
  bf16_model.set_weights(fp32_model.get_weights())
  texts = tf.constant(sst2_texts(16))
  served = {}
  for name, model in (("fp32", fp32_model), ("bf16", bf16_model)):
    _export(model, tmp_path / name, precision_="fp32")
    served[name] = export.load_serving(str(tmp_path / name))(
        text=texts)["probabilities"].numpy()
  np.testing.assert_allclose(served["bf16"], served["fp32"], atol=1e-6)
  # Negative control: the bf16 model itself does compute differently.
  inputs = export.ClassifierServing(
      bf16_model, vocab(), True, 64, ["neg", "pos"], False, (64,))
  raw = inputs.serve({"text": texts})["probabilities"].numpy()
  assert np.abs(raw - served["fp32"]).max() > 1e-4
  assert loader.read_manifest(str(tmp_path / "bf16"))["precision"] == "fp32"
