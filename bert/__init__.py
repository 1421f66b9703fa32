"""BERT for TensorFlow 2 (tf_keras): layers, networks, tasks and data."""

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
