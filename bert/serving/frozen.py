"""A bf16 serving network with its weights as graph constants.

TensorFlow's oneDNN matmul (`_MklNativeFusedMatMul`: matmul, bias add and
GELU in one kernel) reorders its weights into the blocked layout of the
CPU's fastest kernels (AMX tiles, AVX-512 BF16) and keeps them only when the
weights are constants of the graph. Read from variables, as Keras models
read them, the weights stay in their plain layout, each call, and bf16 runs
on a slower kernel; under `mixed_bfloat16` every call also casts every
float32 weight to bf16. A bf16 serving network is therefore traced once
with its weights frozen into the graph, stored in bf16 (figures:
bench/RESULTS_AMX.md).

Only bf16 is frozen: at float32 the same change measured no faster, and
would store the weights twice in the SavedModel.

`InferenceForward` gives Keras `predict`, `encode` and a teacher's targets
the same frozen network, once its cost pays, kept while the weights stay
unchanged.
"""

import time
from typing import Callable, Dict, Mapping

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

from bert.precision import INFERENCE_BF16
from bert.serving.precision import policy_copy


def bf16_weights_copy(model):
  """`model` rebuilt with its weights stored in bf16 (Keras' "bfloat16"
  policy; the layers that compute in float32, LayerNorms and logits, keep
  float32 weights): the same bf16 products as `mixed_bfloat16`, whose
  float32 weights are cast to bf16 at each use, and half the constants."""
  return policy_copy(model, INFERENCE_BF16)


def freeze(call: Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]],
           spec: Mapping[str, tf.TensorSpec]) -> Callable[[Dict[str, tf.Tensor]],
                                                         Dict[str, tf.Tensor]]:
  """`call` (a dict of tensors matching `spec` -> a nest of tensors) traced
  for `spec` (e.g. int32 [batch, seq] of unknown batch and length) with its
  variables replaced by constants. The result takes and returns the same
  structures."""
  spec = dict(spec)
  traced = tf.function(call, input_signature=[spec]).get_concrete_function()
  frozen = convert_to_constants.convert_variables_to_constants_v2(traced)
  structure = traced.structured_outputs

  def run(inputs):
    flat = frozen(**{k: inputs[k] for k in spec})
    return tf.nest.pack_sequence_as(structure, flat)

  return run


def _weights_fingerprint(variables) -> Callable[[], np.ndarray]:
  """A function giving one 8-byte farmhash per variable of its bytes: equal
  results mean equal weights, read in one pass over them (not a version
  counter: TensorFlow variables keep none, and a user may assign any of
  them)."""

  @tf.function
  def fingerprint():
    rows = [tf.reshape(tf.cast(v, tf.uint8) if v.dtype == tf.bool
                       else tf.bitcast(v, tf.uint8), [1, -1]) for v in variables]
    return tf.concat([tf.fingerprint(r) for r in rows], 0)

  return lambda: fingerprint().numpy()


class InferenceForward:
  """The forward `predict`, `encode` and a teacher's targets run over many
  batches of one model: `call(model, batch)` in inference mode.

  A model computing in bf16 runs it, once that pays, as `freeze` runs
  serving networks: its bf16 copy with the weights as graph constants, in
  their blocked layout, 1.4-2x the Keras forward's speed on AMX (which
  reads float32 variables, casts and re-lays them out on every call;
  bench/RESULTS_AMX.md, run L). Freezing costs seconds of tracing and graph
  optimisation that grow with the model (`freeze_seconds`), so it follows
  the ski-rental rule: the Keras forward runs, timed, until the time it has
  lost to the frozen one (`saved_share` of it) adds up to the freezing cost;
  then the network is frozen and kept. The frozen network stays valid while
  the model's weights are unchanged: each call that uses it first compares
  a fingerprint of all weights (a pass over them, cheaper than one forward
  of a batch), and any change (`fit`, `set_weights`, a variable's `assign`)
  drops it and starts the count again. A float32 model always runs the
  Keras forward: frozen, float32 measured no faster.

  `for_rows(tokens)` gives the batch function of one call over `tokens`
  tokens (the sum of its rows' lengths).
  """

  # The share of the Keras forward's time a frozen bf16 network saves, at
  # least: 1 - 1/1.33 (bench/RESULTS_AMX.md, run L: 1.3-2x, more on short
  # rows).
  saved_share = 0.25
  # What times the Keras forward (a test injects its own).
  clock = staticmethod(time.perf_counter)

  def __init__(self, model, call: Callable):
    self._model, self._call = model, call
    self._keras = tf.function(lambda batch: call(model, batch),
                              reduce_retracing=True)
    self.bf16 = model.compute_dtype == "bfloat16"
    # The estimated cost of freezing, seconds: tracing, constant conversion
    # and the first call's graph optimisation grow with the weights (fitted
    # to MiniLM-L6 and BERT-Base on a 2-core Xeon: bench/RESULTS_AMX.md,
    # run L).
    params = sum(int(np.prod(v.shape)) for v in model.variables)
    self.freeze_seconds = 3.0 + 0.3 * params / 1e6
    self._frozen = None
    self._fingerprint = None
    self._fingerprint_fn = None
    self._fingerprint_seconds = 0.0
    self._use_frozen = False         # in the current call
    self._lost = 0.0                 # seconds lost to the frozen forward
    self._keras_seconds = 0.0        # the Keras forward's time ...
    self._keras_tokens = 0           # ... over these tokens
    self.freezes = 0                 # how often the network was frozen
    self.batches = {"keras": 0, "frozen": 0}   # batches run on each

  @classmethod
  def of(cls, model, method: str) -> "InferenceForward":
    """The one `InferenceForward` of `model` running `model.<method>(batch)`,
    made at first use and kept on the model (out of Keras' tracking)."""
    forwards = model.__dict__.get("_inference_forwards")
    if forwards is None:
      forwards = {}
      object.__setattr__(model, "_inference_forwards", forwards)
    if method not in forwards:
      forwards[method] = cls(model, lambda m, batch: getattr(m, method)(batch))
    return forwards[method]

  def for_rows(self, tokens: int) -> Callable:
    """The batch function for one call over `tokens` tokens."""
    if not self.bf16:
      return self._keras
    self._use_frozen = (self._frozen is not None and self._frozen_pays(tokens)
                        and self._frozen_valid())
    return self._run

  def _run(self, batch):
    if self._use_frozen:
      self.batches["frozen"] += 1
      return self._frozen(batch)
    self.batches["keras"] += 1
    traces = self._keras.experimental_get_tracing_count()
    start = self.clock()
    outputs = tf.nest.map_structure(lambda t: t.numpy(), self._keras(batch))
    seconds = self.clock() - start
    if self._keras.experimental_get_tracing_count() == traces:
      # A batch that traced is not counted: tracing is no forward's time.
      self._keras_seconds += seconds
      self._keras_tokens += int(np.sum(batch["input_mask"]))
      self._lost += self.saved_share * seconds
    if self._lost >= self.freeze_seconds:
      # The rest of this call, and later ones, run frozen.
      self._lost = 0.0
      if self._frozen is None or not self._frozen_valid():
        self._freeze(batch)
      self._use_frozen = True
    return outputs

  def _frozen_pays(self, tokens: int) -> bool:
    """Whether the time a call of `tokens` tokens saves on the frozen
    forward outweighs checking the weights' fingerprint (small calls, one
    short text, run on Keras: the check alone would cost more)."""
    if not self._keras_tokens:
      return True
    per_token = self._keras_seconds / self._keras_tokens
    return self.saved_share * per_token * tokens > self._fingerprint_seconds

  def _frozen_valid(self) -> bool:
    """Whether the frozen network holds the model's weights; if not, drops
    it and counts the time lost from zero."""
    if np.array_equal(self._fingerprint_now(), self._fingerprint):
      return True
    self._frozen, self._fingerprint, self._lost = None, None, 0.0
    return False

  def _fingerprint_now(self) -> np.ndarray:
    if self._fingerprint_fn is None:
      self._fingerprint_fn = _weights_fingerprint(self._model.variables)
      self._fingerprint_fn()     # traced outside the timing
    start = self.clock()
    value = self._fingerprint_fn()
    self._fingerprint_seconds = self.clock() - start
    return value

  def _freeze(self, batch) -> None:
    """Freezes the bf16 copy of the model's current weights; later batches
    of this call run it."""
    start = self.clock()
    fingerprint = self._fingerprint_now()
    copy = bf16_weights_copy(self._model)
    spec = {k: tf.TensorSpec([None] * v.shape.rank, v.dtype, name=k)
            for k, v in batch.items()}
    self._frozen = freeze(lambda x: self._call(copy, x), spec)
    self._fingerprint = fingerprint
    self.freezes += 1
    logging.info("%s: froze its bf16 network for inference after %.1f s of "
                 "Keras forwards (%.1f s)", self._model.name,
                 self._keras_seconds, self.clock() - start)
