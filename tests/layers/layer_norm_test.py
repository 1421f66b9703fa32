"""`bert.layers.LayerNormalization`: Keras' LayerNorm at fp32 and in
training, and for bf16 inference the graph oneDNN fuses into one kernel,
with float32 statistics (frozen weights included)."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import layers
from bert import precision

H = 64


def _pair(epsilon=1e-12, seed=0):
  """Ours and Keras' layer with the same (non-trivial) gamma and beta."""
  rng = np.random.default_rng(seed)
  ours = layers.LayerNormalization(epsilon=epsilon, dtype="float32")
  keras = tf_keras.layers.LayerNormalization(epsilon=epsilon, dtype="float32")
  for layer in (ours, keras):
    layer.build([None, None, H])
  weights = [rng.normal(1, 0.3, H).astype(np.float32),
             rng.normal(0, 0.3, H).astype(np.float32)]
  ours.set_weights(weights)
  keras.set_weights(weights)
  return ours, keras


def _inputs(seed=0, shape=(3, 7, H)):
  # Rows with their own offset and scale, as residual streams have.
  rng = np.random.default_rng(seed)
  x = rng.normal(0, 1, shape) * rng.uniform(0.1, 5, shape[:-1] + (1,))
  return (x + rng.normal(0, 3, shape[:-1] + (1,))).astype(np.float32)


def _fused_graph(layer, dtype, training=False):
  """The layer traced with unknown batch and length (as served)."""
  return tf.function(lambda x: layer(x, training=training),
                     input_signature=[tf.TensorSpec([None, None, H], dtype)])


def test_fp32_and_training_are_keras_layer_norm():
  ours, keras = _pair()
  x = _inputs()
  np.testing.assert_array_equal(ours(x).numpy(), keras(x).numpy())
  xb = tf.cast(x, tf.bfloat16)
  # Training takes Keras' path (float32 out, its gradient) in bf16 too.
  with tf.GradientTape() as tape:
    y = ours(xb, training=True)
    loss = tf.reduce_sum(y * y)
  assert y.dtype == tf.float32
  np.testing.assert_array_equal(y.numpy(), keras(xb).numpy())
  grads = tape.gradient(loss, ours.trainable_weights)
  assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)


def test_bf16_inference_is_the_float32_result_rounded_to_bf16():
  ours, keras = _pair()
  x = tf.cast(_inputs(seed=1), tf.bfloat16)
  reference = keras(x).numpy()            # float32 statistics of the bf16 input
  graph = _fused_graph(ours, tf.bfloat16)
  y = graph(x)
  assert y.dtype == tf.bfloat16
  # bf16 keeps 8 bits: the rounding of the result, of gamma and of beta.
  np.testing.assert_allclose(tf.cast(y, tf.float32).numpy(), reference,
                             rtol=2 ** -7, atol=2 ** -7)
  # Eager (no grappler to fuse it): Keras' path, float32.
  np.testing.assert_array_equal(ours(x, training=False).numpy(), reference)
  # Negative control: bf16 statistics (moments computed in bf16) miss by more.
  mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
  naive = tf.cast(tf.nn.batch_normalization(
      x, mean, var, tf.cast(ours.beta, tf.bfloat16),
      tf.cast(ours.gamma, tf.bfloat16), 1e-12), tf.float32).numpy()
  assert np.abs(naive - reference).max() > 4 * np.abs(
      tf.cast(graph(x), tf.float32).numpy() - reference).max()


def test_bf16_inference_writes_the_fused_pattern_only_where_it_fuses():
  ours, _ = _pair()
  def ops(fn, *args):
    return {op.type for op in fn.get_concrete_function(*args).graph.get_operations()}
  fused = ops(_fused_graph(ours, tf.bfloat16))
  assert "FusedBatchNormV3" in fused and "Mean" not in fused
  # A fully known shape, training, float32 (the graph OpenVINO and TFLite
  # convert) or oneDNN off: Keras' graph.
  static = tf.function(lambda x: ours(x, training=False))
  assert "FusedBatchNormV3" not in ops(static, tf.TensorSpec([3, 7, H], tf.bfloat16))
  assert "FusedBatchNormV3" not in ops(_fused_graph(ours, tf.bfloat16, True))
  assert "FusedBatchNormV3" not in ops(_fused_graph(ours, tf.float32))


def _frozen(layer, dtype):
  from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-import-not-at-top
  return convert_to_constants.convert_variables_to_constants_v2(
      _fused_graph(layer, dtype).get_concrete_function())


def test_bf16_inference_keeps_its_epsilon_with_frozen_weights():
  """A bf16 serving network freezes gamma and beta into the graph
  (`bert.serving.frozen`): the one kernel still gives the float32 LayerNorm
  rounded to bf16."""
  ours, keras = _pair()
  x = tf.cast(_inputs(seed=3), tf.bfloat16)
  reference = keras(x).numpy()
  y = tf.cast(_frozen(ours, tf.bfloat16)(x)[0], tf.float32).numpy()
  np.testing.assert_allclose(y, reference, rtol=2 ** -7, atol=2 ** -7)
  # Negative control, and the reason Keras' own graph is not served frozen:
  # with constant gamma and beta, TensorFlow's oneDNN remapper replaces
  # Keras' moments-based LayerNorm by its kernel at epsilon 1e-3, whatever
  # the layer's (BERT's is 1e-12). Where oneDNN is off, nothing is replaced.
  if precision.onednn_enabled():
    x32 = tf.constant(_inputs(seed=3))
    y32 = _frozen(keras, tf.float32)(x32)[0].numpy()
    assert np.abs(y32 - keras(x32).numpy()).max() > 1e-4


def test_without_onednn_bf16_takes_keras_path(monkeypatch):
  monkeypatch.setattr(precision, "onednn_enabled", lambda: False)
  ours, keras = _pair()
  x = tf.cast(_inputs(seed=2), tf.bfloat16)
  y = _fused_graph(ours, tf.bfloat16)(x)
  assert y.dtype == tf.float32
  np.testing.assert_array_equal(y.numpy(), keras(x).numpy())


def test_a_bf16_encoder_uses_it_and_stays_within_bf16_of_fp32():
  """Under mixed_bfloat16 the encoder blocks' LayerNorms take bf16 in and
  out; the encoder's output stays within bf16 rounding of fp32's."""
  from bert import BertEncoder  # pylint: disable=g-import-not-at-top
  from conftest import random_inputs, small_config  # pylint: disable=g-import-not-at-top
  inputs = random_inputs(2, 16)
  with precision.policy_scope("fp32"):
    enc32 = BertEncoder(small_config())
  with precision.policy_scope("bf16"):
    enc16 = BertEncoder(small_config())
  enc32(inputs)
  enc16(inputs)
  enc16.set_weights(enc32.get_weights())
  f = tf.function(lambda x: enc16(x, training=False)["sequence_output"],
                  input_signature=[{k: tf.TensorSpec([None, None], tf.int32)
                                    for k in inputs}])
  assert "FusedBatchNormV3" in {
      op.type for op in f.get_concrete_function().graph.get_operations()}
  y = tf.cast(f(inputs), tf.float32).numpy()
  ref = enc32(inputs, training=False)["sequence_output"].numpy()
  assert 1e-4 < np.abs(y - ref).max() < 0.05 * np.abs(ref).max()
