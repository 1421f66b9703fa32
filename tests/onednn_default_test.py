"""`import bert` turns TensorFlow's oneDNN kernels on (the measured fast
path, bench/RESULTS.md) unless the user chose otherwise."""

import os
import subprocess
import sys

import pytest

_PROBE = ("import bert, tensorflow as tf; "
          "from tensorflow.python.util import _pywrap_util_port as p; "
          "print(p.IsMklEnabled())")


def _onednn_enabled(setting):
  env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
  if setting is not None:
    env["TF_ENABLE_ONEDNN_OPTS"] = setting
  out = subprocess.run([sys.executable, "-c", _PROBE], env=env, check=True,
                       capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(__file__)))
  return out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("setting,expected", [(None, "True"), ("0", "False")])
def test_import_bert_enables_onednn_unless_told_not_to(setting, expected):
  assert _onednn_enabled(setting) == expected
