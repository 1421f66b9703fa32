"""Object-based (TF2) checkpoints read by object path, without building the
objects.

A TF2 checkpoint stores each variable once, under the first path a
breadth-first walk of the saved objects reaches. A variable that several
objects share is stored under one of their paths only: in a Model Garden
pre-training checkpoint the word embeddings are `masked_lm/embedding_table`
(the head holds the table it shares), not `encoder/layer_with_weights-0/
embeddings`. TensorFlow's own restore matches objects, not keys, so a reader
by name must see every path: `paths_by_key` lists them from the checkpoint's
object graph (`_CHECKPOINTABLE_OBJECT_GRAPH`).
"""

import re
from typing import Dict, List

from tensorflow.core.protobuf import trackable_object_graph_pb2

GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# Keras functional models reach each layer twice, as `layer-N` and (when it
# has weights) `layer_with_weights-K`; the first is never a weight's name.
_SKIP_EDGE = re.compile(r"^layer-\d+$")
_MAX_PATHS = 8      # per variable; real graphs have one to three
_MAX_DEPTH = 16
# Paths walked in all; a BERT-large pre-training graph needs a few thousand.
# A damaged or crafted graph (many ways to each node) stops here, not after
# an exponential walk.
_MAX_VISITS = 200_000


def _escape(name: str) -> str:
  """A child name as checkpoint keys spell it ("/" -> ".S", "." -> "..")."""
  return name.replace(".", "..").replace("/", ".S")


def read_graph(reader):
  """The checkpoint's object graph (a `TrackableObjectGraph` proto), or None
  for a name-based checkpoint."""
  if GRAPH_KEY not in reader.get_variable_to_shape_map():
    return None
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(GRAPH_KEY))
  return graph


def paths_by_key(reader) -> Dict[str, List[str]]:
  """{checkpoint key: every object path to that variable, as a key}.

  `reader` is a `tf.train.load_checkpoint` reader. Keys of a name-based
  checkpoint (no object graph) map to themselves.
  """
  keys = reader.get_variable_to_shape_map()
  graph = read_graph(reader)
  if graph is None:
    return {k: [k] for k in keys}
  found: Dict[str, List[str]] = {}
  visits = [0]

  def visit(node_id, path, on_path):
    visits[0] += 1
    if visits[0] > _MAX_VISITS:
      raise ValueError(f"object graph has more than {_MAX_VISITS:,} paths")
    node = graph.nodes[node_id]
    for attribute in node.attributes:
      if attribute.name == "VARIABLE_VALUE":
        paths = found.setdefault(attribute.checkpoint_key, [])
        if len(paths) < _MAX_PATHS:
          paths.append("/".join(path) + VALUE_SUFFIX)
    if len(path) >= _MAX_DEPTH:
      return
    for child in node.children:
      if child.node_id in on_path or _SKIP_EDGE.match(child.local_name):
        continue
      visit(child.node_id, path + [_escape(child.local_name)],
            on_path | {child.node_id})

  visit(0, [], {0})
  for key in keys:
    found.setdefault(key, [key])
  return {k: sorted(set(v), key=lambda p: (p != k, len(p), p))
          for k, v in found.items()}
