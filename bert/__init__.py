"""BERT for TensorFlow 2 (tf_keras): layers, networks, tasks and data."""

import os
import sys

# oneDNN kernels (matmuls, batched matmuls, fused bias/activation) are the
# fast path on x86 CPUs: with them our fine-tuning step ran 1.3-1.4x faster
# (bench/RESULTS.md), but TensorFlow turns them on by default only on some
# Intel CPUs. TensorFlow reads the switch when it is first imported, so this
# takes effect when `bert` is imported before `tensorflow`; an explicit
# TF_ENABLE_ONEDNN_OPTS (0 or 1) always wins.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
# The bert-* commands keep TensorFlow's C++ log (start-up notices, and on
# machines without a GPU driver a "failed call to cuInit" error) off stderr,
# where a command's one-line error must stand alone; what goes wrong reaches
# Python as an exception, which the command reports. They load TensorFlow
# through this import, before their own code runs; with --verbose, or an
# explicit TF_CPP_MIN_LOG_LEVEL, TensorFlow logs as usual.
if (os.path.basename(sys.argv[0] if sys.argv else "").startswith("bert-")
    and "--verbose" not in sys.argv):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tf_keras

# Dropout layers draw from a tf.random.Generator (and unseeded initializers
# from seeds) that `tf_keras.utils.set_random_seed` seeds: a run's masks are
# then a function of its seed, whether it trains with `fit` or `bert-train`,
# and the generators' states can be checkpointed, so a resumed run draws the
# masks the interrupted one would have. Layers created before this import
# keep the legacy stateful ops.
tf_keras.backend.experimental.enable_tf_random_generator()

from bert.config import BertConfig
from bert import layers
from bert import networks
from bert import checkpoints
from bert import models
from bert import tasks
from bert import training
from bert.networks import BertEncoder, EncoderScaffold

__version__ = "0.1.0"

__all__ = ["BertConfig", "BertEncoder", "EncoderScaffold", "checkpoints", "layers",
           "models", "networks", "tasks", "training"]
