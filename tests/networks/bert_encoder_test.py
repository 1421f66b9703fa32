"""Invariants of BertEncoder and EncoderScaffold."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import BertConfig, BertEncoder, EncoderScaffold
from bert.networks import scaffold_kwargs
from conftest import max_abs_diff, random_inputs, small_config


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


def test_get_config_round_trip():
  encoder = BertEncoder(small_config(embedding_size=32, norm_first=True),
                        return_attention_probs=True)
  inputs = random_inputs(2, 8)
  config = encoder.get_config()
  clone = BertEncoder.from_config(config)
  assert clone.get_config() == config
  assert clone.config == encoder.config
  clone.set_weights(encoder.get_weights())
  outputs_equal(encoder(inputs), clone(inputs), 0.0)


def test_savedmodel_round_trip(tmp_path):
  encoder = BertEncoder(small_config())
  inputs = random_inputs(2, 9)
  expected = encoder(inputs)
  path = str(tmp_path / "encoder")
  encoder.save(path, save_format="tf")
  tf_keras.backend.clear_session()
  restored = tf_keras.models.load_model(path)
  assert isinstance(restored, BertEncoder)
  outputs_equal(expected, restored(inputs), 0.0)
  # And as a plain TF SavedModel (no Keras objects), as serving loads it.
  plain = tf.saved_model.load(path)
  outputs_equal(expected["sequence_output"],
                plain(inputs, training=False)["sequence_output"], 1e-6)


def test_mixed_bfloat16_close_to_float32():
  config = small_config()
  fp32 = BertEncoder(config)
  inputs = random_inputs(2, 12)
  expected = fp32(inputs)
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  bf16 = BertEncoder(config)
  bf16.set_weights(fp32.get_weights())
  out = bf16(inputs)
  assert out["sequence_output"].dtype == tf.bfloat16
  seq = tf.cast(out["sequence_output"], tf.float32)
  assert bool(tf.reduce_all(tf.math.is_finite(seq)))
  # bf16 keeps 8 mantissa bits (~0.4% relative); LayerNorm outputs are O(1).
  assert max_abs_diff(seq, expected["sequence_output"]) < 0.1
  assert max_abs_diff(tf.cast(out["pooled_output"], tf.float32),
                      expected["pooled_output"]) < 0.05


def test_mixed_float16_dtypes_and_float32_head_outputs():
  from bert.checkpoints import build_pretraining_heads
  config = small_config()
  fp32 = BertEncoder(config)
  inputs = random_inputs(2, 12)
  expected = fp32(inputs)["sequence_output"]
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  fp16 = BertEncoder(config)
  fp16.set_weights(fp32.get_weights())
  out = fp16(inputs)
  assert out["sequence_output"].dtype == tf.float16
  assert fp16.embedding_layer.word_embeddings.dtype == tf.float32  # master weights
  assert max_abs_diff(tf.cast(out["sequence_output"], tf.float32), expected) < 0.02
  masked_lm, next_sentence = build_pretraining_heads(fp16)
  logits = masked_lm(out["sequence_output"], tf.constant([[1, 2], [0, 3]]))
  assert logits.dtype == tf.float32
  assert next_sentence(out["pooled_output"]).dtype == tf.float32


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
  # Classes are serialised by registered name and restored.
  clone = EncoderScaffold.from_config(scaffold.get_config())
  clone.set_weights(scaffold.get_weights())
  outputs_equal(scaffold(inputs), clone(inputs), 0.0)


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
