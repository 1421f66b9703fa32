"""`import bert` is cheap and changes only what the README's first screen says
(TF_ENABLE_ONEDNN_OPTS, unless set); the names of the top level and of
`bert.models` load on first use. The `bert-*` commands load one Keras."""

import json
import os
import subprocess
import sys

_PROBE = r"""
import json, os, sys
before = dict(os.environ)
import bert
loaded = sorted(m for m in ("tensorflow", "tf_keras", "gin", "orbit",
                            "bert.models", "bert.tasks", "bert.training")
                if m in sys.modules)
changed = sorted(k for k in set(before) | set(os.environ)
                 if before.get(k) != os.environ.get(k))
encoder_class = bert.BertEncoder.__name__
after_use = sorted(m for m in ("tensorflow", "bert.networks") if m in sys.modules)
print(json.dumps(dict(loaded=loaded, changed=changed, after_use=after_use,
                      encoder_class=encoder_class)))
"""


def _probe(argv0_env=None):
  env = {k: v for k, v in os.environ.items()
         if k not in ("TF_ENABLE_ONEDNN_OPTS", "TF_CPP_MIN_LOG_LEVEL")}
  out = subprocess.run([sys.executable, "-c", _PROBE], env=env, check=True,
                       capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(__file__)))
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_bert_loads_nothing_heavy_and_changes_one_switch():
  seen = _probe()
  assert seen["loaded"] == []
  assert seen["changed"] == ["TF_ENABLE_ONEDNN_OPTS"]
  # Negative control: using a name does load what it needs.
  assert seen["encoder_class"] == "BertEncoder"
  assert seen["after_use"] == ["bert.networks", "tensorflow"]


_COMMAND_PROBE = r"""
import sys
import bert.scripts.train   # what the bert-train console script imports
import tensorflow as tf
print(int("keras.src" in sys.modules), tf.keras.__name__)
"""


def _command_probe(**env):
  env = dict({k: v for k, v in os.environ.items()
              if k != "TF_USE_LEGACY_KERAS"}, **env)
  out = subprocess.run([sys.executable, "-c", _COMMAND_PROBE], env=env,
                       check=True, capture_output=True, text=True)
  return out.stdout.strip().splitlines()[-1].split()


def test_commands_load_tf_keras_alone():
  # A command's TensorFlow gives tf_keras as tf.keras and never loads
  # Keras 3, which the library does not use (and which slows every start).
  keras3_loaded, tf_keras_name = _command_probe()
  assert keras3_loaded == "0" and tf_keras_name.startswith("tf_keras"), (
      keras3_loaded, tf_keras_name)
  # Negative control, and the user's say is kept: asked for Keras 3, the
  # same import loads it.
  keras3_loaded, tf_keras_name = _command_probe(TF_USE_LEGACY_KERAS="0")
  assert keras3_loaded == "1" and tf_keras_name.startswith("keras"), (
      keras3_loaded, tf_keras_name)


def test_bert_models_exports_what_a_new_head_needs():
  import bert.models as models  # pylint: disable=g-import-not-at-top
  for name in ("EncoderModel", "BertPreprocessor", "Distiller",
               "TextClassifierPreprocessor", "load_encoder", "per_example"):
    assert name in models.__all__ and hasattr(models, name), name
  assert set(models.__all__) <= set(dir(models))
