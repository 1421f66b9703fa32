"""Activation functions named by `BertConfig.hidden_act`.

"gelu" is the tanh approximation used by google-research BERT and Model
Garden (and so by every released TF checkpoint); "gelu_exact" is the erf form
that Hugging Face calls "gelu". See bert/config.py for the name mapping.
"""

import tensorflow as tf


def gelu(x):
  """GELU, tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
  return tf.nn.gelu(x, approximate=True)


def gelu_exact(x):
  """GELU, exact form: x * Phi(x) with the normal CDF via erf."""
  return tf.nn.gelu(x, approximate=False)


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "silu": tf.nn.silu,
    "tanh": tf.math.tanh,
    "linear": tf.identity,
}


def get_activation(name: str):
  """Returns the activation function called `name`."""
  try:
    return _ACTIVATIONS[name]
  except KeyError:
    raise ValueError(f"Unknown activation {name!r}; expected one of "
                     f"{', '.join(_ACTIVATIONS)}") from None
