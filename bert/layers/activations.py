"""Activation functions named by `BertConfig.hidden_act`.

"gelu" is the tanh approximation used by google-research BERT and Model
Garden (and so by every released TF checkpoint); "gelu_exact" is the erf form
that Hugging Face calls "gelu". See bert/config.py for the name mapping.
"""

import math

import tensorflow as tf

from bert.io import tracing_a_savedmodel
from bert.layers._util import elementwise_region


def gelu(x):
  """GELU, tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
  return tf.nn.gelu(x, approximate=True)


def gelu_exact(x):
  """GELU, exact form: x * Phi(x) with the normal CDF via erf."""
  return tf.nn.gelu(x, approximate=False)


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


@elementwise_region
def _gelu_tanh_forward(x):
  """GELU(x) and tanh(u(x)), the factor the gradient needs."""
  x32 = tf.cast(x, tf.float32)
  t = tf.math.tanh(_SQRT_2_OVER_PI * (x32 + 0.044715 * x32 * x32 * x32))
  return tf.cast(x32 * (0.5 * (1.0 + t)), x.dtype), tf.cast(t, x.dtype)


@elementwise_region
def _gelu_tanh_backward(x, t, dy):
  """dy * d/dx 0.5x(1 + t), t = tanh(u(x))."""
  x32, t32 = tf.cast(x, tf.float32), tf.cast(t, tf.float32)
  du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x32 * x32)
  d = 0.5 * (1.0 + t32) + 0.5 * x32 * (1.0 - t32 * t32) * du
  return tf.cast(tf.cast(dy, tf.float32) * d, dy.dtype)


@elementwise_region
def _gelu_erf_forward(x):
  """GELU(x) and Phi(x), the factor the gradient needs."""
  x32 = tf.cast(x, tf.float32)
  cdf = 0.5 * tf.math.erfc(x32 * -_INV_SQRT_2)
  return tf.cast(x32 * cdf, x.dtype), tf.cast(cdf, x.dtype)


@elementwise_region
def _gelu_erf_backward(x, cdf, dy):
  """dy * d/dx x Phi(x) = dy * (Phi(x) + x phi(x))."""
  x32 = tf.cast(x, tf.float32)
  d = tf.cast(cdf, tf.float32) + x32 * (tf.exp(-0.5 * x32 * x32) *
                                        _INV_SQRT_2PI)
  return tf.cast(tf.cast(dy, tf.float32) * d, dy.dtype)


def _gelu_for_training(approximate: bool):
  """GELU with a hand-written gradient, computed in float32 whatever the
  input dtype, each direction one XLA-fused pass.

  Training needs the activation's input for the gradient, so oneDNN cannot
  fuse GELU into the matmul there, and TensorFlow's autodiff of
  `tf.nn.gelu` costs several element-wise ops, run in bf16 under
  `mixed_bfloat16` (Eigen's bf16 erfc converts element by element). Here
  the forward keeps tanh(u(x)) or Phi(x) (in the input's dtype: the same
  memory as autodiff keeps), the backward is dy * GELU'(x), and each is one
  fused loop (`elementwise_region`) instead of about ten kernels (figures:
  bench/PERFORMANCE.md).
  """
  forward, backward = ((_gelu_tanh_forward, _gelu_tanh_backward) if approximate
                       else (_gelu_erf_forward, _gelu_erf_backward))

  @tf.custom_gradient
  def fn(x):
    y, saved = forward(x)
    return y, lambda dy: backward(x, saved, dy)

  # A function of its own, traced once per dtype and rank. Each trace of
  # `tf.custom_gradient` registers its gradient in TensorFlow's global
  # gradient registry for good, and that gradient holds the graph it was
  # traced in. Traced inline in a model's train step, that graph captures
  # every variable of the model and its optimizer, so each model a process
  # trained stayed in memory (bench/PERFORMANCE.md, "Memory a `fit` keeps").
  # Here the graph kept is this GELU's alone.
  custom = tf.function(fn, autograph=False, reduce_retracing=True)
  plain = gelu if approximate else gelu_exact

  def activation(x):
    # A SavedModel would record the custom gradient, and each load of it
    # would register the gradient for good, keeping the loaded model
    # (bert.io.output_saved_model): there, TensorFlow's own gradient.
    return plain(x) if tracing_a_savedmodel() else custom(x)

  return activation


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "silu": tf.nn.silu,
    "tanh": tf.math.tanh,
    "linear": tf.identity,
}


_FOR_TRAINING = {
    "gelu": _gelu_for_training(approximate=True),
    "gelu_exact": _gelu_for_training(approximate=False),
}


def get_activation(name: str, training: bool = False):
  """Returns the activation function called `name`; with `training=True`,
  the same function with a faster gradient where there is one (GELU)."""
  if name not in _ACTIVATIONS:
    raise ValueError(f"Unknown activation {name!r}; expected one of "
                     f"{', '.join(_ACTIVATIONS)}")
  if training:
    return _FOR_TRAINING.get(name, _ACTIVATIONS[name])
  return _ACTIVATIONS[name]
