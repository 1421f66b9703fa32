"""Command-line entry points (absl apps), installed as `bert-*` commands.

The commands keep TensorFlow's C++ log (start-up notices, and on machines
without a GPU driver a "failed call to cuInit" error) off stderr, where a
command's one-line error must stand alone; what goes wrong reaches Python as
an exception, which the command reports. Set here, before any command loads
TensorFlow; with --verbose, or an explicit TF_CPP_MIN_LOG_LEVEL, TensorFlow
logs as usual.
"""

import os
import sys

if "--verbose" not in sys.argv:
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
