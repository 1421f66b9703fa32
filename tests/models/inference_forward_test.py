"""`predict`, `encode` and a teacher's targets on a bf16 model: the Keras
forward until freezing pays (the ski-rental rule), then the frozen bf16
network, never stale after the weights change
(`bert.serving.frozen.InferenceForward`)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from bert import BertEncoder, precision
from bert.models import BertClassifier, BertTextEmbedder
from bert.serving import frozen
from conftest import minilm_dir, random_inputs, small_config
from keras_api_test import mrpc


def _tiny_classifier(policy):
  with precision.policy_scope(policy):
    return BertClassifier(BertEncoder(small_config()), 2)


def _batch(seed=0):
  return random_inputs(4, 16, seed=seed)


def test_freezes_once_the_time_lost_equals_the_cost_of_freezing():
  model = _tiny_classifier("bf16")
  forward = frozen.InferenceForward(model, lambda m, b: m.inference_outputs(b))
  ticks = itertools.count()
  forward.clock = lambda: float(next(ticks))   # each timed span: 1 s
  forward.freeze_seconds = 1.0
  batch = _batch()
  run = forward.for_rows(1000)
  forward.saved_share = 0.3
  # The first batch traces (not counted); then each Keras batch loses
  # 0.3 s, and the fourth counted one reaches 1 s: it freezes.
  expected = run(batch)["logits"]
  assert forward.freezes == 0
  for i in range(4):
    np.testing.assert_array_equal(run(batch)["logits"], expected)
    assert forward.freezes == (1 if i == 3 else 0), i
  assert forward.batches == {"keras": 5, "frozen": 0}
  got = run(batch)["logits"]
  assert forward.batches == {"keras": 5, "frozen": 1}
  other = run(_batch(seed=1))["logits"]           # negative control
  assert np.abs(other - expected).max() > 10 * np.abs(got - expected).max()
  np.testing.assert_allclose(got, expected, atol=1e-3)
  # A later call of the same weights runs frozen from its first batch,
  # without freezing again.
  forward.for_rows(1000)(batch)
  assert forward.freezes == 1 and forward.batches["frozen"] == 3


def test_small_calls_and_float32_models_stay_on_keras():
  model = _tiny_classifier("bf16")
  forward = frozen.InferenceForward(model, lambda m, b: m.inference_outputs(b))
  forward.freeze_seconds = 1e-9
  batch = _batch()
  run = forward.for_rows(1000)
  run(batch)                       # traces: not counted
  assert forward.freezes == 0
  run(batch)                       # counted: freezes
  assert forward.freezes == 1
  # A call whose saving is smaller than the fingerprint check runs Keras.
  per_token = forward._keras_seconds / forward._keras_tokens
  forward._fingerprint_seconds = 1000 * per_token
  forward.for_rows(10)(batch)
  assert forward.batches["frozen"] == 0
  forward.for_rows(10 ** 6)(batch)
  assert forward.batches["frozen"] == 1
  # float32: frozen measured no faster; the Keras forward, untimed.
  fp32 = _tiny_classifier("fp32")
  forward = frozen.InferenceForward(fp32, lambda m, b: m.inference_outputs(b))
  forward.freeze_seconds = 0.0
  run = forward.for_rows(1000)
  for _ in range(3):
    run(batch)
  assert forward.freezes == 0 and not forward.bf16


def _perturbed(weights, seed):
  rng = np.random.default_rng(seed)
  return [w + rng.normal(0, 0.02, w.shape).astype(w.dtype) for w in weights]


def test_bf16_predict_runs_frozen_and_is_never_stale():
  a, b, _ = mrpc(24)
  model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2,
                                         precision="bf16")
  assert model.compute_dtype == "bfloat16"
  keras = model.predict((a, b), batch_size=8)
  forward = frozen.InferenceForward.of(model, "inference_outputs")
  assert forward.freezes == 0 and forward.batches["frozen"] == 0
  forward.freeze_seconds = 0.0
  model.predict((a, b), batch_size=8)       # freezes after its first batch
  assert forward.freezes == 1
  got = model.predict((a, b), batch_size=8)
  assert forward.batches["frozen"] >= 3 + 2
  # The same bf16 products as the Keras forward, in another kernel order.
  np.testing.assert_allclose(got["probabilities"], keras["probabilities"],
                             atol=2e-3)
  np.testing.assert_array_equal(got["labels"],
                                got["probabilities"].argmax(-1))

  def check_fresh(what):
    """predict equals the Keras forward of the current weights, up to bf16
    kernel order; the frozen network of the old ones (a stale cache) is
    ten times further off."""
    forward.freeze_seconds = float("inf")
    frozen_before = forward.batches["frozen"]
    reference = model.predict((a, b), batch_size=8)["probabilities"]
    assert forward.batches["frozen"] == frozen_before, what  # Keras ran
    forward.freeze_seconds = 0.0
    model.predict((a, b), batch_size=8)
    out = model.predict((a, b), batch_size=8)["probabilities"]
    assert forward.batches["frozen"] >= frozen_before + 3 + 2, what
    off, stale_off = (np.abs(p - reference).max() for p in (out, stale))
    assert off < 1e-2 and stale_off > 10 * off, (what, off, stale_off)
    return out

  stale = got["probabilities"]
  model.set_weights(_perturbed(model.get_weights(), 1))
  stale = check_fresh("set_weights")
  assert forward.freezes == 2
  kernel = model.head.trainable_weights[-2]      # the logits' kernel
  assert kernel.shape[-1] == 2
  kernel.assign(kernel * -3.0)
  check_fresh("assign")
  assert forward.freezes == 3


def test_bf16_encode_runs_frozen():
  a, _, _ = mrpc(16)
  model = BertTextEmbedder.from_pretrained(minilm_dir(), precision="bf16")
  keras = model.encode(a, batch_size=8)
  forward = frozen.InferenceForward.of(model, "inference_embeddings")
  forward.freeze_seconds = 0.0
  model.encode(a, batch_size=8)
  got = model.encode(a, batch_size=8)
  assert forward.freezes == 1 and forward.batches["frozen"] >= 2 + 1
  assert got.dtype == np.float32 and got.shape == keras.shape
  # Unit rows: cosine of each frozen row with its Keras row.
  assert np.min(np.sum(got * keras, -1)) > 0.9999
  with pytest.raises(AssertionError):            # negative control
    np.testing.assert_allclose(got, keras[::-1], atol=1e-2)
