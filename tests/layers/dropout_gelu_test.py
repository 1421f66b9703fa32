"""`bert.layers.Dropout` (16-bit masks) and the training GELU (hand-written
gradient): the same functions as Keras' dropout and `tf.nn.gelu`."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import BertEncoder, layers
from bert.layers import activations
from bert.layers.dropout import keep_threshold
from conftest import random_inputs, registered_gradients, small_config


def _dropout(rate, seed=1):
  tf_keras.utils.set_random_seed(seed)
  layer = layers.Dropout(rate)
  layer.build([None])
  return layer


def test_dropout_rate_scale_and_identity_outside_training():
  x = tf.ones([1000, 1000])
  layer = _dropout(0.1)
  y = layer(x, training=True).numpy()
  dropped = (y == 0).mean()
  # 10^6 Bernoulli draws: the standard error of the rate is 3e-4.
  assert abs(dropped - 0.1) < 2e-3, dropped
  kept = y[y != 0]
  scale = 65536 / (65536 - keep_threshold(0.1))
  np.testing.assert_allclose(kept, scale, rtol=1e-6)
  assert abs(y.mean() - 1.0) < 3e-3           # unbiased: E[y] = x
  # Not training, or rate 0: the input unchanged.
  np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
  np.testing.assert_array_equal(_dropout(0.0)(x, training=True).numpy(), x.numpy())
  assert (_dropout(1.0)(x, training=True).numpy() == 0).all()


@pytest.mark.parametrize("rate", [0.3, 0.5])
def test_dropout_masks_every_position_alike_and_follow_the_seed(rate):
  # An odd size (a half uint32 left over) and a rank-3 shape.
  x = tf.ones([64, 37, 41])
  a = _dropout(rate, seed=3)(x, training=True).numpy()
  b = _dropout(rate, seed=3)(x, training=True).numpy()
  c = _dropout(rate, seed=4)(x, training=True).numpy()
  np.testing.assert_array_equal(a, b)         # the seed decides the mask
  assert (a != c).mean() > 0.1                # negative control
  # Each position is dropped at the rate (no stripes from the 16-bit split):
  # even and odd elements, and every column, within 5 standard errors.
  zero = a == 0
  for part in (zero.reshape(-1)[0::2], zero.reshape(-1)[1::2]):
    assert abs(part.mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / part.size)
  per_column = zero.mean(axis=(0, 1))
  assert np.abs(per_column - rate).max() < 5 * np.sqrt(rate * (1 - rate) / (64 * 37))
  # Draws advance the generator: a second call draws another mask.
  layer = _dropout(rate, seed=3)
  first, second = layer(x, training=True), layer(x, training=True)
  assert (first.numpy() != second.numpy()).mean() > 0.1


def test_inference_traces_the_model_once_and_makes_no_generator():
  encoder = BertEncoder(small_config())
  dropouts = [l for l in encoder.submodules if isinstance(l, layers.Dropout)]
  assert dropouts
  before = len(encoder.variables)
  infer = tf.function(lambda x: encoder(x, training=False))
  infer(random_inputs(2, 8))
  # A tf.function whose first run creates a variable (a generator's state)
  # traces the model a second time.
  assert infer.experimental_get_tracing_count() == 1
  assert len(encoder.variables) == before
  # Training makes them, and draws masks from them.
  train = tf.function(lambda x: encoder(x, training=True))
  train(random_inputs(2, 8))
  assert all(d._random_generator._generator is not None for d in dropouts)  # pylint: disable=protected-access


def test_dropout_gradient_is_the_mask_and_bf16_keeps_the_dtype():
  layer = _dropout(0.25)
  x = tf.random.normal([50, 60])
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = layer(x, training=True)
  grad = tape.gradient(y, x).numpy()
  scale = 65536 / (65536 - keep_threshold(0.25))
  np.testing.assert_allclose(grad, np.where(y.numpy() != 0, scale, 0), rtol=1e-6)
  y16 = layers.Dropout(0.25, dtype="mixed_bfloat16")(x, training=True)
  assert y16.dtype == tf.bfloat16
  assert 0.2 < (y16.numpy() == 0).mean() < 0.3


def test_dropout_with_noise_shape_is_keras_dropout():
  x = tf.ones([20, 8])
  tf_keras.utils.set_random_seed(5)
  a = layers.Dropout(0.5, noise_shape=[None, 1])(x, training=True).numpy()
  tf_keras.utils.set_random_seed(5)
  b = tf_keras.layers.Dropout(0.5, noise_shape=[None, 1])(x, training=True).numpy()
  np.testing.assert_array_equal(a, b)
  assert (a == a[:, :1]).all()                # one mask value per row


def _gelu_derivative(name, x):
  """d/dx GELU in float64."""
  if name == "gelu":
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
  cdf = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
  return cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
def test_training_gelu_matches_tf_gelu_and_its_autodiff(name):
  x = tf.constant(np.linspace(-8, 8, 4001), tf.float32)
  exact = _gelu_derivative(name, x.numpy().astype(np.float64))
  train, plain = (activations.get_activation(name, training=True),
                  activations.get_activation(name))
  assert train is not plain
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    y_train, y_plain = train(x), plain(x)
  np.testing.assert_allclose(y_train.numpy(), y_plain.numpy(), atol=1e-6)
  g_train = tape.gradient(y_train, x).numpy()
  g_plain = tape.gradient(y_plain, x).numpy()
  # Both within float32 rounding of the float64 derivative (the tanh form
  # loses ~4e-6 to 1 + tanh(u) near -1 in either), and of each other.
  np.testing.assert_allclose(g_train, exact, atol=5e-6)
  np.testing.assert_allclose(g_plain, exact, atol=5e-6)
  np.testing.assert_allclose(g_train, g_plain, atol=5e-6)
  # Not the other form's gradient (negative control: the forms differ).
  other = activations.get_activation(
      "gelu_exact" if name == "gelu" else "gelu", training=True)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y_other = other(x)
  assert np.abs(tape.gradient(y_other, x).numpy() - g_plain).max() > 1e-4
  # bf16 in, bf16 out; values and gradient within bf16 rounding of float32.
  x16 = tf.cast(x, tf.bfloat16)
  with tf.GradientTape() as tape:
    tape.watch(x16)
    y16 = train(x16)
  g16 = tape.gradient(y16, x16)
  assert y16.dtype == g16.dtype == tf.bfloat16
  np.testing.assert_allclose(tf.cast(y16, tf.float32).numpy(), y_plain.numpy(),
                             rtol=2 ** -7, atol=2 ** -7)
  np.testing.assert_allclose(tf.cast(g16, tf.float32).numpy(), g_plain,
                             rtol=2 ** -7, atol=2 ** -6)


def test_other_activations_have_no_training_variant():
  assert activations.get_activation("relu", training=True) is tf.nn.relu
  with pytest.raises(ValueError, match="swishy"):
    activations.get_activation("swishy", training=True)


def _one_traced_train_step(encoder):
  x = {k: tf.constant(v) for k, v in random_inputs(2, 8).items()}

  @tf.function
  def step(inputs):
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)
      loss = (tf.reduce_sum(out["sequence_output"])
              + tf.reduce_sum(out["pooled_output"]))
    return tape.gradient(loss, encoder.trainable_variables)

  return step(x)


def test_training_a_new_model_leaves_no_gradient_holding_the_old_one():
  """The training GELU's custom gradient is registered once per dtype and
  rank, in a graph of its own, not once per train step traced: a gradient
  registered in a step's graph keeps that graph, and every variable it
  captured, for the life of the process (bench/PERFORMANCE.md, "Memory a
  `fit` keeps")."""
  _one_traced_train_step(BertEncoder(small_config(hidden_act="gelu")))
  before = registered_gradients()
  for _ in range(2):
    grads = _one_traced_train_step(BertEncoder(small_config(hidden_act="gelu")))
    assert all(g is not None for g in grads)
  assert registered_gradients() == before
  # Negative control: the same custom gradient traced inside each step (as
  # the GELU was) registers one more gradient per step.
  inline = tf.custom_gradient(lambda v: (v * 2.0, lambda dy: dy * 2.0))

  @tf.function
  def step(v):
    with tf.GradientTape() as tape:
      tape.watch(v)
      y = inline(v)
    return tape.gradient(y, v)

  step(tf.constant(1.0))
  step(tf.constant([1.0, 2.0]))      # a new shape: traced again
  assert registered_gradients() == before + 2
