"""A model's bf16 copy for serving: same weights, `mixed_bfloat16` compute."""

from bert.precision import policy_scope


def bf16_copy(model):
  """`model` rebuilt under the `mixed_bfloat16` policy (bf16 matmuls,
  fp32 variables; our layers keep LayerNorm, softmax and the logits in
  fp32) with its weights. The preprocessor is carried over."""
  with policy_scope("mixed_bfloat16"):
    copy = type(model).from_config(model.get_config())
  copy.set_weights(model.get_weights())
  return copy
