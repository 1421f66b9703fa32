"""Shared start-up for the `bert-*` console scripts."""

import os
import sys

from absl import app
from absl import flags


def run(main, module_name: str):
  """`app.run(main)`, with `--help` listing the flags of `module_name`.

  absl's --help lists the flags defined in the main module, which for a
  console script is the wrapper file, not the module that defines them.
  """
  for flag in flags.FLAGS.get_flags_for_module(module_name):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  # --help starts with the main module's docstring: make it the script's.
  main_module = sys.modules["__main__"]
  if not getattr(main_module, "__doc__", None):
    main_module.__doc__ = sys.modules[module_name].__doc__
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  app.run(main)
