"""Activation functions named by `BertConfig.hidden_act`.

"gelu" is the tanh approximation used by google-research BERT and Model
Garden (and so by every released TF checkpoint); "gelu_exact" is the erf form
that Hugging Face calls "gelu". See bert/config.py for the name mapping.
"""

import math

import tensorflow as tf


def gelu(x):
  """GELU, tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
  return tf.nn.gelu(x, approximate=True)


def gelu_exact(x):
  """GELU, exact form: x * Phi(x) with the normal CDF via erf."""
  return tf.nn.gelu(x, approximate=False)


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _gelu_for_training(approximate: bool):
  """GELU with a hand-written gradient, computed in float32 whatever the
  input dtype.

  Training needs the activation's input for the gradient, so oneDNN cannot
  fuse GELU into the matmul there, and TensorFlow's autodiff of
  `tf.nn.gelu` costs several element-wise ops, run in bf16 under
  `mixed_bfloat16` (Eigen's bf16 erfc converts element by element: slower
  than the float32 kernel and the casts around it). Here the forward keeps
  Phi(x) (in the input's dtype: the same memory as autodiff keeps) and the
  backward is dy * (Phi(x) + x phi(x)) in one pass, in bf16 and float32
  alike (figures: bench/PERFORMANCE.md).
  """

  @tf.custom_gradient
  def fn(x):
    x32 = tf.cast(x, tf.float32)
    if approximate:
      inner = _SQRT_2_OVER_PI * (x32 + 0.044715 * x32 * x32 * x32)
      t = tf.math.tanh(inner)
      cdf32 = 0.5 * (1.0 + t)
      saved = tf.cast(t, x.dtype)
    else:
      cdf32 = 0.5 * tf.math.erfc(x32 * -_INV_SQRT_2)
      saved = tf.cast(cdf32, x.dtype)
    y = tf.cast(x32 * cdf32, x.dtype)

    def grad(dy):
      x32 = tf.cast(x, tf.float32)
      s = tf.cast(saved, tf.float32)
      if approximate:   # d/dx 0.5x(1 + t) with t = tanh(u(x))
        du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x32 * x32)
        d = 0.5 * (1.0 + s) + 0.5 * x32 * (1.0 - s * s) * du
      else:             # d/dx x Phi(x) = Phi(x) + x phi(x)
        d = s + x32 * (tf.exp(-0.5 * x32 * x32) * _INV_SQRT_2PI)
      return dy * tf.cast(d, dy.dtype)

    return y, grad

  return fn


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
