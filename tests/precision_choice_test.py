"""`bert.precision`: "auto" follows the hardware (detection injected, so both
branches run on any machine), explicit settings win, and bf16 computes
within bf16 rounding of fp32 on real weights."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import precision
from bert.models import BertClassifier
from bert import hardware as cpu
from bert.training import run
from conftest import minilm_dir, shared_data

ZEN5 = frozenset({"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"})
ZEN3 = frozenset({"avx2", "fma"})


@pytest.mark.parametrize("flags,onednn,gpu,policy,xla,why", [
    (ZEN5, True, None, "mixed_bfloat16", False, "has avx512_bf16"),
    (frozenset({"amx_bf16"}), True, None, "mixed_bfloat16", False, "has amx_bf16"),
    (ZEN3, True, None, "float32", True, "neither AVX512_BF16 nor AMX"),
    (ZEN5, False, None, "float32", True, "oneDNN kernels are off"),
    (ZEN3, True, (8, 0), "mixed_bfloat16", False, "bf16 tensor cores"),
    (ZEN3, True, (7, 5), "mixed_float16", False, "fp16 tensor cores"),
    (ZEN5, True, (6, 1), "float32", False, "no fp16/bf16 tensor cores"),
])
def test_auto_follows_the_hardware(flags, onednn, gpu, policy, xla, why):
  choice = precision.choose("auto", cpu_flags=flags, onednn=onednn, gpu=gpu)
  assert (choice.policy, choice.jit_compile) == (policy, xla)
  assert why in choice.reason and choice.reason.startswith("auto: ")
  line = choice.describe()
  assert line.startswith(f"precision: {policy}, XLA {'on' if xla else 'off'} (")


def test_explicit_settings_win():
  # A named policy is taken as given, whatever the CPU.
  for policy in precision.POLICIES:
    for cpu_flags in (ZEN3, ZEN5):
      choice = precision.choose(policy, cpu_flags=cpu_flags, onednn=True, gpu=None)
      assert (choice.policy, choice.jit_compile) == (policy, False)
  assert precision.choose("mixed_bfloat16", True, gpu=None).jit_compile is True
  # An explicit jit_compile overrides auto's XLA choice, not its policy.
  forced = precision.choose("auto", True, cpu_flags=ZEN5, onednn=True, gpu=None)
  assert (forced.policy, forced.jit_compile) == ("mixed_bfloat16", True)
  assert "XLA on as configured" in forced.reason
  off = precision.choose("auto", False, cpu_flags=ZEN3, onednn=True, gpu=None)
  assert (off.policy, off.jit_compile) == ("float32", False)
  with pytest.raises(ValueError, match="mixed_precision must be one of.*'bfloat16'"):
    precision.choose("bfloat16")
  with pytest.raises(ValueError, match="int8 is a serving precision"):
    precision.choose("int8")


@pytest.mark.parametrize("name,former,policy", [
    ("fp32", "float32", "float32"), ("bf16", "mixed_bfloat16", "mixed_bfloat16"),
    ("fp16", "mixed_float16", "mixed_float16")])
def test_one_vocabulary_of_precisions_and_earlier_names_still_read(
    name, former, policy):
  from bert import export  # pylint: disable=g-import-not-at-top
  from bert.training import RuntimeConfig  # pylint: disable=g-import-not-at-top
  for given in (name, former):
    choice = precision.choose(given, gpu=None)
    assert (choice.policy, choice.name) == (policy, name)
    assert RuntimeConfig(mixed_precision=given).mixed_precision == name
  if name != "fp16":
    assert export.check_precision(former) == name
  else:
    with pytest.raises(ValueError, match="fp16 is not an export precision"):
      export.check_precision(name)
  with pytest.raises(ValueError, match="jit_compile must be True, False or None"):
    precision.choose("auto", "yes")


def test_detection_reads_this_machine():
  """Without injection, the choice is the one for this machine's flags."""
  choice = precision.choose("auto", gpu=None)
  expected = ("mixed_bfloat16" if cpu.has_bf16() and precision.onednn_enabled()
              else "float32")
  assert choice.policy == expected


def _patch_cpu(monkeypatch, flags):
  monkeypatch.setattr(cpu, "flags", lambda cpuinfo=None: flags)
  monkeypatch.setattr(precision, "onednn_enabled", lambda: True)
  monkeypatch.setattr(precision, "gpu_capability", lambda: None)


@pytest.mark.parametrize("flags,policy,xla", [(ZEN5, "mixed_bfloat16", False),
                                              (ZEN3, "float32", True)])
def test_runtime_config_auto_sets_the_policy_xla_and_says_why(
    monkeypatch, flags, policy, xla):
  _patch_cpu(monkeypatch, flags)
  runtime = run.RuntimeConfig(mixed_precision="auto", strategy="one_device")
  lines = []
  run.setup(runtime, log_fn=lines.append)
  assert tf_keras.mixed_precision.global_policy().name == policy
  assert runtime.precision().jit_compile is xla
  assert lines == [precision.choose("auto", cpu_flags=flags, onednn=True,
                                    gpu=None).describe()]
  # Explicit jit_compile wins over auto's choice.
  assert run.RuntimeConfig(mixed_precision="auto",
                           jit_compile=not xla).precision().jit_compile is not xla
  # The suite's default (BERT_PRECISION=fp32, tests/conftest.py): fp32
  # without XLA; the library's own default: tests/precision_default_test.py.
  assert run.RuntimeConfig().precision() == precision.PrecisionChoice(
      "float32", False, "the default, from BERT_PRECISION")


@pytest.mark.parametrize("flags,policy,xla", [(ZEN5, "mixed_bfloat16", False),
                                              (ZEN3, "float32", True)])
def test_from_pretrained_auto_builds_in_the_chosen_policy_and_compile_follows(
    monkeypatch, flags, policy, xla):
  _patch_cpu(monkeypatch, flags)
  model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2,
                                         precision="auto", seq_length=32)
  assert model.precision_choice.policy == policy
  assert model.encoder.dtype_policy.name == policy
  assert tf_keras.mixed_precision.global_policy().name == "float32"  # restored
  model.compile()
  assert bool(model._jit_compile) is xla
  model.compile(jit_compile=not xla)   # explicit wins
  assert bool(model._jit_compile) is not xla
  # A student taken from the teacher computes in the teacher's policy.
  student = BertClassifier.from_teacher(model, [0, 2, 4])
  assert student.encoder.dtype_policy.name == policy
  assert student.precision_choice == model.precision_choice


def test_bf16_forward_is_within_bf16_rounding_of_fp32_on_real_weights():
  """MiniLM on real SST-2 sentences: bf16 (8-bit mantissa, relative rounding
  2^-8 per operation, compounded over 6 blocks) stays close to fp32 in the
  pooled output and the sequence output, and gives the same nearest
  neighbours; it is not fp32 in disguise (differences well above fp32's)."""
  from bert.models import load_encoder  # pylint: disable=g-import-not-at-top
  from bert.data import classification_data as cd  # pylint: disable=g-import-not-at-top
  texts = [e.text_a for e in cd.read_glue(
      "sst-2", shared_data("glue", "SST-2", "dev.tsv"), "eval")[:24]]
  outputs = {}
  for policy in ("float32", "mixed_bfloat16"):
    encoder = load_encoder(minilm_dir(), seq_length=64,
                                          precision=policy)
    assert encoder.compute_dtype == policy.replace("mixed_", "")
    out = encoder(encoder.preprocessor(tf.constant(texts)), training=False)
    outputs[policy] = {k: tf.cast(out[k], tf.float32).numpy()
                       for k in ("sequence_output", "pooled_output")}
  fp32, bf16 = outputs["float32"], outputs["mixed_bfloat16"]
  for key in fp32:
    scale = np.abs(fp32[key]).max()
    err = np.abs(fp32[key] - bf16[key]).max() / scale
    assert 1e-4 < err < 0.05, (key, err)
  # Sentence embeddings (mean of the sequence output) keep their geometry.
  def cosine(x):
    x = x.mean(axis=1)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x @ x.T
  assert np.abs(cosine(fp32["sequence_output"]) -
                cosine(bf16["sequence_output"])).max() < 0.02
