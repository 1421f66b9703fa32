"""Serving in three stages: strings -> model inputs -> model outputs -> answers.

Every serving export is a `ServingModule`: `preprocess` (raw strings ->
the encoder inputs of the batch, cut to its length bucket, plus whatever
`postprocess` needs), `network` (encoder inputs -> the model's outputs) and
`postprocess` (strings, features, outputs -> the answers). `serve` chains
them in one graph and is the SavedModel's `serving_default`; the three stages
are saved as signatures of their own, so a reduced-precision runtime (TFLite)
can replace `network` while the exact tokenizer and post-processing stay in
TensorFlow (`bert.serving.loader`).

Each stage takes one dict of tensors and returns one: a SavedModel signature
takes keyword arguments named after the dict keys.
"""

from typing import Dict, Sequence

import tensorflow as tf

from bert.data import length_buckets as lb
from bert.features import ENCODER_INPUTS
from bert.serving import frozen

STAGES = ("preprocess", "network", "postprocess")


def cut_to_bucket(inputs: Dict[str, tf.Tensor], buckets: Sequence[int]
                  ) -> Dict[str, tf.Tensor]:
  """Encoder inputs [batch, seq] cut to the smallest bucket that holds the
  batch's longest row: no compute on trailing padding. The cut is by
  bucket, not to the longest row itself, so a runtime that plans per shape
  (TFLite, XLA) sees a few lengths only."""
  return lb.bucket_cutter(ENCODER_INPUTS, buckets)(inputs)


class _Untracked:
  """Holds a value out of `tf.Module`'s attribute tracking."""

  def __init__(self, value):
    self.value = value


def _traced(fn, spec) -> tf.types.experimental.ConcreteFunction:
  """`fn` (one dict of tensors -> one dict) traced for `spec`."""
  return tf.function(fn, input_signature=[spec]).get_concrete_function()


class ServingModule(tf.Module):
  """A serving graph: `serve` = postprocess(preprocess(strings), network(..)).

  Subclasses set `string_inputs` (the names of the [batch] string inputs)
  and implement `_preprocess(strings)` (-> dict with the ENCODER_INPUTS and
  any extra features), `_postprocess(strings, features, outputs)`; the
  network is the Keras model on its `network_inputs` (the ENCODER_INPUTS,
  and for fill-mask `masked_lm_positions`) in inference mode.
  """

  string_inputs: Sequence[str] = ()
  network_inputs: Sequence[str] = ENCODER_INPUTS

  def __init__(self, model, buckets: Sequence[int], name: str):
    super().__init__(name=name)
    # Only the model's variables join the SavedModel's object graph. A
    # tracked Keras model makes `tf.saved_model.save` trace every layer's
    # call for Keras' own loader, which no signature uses: that tracing is
    # most of an export's time, twice over for int8, whose TFLite converter
    # saves once more (bench/PERFORMANCE.md).
    self._held = _Untracked(model)
    # A bf16 network runs with its weights frozen into the graph, in bf16
    # (`bert.serving.frozen`): they are not variables of the SavedModel.
    self._frozen = None
    self.model_variables = list(model.variables)
    ids = {k: tf.TensorSpec([None, None], tf.int32, name=k)
           for k in self.network_inputs}
    if model.compute_dtype == "bfloat16":
      copy = frozen.bf16_weights_copy(model)
      self._frozen = frozen.freeze(
          lambda x: dict(copy({k: x[k] for k in self.network_inputs},
                              training=False)), ids)
      self.model_variables = []
    self.buckets = tuple(int(b) for b in buckets)
    strings = {k: tf.TensorSpec([None], tf.string, name=k)
               for k in self.string_inputs}
    # Each stage is traced once, here, and kept as its concrete function:
    # `tf.saved_model.save` traces every `tf.function` it finds on the
    # module once more (its traces are keyed on whether a save is under
    # way), which took a third of an export's time.
    self.preprocess = _traced(self._preprocess, strings)
    self.network = _traced(self._network, ids)
    # postprocess's signature holds the features and outputs, whose specs
    # are known once preprocess and network are traced.
    features = self.preprocess.structured_outputs
    outputs = self.network.structured_outputs
    post = dict(strings)
    post.update({k: tf.TensorSpec(v.shape, v.dtype, name=k)
                 for k, v in features.items()})
    post.update({k: tf.TensorSpec(v.shape, v.dtype, name=k)
                 for k, v in outputs.items()})
    self._output_names = tuple(outputs)
    self._feature_names = tuple(features)
    self.postprocess = _traced(self._postprocess_flat, post)
    self.serve = _traced(self._serve, strings)

  @property
  def model(self):
    """The Keras model (in memory only; a loaded export has its
    `model_variables` and signatures)."""
    return self._held.value

  def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
    """What `tf.saved_model.save` writes: `serving_default` and each stage."""
    return dict(serving_default=self.serve, preprocess=self.preprocess,
                network=self.network, postprocess=self.postprocess)

  def host(self):
    """(the manifest's `host` entry, the `BertTokenizer` whose files
    `bert.serving.host.write_files` writes) of an export whose small batches
    can run in Python (`bert.serving.host`), or None."""
    return None

  def _network(self, inputs):
    if self._frozen is not None:
      return self._frozen(inputs)
    return dict(self.model({k: inputs[k] for k in self.network_inputs},
                           training=False))

  def _postprocess_flat(self, flat):
    strings = {k: flat[k] for k in self.string_inputs}
    features = {k: flat[k] for k in self._feature_names}
    outputs = {k: flat[k] for k in self._output_names}
    return self._postprocess(strings, features, outputs)

  def _serve(self, strings):
    # The stages' traced functions: `serve` calls them (the runtime inlines
    # the calls) rather than tracing tokenizer and network a second time.
    features = self.preprocess(strings)
    outputs = self.network({k: features[k] for k in self.network_inputs})
    flat = dict(strings)
    flat.update(features)
    flat.update(outputs)
    return self.postprocess(flat)

  def _preprocess(self, strings):
    raise NotImplementedError

  def _postprocess(self, strings, features, outputs):
    raise NotImplementedError
