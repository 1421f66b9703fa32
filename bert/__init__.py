"""BERT for TensorFlow 2 (tf_keras): layers, networks, models, tasks, data.

`import bert` is cheap: it loads no TensorFlow, and the subpackages
(`bert.models`, `bert.tasks`, ...) and the names below load when first used.
It changes one thing in the process, stated on the README's first screen:
unless TF_ENABLE_ONEDNN_OPTS is set, it turns TensorFlow's oneDNN kernels on
(TensorFlow reads that switch when it is first imported, so this only takes
effect when `bert` comes first). They are the fast path for matmuls and fused
activations on x86 CPUs, but TensorFlow enables them by default only on some
of them; figures in bench/RESULTS.md. An explicit value always wins.

This module is also the front door of the layering (docs/design.md): it is
the one place above every layer, so it registers into `bert.registry` the
functions a lower layer needs from a higher one.
"""

import importlib
import os

from bert import registry

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

__version__ = "0.1.0"

_SUBPACKAGES = ("checkpoints", "data", "layers", "models", "networks",
                "pretrained", "retrieval", "serving", "tasks", "training")
# Public names of the top level -> the module that defines them.
_NAMES = {"BertConfig": "bert.config", "BertEncoder": "bert.networks",
          "EncoderScaffold": "bert.networks"}

__all__ = sorted(_NAMES) + list(_SUBPACKAGES)


def __getattr__(name):
  if name in _SUBPACKAGES:
    return importlib.import_module(f"bert.{name}")
  if name in _NAMES:
    return getattr(importlib.import_module(_NAMES[name]), name)
  raise AttributeError(f"module 'bert' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(__all__))


def _read_run(folder, with_heads):
  """The "run" checkpoint format: a `bert-train` model_dir, whose model only
  its task can rebuild (`bert.tasks.trained_run`)."""
  from bert.tasks import trained_run  # pylint: disable=g-import-not-at-top
  return trained_run.run_checkpoint(folder, with_heads)


registry.register("checkpoint_format", "run", _read_run)
