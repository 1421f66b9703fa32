"""A model at a serving precision: same weights, another compute policy."""

from bert.precision import POLICY, policy_scope


def policy_copy(model, precision: str):
  """`model` computing at `precision` (fp32 or bf16: Keras' `float32` or
  `mixed_bfloat16`, bf16 matmuls on fp32 variables; our layers keep
  LayerNorm, softmax and the logits in fp32): the model itself where it
  already does, else rebuilt under that policy with its weights and its
  preprocessor. So an fp32 export of a model built in bf16 (the default
  "auto" precision on a CPU with bf16) computes in fp32."""
  policy = POLICY.get(precision, precision)   # or a Keras policy name
  if model.dtype_policy.name == policy:
    return model
  with policy_scope(policy):
    copy = type(model).from_config(model.get_config())
  copy.set_weights(model.get_weights())
  return copy
