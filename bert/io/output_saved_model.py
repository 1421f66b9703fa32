"""Every SavedModel the library writes is traced without custom gradients.

A SavedModel records the gradient functions of the `tf.custom_gradient`s
traced into it: the training GELU of `bert.layers.activations`, traced
when a SavedModel holds a layer's `call` with `training=True` (Keras saves
those, and so does the TF Hub export, for fine-tuning). Each load registers
each of them again in TensorFlow's global gradient registry, which never
lets go, and a registered gradient keeps every function the load restored:
each `load_model` or `tf.saved_model.load` of such a SavedModel stayed in
memory for the life of the process (bench/PERFORMANCE.md, "Memory a load
keeps").

Inside `tracing_for_savedmodel()`, the training GELU is the plain one: its
gradient is TensorFlow's own, the same values, and a process that loads
the SavedModel (with or without this library) fine-tunes it as before.
"""

import contextlib
import threading

_state = threading.local()


@contextlib.contextmanager
def tracing_for_savedmodel():
  """Around a SavedModel write: what it traces has no custom gradient."""
  depth = getattr(_state, "depth", 0)
  _state.depth = depth + 1
  try:
    yield
  finally:
    _state.depth = depth


def tracing_a_savedmodel() -> bool:
  """Whether this thread is tracing for a SavedModel write."""
  return getattr(_state, "depth", 0) > 0
