"""What a TF Hub encoder SavedModel says beyond its weights, read from its
protos without loading or running its graph: the op types its functions
use, which tell the feed-forward activation (`Erf`: exact GELU; `Pow`, the
cube in the tanh form: GELU as Model Garden names it; else `Relu`), and the
Keras config of a Model Garden `AlbertEncoder`, which tells how many layers
run its one shared block (keras_metadata.pb, or saved_model.pb's object
metadata before TF 2.5).
"""

import json
import os
from typing import Optional

from tensorflow.core.protobuf import saved_model_pb2

from bert.checkpoints.errors import CheckpointError

SAVED_MODEL = "saved_model.pb"
KERAS_METADATA = "keras_metadata.pb"


def albert_layers(folder: str) -> Optional[int]:
  """The number of layers of a Model Garden `AlbertEncoder` in the
  SavedModel (its Keras config, in keras_metadata.pb or, in SavedModels of
  before TF 2.5, in saved_model.pb), or None when it holds none. ALBERT's
  weights cannot say it: every layer runs the one shared block."""
  for config in _keras_configs(folder):
    if (config.get("class_name", "").rpartition(">")[2] == "AlbertEncoder"
        and isinstance(config.get("config"), dict)):
      layers = config["config"].get("num_layers")
      if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        raise CheckpointError(f"{folder}: its AlbertEncoder's num_layers is "
                              f"{layers!r}, not a positive integer")
      return layers
  return None


def _keras_configs(folder: str):
  """The Keras metadata (JSON objects) of the SavedModel's objects."""
  texts = []
  path = os.path.join(folder, KERAS_METADATA)
  if os.path.exists(path):
    from tf_keras.protobuf import saved_metadata_pb2  # pylint: disable=g-import-not-at-top
    proto = _parsed(saved_metadata_pb2.SavedMetadata(), path, "unreadable")
    texts += [n.metadata for n in proto.nodes]
  for meta in _saved_model(folder).meta_graphs:
    texts += [n.user_object.metadata for n in meta.object_graph_def.nodes
              if n.WhichOneof("kind") == "user_object"]
  for text in texts:
    if "AlbertEncoder" not in text:
      continue
    try:
      value = json.loads(text)
    except ValueError:
      continue            # not Keras metadata: nothing said about ALBERT
    if isinstance(value, dict):
      yield value


def _saved_model(folder: str):
  return _parsed(saved_model_pb2.SavedModel(),
                 os.path.join(folder, SAVED_MODEL), "not a SavedModel")


def _parsed(proto, path: str, failure: str):
  """`proto` parsed from the file `path`; a CheckpointError "`path`:
  `failure`" if it does not parse."""
  try:
    with open(path, "rb") as f:
      proto.ParseFromString(f.read())
  except Exception as e:  # protobuf's DecodeError has no stable import path
    raise CheckpointError(f"{path}: {failure} ({type(e).__name__})") from e
  return proto


def graph_ops(folder: str):
  """The op types used by the SavedModel's graph and functions (the proto
  is parsed; nothing is run)."""
  proto = _saved_model(folder)
  ops = set()
  for meta in proto.meta_graphs:
    ops.update(n.op for n in meta.graph_def.node)
    for fn in meta.graph_def.library.function:
      ops.update(n.op for n in fn.node_def)
  return ops


def activation(ops) -> str:
  """The feed-forward activation, from the graph's op types."""
  if "Erf" in ops:
    return "gelu_exact"
  if "Pow" in ops:
    return "gelu"           # the tanh form: 0.5x(1 + tanh(c(x + 0.044715 x^3)))
  if "Relu" in ops:
    return "relu"
  return "gelu"
