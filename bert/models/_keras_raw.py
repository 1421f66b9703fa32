"""How `fit`, `evaluate` and `predict` (`KerasTraining`) reach the model's
preprocessor: which inputs are raw, and raw inputs checked (the
preprocessor's `check`: `bert.models.inputs`) and encoded once, before
Keras runs a step; in-memory targets of the encoder's int inputs are
checked by the model's `check_targets`. Errors name the argument (`x`, `y`,
`validation_data`, `batch_size`) and the index of a bad item."""

import tensorflow as tf

from bert.models import inputs
from bert.validation import check_int


def raw(model, x):
  """(raw, x): whether `x` is raw input for `model`'s preprocessor (a
  generator of texts comes back as a list; see `inputs.peel`)."""
  is_raw, x = inputs.peel(x)
  if is_raw and model.preprocessor is None:
    raise ValueError(f"{model.name}: raw text needs a preprocessor; build the "
                     f"model with {type(model).__name__}.from_pretrained(...) "
                     "or pass the encoder's int inputs (a dict)")
  return is_raw, x


def features(model, x, y, what: str, needs_y: bool = True):
  """The preprocessor's features of raw `x` (with `y`, their targets)."""
  if y is None and needs_y:
    raise inputs.InputTypeError(f"{model.name}.{what}: y is missing; give "
                                "the labels of x")
  return model.preprocessor.encode(x, y, num_classes=getattr(
      model, "num_classes", None))


def batch_size(model, what: str, value, default: int) -> int:
  """`batch_size` of a call on raw inputs (None: `default`)."""
  return check_int(f"{type(model).__name__}.{what}", "batch_size", value,
                   minimum=1, optional=True) or default


def dataset(model, x, y, size, what: str):
  """One pass over raw (x, y), batched by length bucket."""
  encoded = features(model, x, y, what)
  pre = model.preprocessor
  return pre.dataset(encoded, pre.targets(encoded),
                     batch_size(model, what, size, 32))


def check_keras_targets(model, x, y) -> None:
  """In-memory targets `y` of the encoder's int inputs `x` (a dict)."""
  if y is None or isinstance(y, tf.data.Dataset) or not isinstance(x, dict):
    return
  if tf.is_tensor(y) and hasattr(y, "numpy"):
    y = y.numpy()
  model.check_targets(x, y)


def validation_data(model, data, size):
  """`fit`'s validation_data: raw (x, y) as a dataset; checked as `x` and
  `y` are, its errors prefixed with `validation_data`."""
  if not (isinstance(data, tuple) and data):
    return data
  try:
    is_raw, x = raw(model, data[0])
    y = data[1] if len(data) > 1 else None
    if is_raw:
      return dataset(model, x, y, size, "fit")
    check_keras_targets(model, x, y)
    return data
  except inputs.DataError as e:
    raise type(e)(f"validation_data: {e}") from None
