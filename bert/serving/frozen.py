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
"""

from typing import Callable, Dict, Sequence

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
           names: Sequence[str]) -> Callable[[Dict[str, tf.Tensor]],
                                             Dict[str, tf.Tensor]]:
  """`call` (a dict of int32 [batch, seq] tensors named `names` -> a dict
  of tensors) traced with unknown batch and length and its variables
  replaced by constants. The result takes and returns the same dicts."""
  spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in names}
  traced = tf.function(call, input_signature=[spec]).get_concrete_function()
  frozen = convert_to_constants.convert_variables_to_constants_v2(traced)
  structure = traced.structured_outputs

  def run(inputs):
    flat = frozen(**{k: inputs[k] for k in names})
    return tf.nest.pack_sequence_as(structure, flat)

  return run
