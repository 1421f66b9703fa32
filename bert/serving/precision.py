"""A model's bf16 copy for serving: same weights, `mixed_bfloat16` compute."""

import tf_keras


def bf16_copy(model):
  """`model` rebuilt under the `mixed_bfloat16` policy (bf16 matmuls,
  fp32 variables; our layers keep LayerNorm, softmax and the logits in
  fp32) with its weights. The preprocessor is carried over."""
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    copy = type(model).from_config(model.get_config())
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  copy.set_weights(model.get_weights())
  return copy
