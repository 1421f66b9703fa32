"""Invariants of BertEncoder and EncoderScaffold."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import BertConfig, BertEncoder, EncoderScaffold
from bert.networks import scaffold_kwargs
from conftest import max_abs_diff, random_inputs, small_config
import harness


def outputs_equal(a, b, tol):
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    assert max_abs_diff(x, y) <= tol


def test_output_structure_and_dynamic_length():
  config = small_config(num_hidden_layers=3)
  encoder = BertEncoder(config, return_attention_probs=True)
  for seq in (8, 13):
    out = encoder(random_inputs(2, seq))
    assert out["sequence_output"].shape == (2, seq, 64)
    assert out["pooled_output"].shape == (2, 64)
    assert len(out["encoder_outputs"]) == 3
    assert max_abs_diff(out["encoder_outputs"][-1], out["sequence_output"]) == 0
    assert out["attention_probs"][0].shape == (2, 4, seq, seq)
  # The pooler is dense + tanh on the [CLS] output.
  pooler = encoder.pooler_layer
  ref = np.tanh(out["sequence_output"][:, 0].numpy() @ pooler.kernel.numpy()
                + pooler.bias.numpy())
  assert max_abs_diff(out["pooled_output"], ref) < 1e-5


def test_padding_does_not_change_real_tokens():
  encoder = BertEncoder(small_config())
  inputs = random_inputs(3, 10, lengths=[10, 6, 3])
  out = encoder(inputs, training=False)
  padded = {k: tf.pad(v, [[0, 0], [0, 7]]) for k, v in inputs.items()}
  padded_out = encoder(padded, training=False)
  mask = inputs["input_mask"].numpy().astype(bool)
  assert max_abs_diff(out["sequence_output"].numpy()[mask],
                      padded_out["sequence_output"].numpy()[:, :10][mask]) <= 1e-6
  assert max_abs_diff(out["pooled_output"], padded_out["pooled_output"]) <= 1e-6


def test_dropout_only_in_training():
  encoder = BertEncoder(small_config(hidden_dropout_prob=0.2,
                                     attention_probs_dropout_prob=0.2))
  inputs = random_inputs(2, 8)
  a = encoder(inputs, training=False)["sequence_output"]
  b = encoder(inputs, training=False)["sequence_output"]
  assert max_abs_diff(a, b) == 0.0
  assert max_abs_diff(a, encoder(inputs)["sequence_output"]) == 0.0  # default
  c = encoder(inputs, training=True)["sequence_output"]
  d = encoder(inputs, training=True)["sequence_output"]
  assert max_abs_diff(a, c) > 1e-2 and max_abs_diff(c, d) > 1e-2


def test_xla_matches_eager():
  encoder = BertEncoder(small_config())
  inputs = random_inputs(3, 11)
  eager = encoder(inputs, training=False)
  xla = tf.function(lambda x: encoder(x, training=False), jit_compile=True)
  outputs_equal(eager, xla(inputs), 1e-5)


def test_bert_encoder_is_an_encoder_scaffold():
  config = small_config(num_hidden_layers=3, embedding_size=48)
  encoder = BertEncoder(config)
  scaffold = EncoderScaffold(**scaffold_kwargs(config))
  scaffold.set_weights(encoder.get_weights())
  inputs = random_inputs(2, 10)
  outputs_equal(encoder(inputs), scaffold(inputs), 0.0)


def test_packed_inputs_equal_separate_examples():
  """Two examples in one row, with their own positions and a block-diagonal
  mask, give the same per-token outputs as each example alone."""
  encoder = BertEncoder(small_config())
  a = random_inputs(1, 6, seed=1, lengths=[6])
  b = random_inputs(1, 4, seed=2, lengths=[4])
  out_a = encoder(a)["sequence_output"]
  out_b = encoder(b)["sequence_output"]
  packed = {k: tf.concat([a[k], b[k]], axis=1)
            for k in ("input_word_ids", "input_type_ids")}
  packed["input_positions"] = tf.constant([[0, 1, 2, 3, 4, 5, 0, 1, 2, 3]])
  block = np.zeros((1, 10, 10), np.int32)
  block[0, :6, :6] = 1
  block[0, 6:, 6:] = 1
  packed["attention_mask"] = tf.constant(block)
  out = encoder(packed)["sequence_output"]
  assert max_abs_diff(out[:, :6], out_a) <= 1e-5
  assert max_abs_diff(out[:, 6:], out_b) <= 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_pooled_equals_full_pass_values_and_gradients(norm_first):
  """`pooled` runs the last block for the [CLS] rows only: same pooled
  output and same gradients as the full pass, plain and packed."""
  tf_keras.utils.set_random_seed(7)
  encoder = BertEncoder(small_config(num_hidden_layers=3, norm_first=norm_first))
  plain = random_inputs(3, 12, seed=3)
  packed = dict(input_word_ids=plain["input_word_ids"],
                input_type_ids=plain["input_type_ids"],
                input_positions=tf.constant([[0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 1, 2]] * 3),
                input_mask=tf.constant([[1] * 4 + [2] * 5 + [3] * 3] * 3),
                cls_positions=tf.constant([[0, 4, 9]] * 3))
  weights = tf.random.stateless_normal([64], [1, 2])
  for inputs in (plain, packed):
    values = []
    for run in (lambda x: encoder(x)["pooled_output"],
                lambda x: encoder(x, pooled_only=True)["pooled_output"]):
      with tf.GradientTape() as tape:
        pooled = run(inputs)
        loss = tf.reduce_sum(tf.tanh(pooled * weights))
      grads = tape.gradient(loss, encoder.trainable_variables)
      values.append([pooled] + [tf.convert_to_tensor(g) for g in grads])
    assert values[0][0].shape == values[1][0].shape
    for full, fast in zip(*values):
      # fp32 sums in another order: 1e-5 relative to the largest value.
      scale = max(1.0, float(np.abs(full).max()))
      assert max_abs_diff(full, fast) <= 1e-5 * scale
  assert set(encoder(plain, pooled_only=True)) == {"pooled_output"}


def test_too_long_and_missing_inputs_are_clear_errors():
  encoder = BertEncoder(small_config(max_position_embeddings=16))
  with pytest.raises((ValueError, tf.errors.InvalidArgumentError),
                     match="max_position_embeddings=16"):
    encoder(random_inputs(1, 17))
  with pytest.raises(ValueError, match="input_mask"):
    encoder({"input_word_ids": tf.ones((1, 4), tf.int32)})


def test_preset_encoders_build():
  # A mid-size preset end to end, to catch shape bugs beyond the tiny config.
  encoder = BertEncoder(BertConfig.preset("bert_L4_H256"))
  out = encoder(random_inputs(2, 16, vocab_size=30522))
  assert out["sequence_output"].shape == (2, 16, 256)


# ------------------------------------------------------- shared harness
def test_harness_bert_encoder():
  """Config round trip (the BertConfig survives), the default traced Keras
  SavedModel revived by tf_keras and served by plain TensorFlow, a training
  step, and mixed_bfloat16: bf16 outputs within 0.1 (sequence) and 0.05
  (pooled) of float32 (bf16 keeps 8 mantissa bits, ~0.4% relative; the
  LayerNorm outputs are O(1))."""
  out = harness.run_model_test(
      BertEncoder, dict(config=small_config(), return_attention_probs=True),
      random_inputs(2, 12), saved_model_mode="keras_traced",
      mixed_precision_policy="mixed_bfloat16",
      mixed_atol={"sequence_output": 0.1, "pooled_output": 0.05})
  assert out["sequence_output"].shape == (2, 12, 64)
  assert len(out["attention_probs"]) == 2


def test_harness_bert_encoder_float16():
  """mixed_float16: float16 outputs within 0.02 of float32, float32 master
  weights (the word embeddings among them). BertPretrainer's harness test
  checks that the heads' logits stay float32 under it."""
  harness.run_model_test(
      BertEncoder, dict(config=small_config()), random_inputs(2, 12),
      checks=("mixed_precision",), mixed_precision_policy="mixed_float16",
      mixed_atol={"sequence_output": 0.02})


def test_harness_encoder_scaffold():
  """The scaffold with factorised embeddings and pre-LN blocks: its classes
  are serialised by registered name and restored (config), revived from a
  Keras SavedModel, trained and run in mixed precision."""
  harness.run_model_test(
      EncoderScaffold,
      scaffold_kwargs(small_config(embedding_size=32, norm_first=True)),
      random_inputs(2, 10))


@pytest.mark.parametrize("cls,kwargs", [
    (BertEncoder, dict(config=small_config())),
    (EncoderScaffold, scaffold_kwargs(small_config())),
], ids=["BertEncoder", "EncoderScaffold"])
def test_harness_config_keeps_a_frozen_encoder_frozen(cls, kwargs):
  harness.run_model_test(cls, dict(kwargs, trainable=False),
                         random_inputs(2, 8), checks=("config",))

