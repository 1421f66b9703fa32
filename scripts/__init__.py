"""Command-line entry points (absl apps), installed as `bert-*` commands.

The commands keep TensorFlow's C++ log (start-up notices, and on machines
without a GPU driver a "failed call to cuInit" error) off stderr, where a
command's one-line error must stand alone; what goes wrong reaches Python as
an exception, which the command reports. Set here, before any command loads
TensorFlow; with --verbose, or an explicit TF_CPP_MIN_LOG_LEVEL, TensorFlow
logs as usual.

The commands also ask TensorFlow for Keras 2 as `tf.keras`
(TF_USE_LEGACY_KERAS=1, unless set otherwise): the library uses `tf_keras`
alone, and without it `import tensorflow` loads Keras 3 as well (with
scikit-learn beneath it), a second Keras the commands never use, at every
command's start. Python users' own processes are left as they are.
"""

import os
import sys

if "--verbose" not in sys.argv:
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
