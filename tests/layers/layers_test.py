"""Tests of bert.layers against NumPy references and their invariants."""

import math

import numpy as np
import pytest
import tensorflow as tf

from bert import layers
from conftest import max_abs_diff
import harness


# ---------------------------------------------------------------- NumPy refs
def np_gelu_tanh(x):
  return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def np_gelu_erf(x):
  return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def np_layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean)**2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def np_attention(x, layer, mask):
  """Reference multi-head attention from the layer's weights."""
  b, s, h = x.shape
  n = layer.num_heads
  d = h // n
  qkv = x @ layer.qkv.kernel.numpy() + layer.qkv.bias.numpy()
  q, k, v = (qkv[..., i * h:(i + 1) * h].reshape(b, s, n, d).transpose(0, 2, 1, 3)
             for i in range(3))
  logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
  if mask is not None:
    logits = np.where(mask[:, None, :, :] > 0, logits, -1e30)
  probs = np_softmax(logits)
  ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
  return ctx @ layer.output_dense.kernel.numpy() + layer.output_dense.bias.numpy(), probs


def dense(layer, x):
  return x @ layer.kernel.numpy() + layer.bias.numpy()


def ln(layer, x, eps):
  return np_layer_norm(x, layer.gamma.numpy(), layer.beta.numpy(), eps)


def np_block(x, block, mask):
  eps = block.layer_norm_epsilon
  act = np_gelu_tanh
  if block.norm_first:
    a, _ = np_attention(ln(block.attention_layer_norm, x, eps), block.attention, mask)
    x = x + a
    return x + dense(block.output_dense,
                     act(dense(block.intermediate_dense,
                               ln(block.output_layer_norm, x, eps))))
  a, _ = np_attention(x, block.attention, mask)
  x = ln(block.attention_layer_norm, x + a, eps)
  f = dense(block.output_dense, act(dense(block.intermediate_dense, x)))
  return ln(block.output_layer_norm, x + f, eps)


def randomise(layer, seed=0):
  rng = np.random.RandomState(seed)
  for w in layer.weights:
    w.assign(0.2 * rng.randn(*w.shape) + (1.0 if "gamma" in w.name else 0.0))


def padding_mask(batch, seq, lengths):
  m = np.zeros((batch, 1, seq), np.float32)
  for i, n in enumerate(lengths):
    m[i, 0, :n] = 1
  return m


# ------------------------------------------------------------------ tests
def test_gelu_forms():
  x = np.linspace(-6, 6, 241).astype(np.float32)
  assert max_abs_diff(layers.gelu(x), np_gelu_tanh(x)) < 1e-6
  assert max_abs_diff(layers.gelu_exact(x), np_gelu_erf(x)) < 1e-6
  # The two forms really differ: the name decides the numbers.
  assert max_abs_diff(layers.gelu(x), layers.gelu_exact(x)) > 1e-4
  with pytest.raises(ValueError, match="swishy"):
    layers.get_activation("swishy")


def test_attention_matches_numpy_and_masks_keys():
  att = layers.FusedSelfAttention(num_heads=4, dropout_rate=0.0)
  x = np.random.RandomState(1).randn(2, 6, 16).astype(np.float32)
  mask = padding_mask(2, 6, [6, 4])
  out, probs = att(x, attention_mask=mask, return_attention_probs=True)
  ref, ref_probs = np_attention(x, att, mask)
  assert max_abs_diff(out, ref) < 1e-5
  assert max_abs_diff(probs, ref_probs) < 1e-6
  assert float(tf.reduce_max(probs[1, :, :, 4:])) == 0.0
  # Changing masked tokens changes nothing for the others.
  x2 = x.copy()
  x2[1, 4:] = 5.0
  out2 = att(x2, attention_mask=mask)
  assert max_abs_diff(out[1, :4], out2[1, :4]) < 1e-6


def test_bf16_inference_attention_is_the_float32_softmax_rounded_to_bf16():
  """bf16 inference on oneDNN takes its softmax in bf16 (the logits are bf16
  already): probabilities within bf16 rounding of the float32 softmax of the
  same logits, masked keys exactly 0; training keeps the float32 softmax."""
  from bert import precision  # pylint: disable=g-import-not-at-top
  x = tf.cast(np.random.RandomState(6).randn(2, 6, 16) * 3, tf.bfloat16)
  mask = padding_mask(2, 6, [6, 4])
  with precision.policy_scope("bf16"):     # its sub-layers too, built here
    att = layers.FusedSelfAttention(num_heads=4, dropout_rate=0.0)
    att(x)
  randomise(att, seed=7)
  spec = [tf.TensorSpec([None, None, 16], tf.bfloat16),
          tf.TensorSpec([None, 1, None], tf.float32)]
  graph = {t: tf.function(lambda a, m, t=t: att(a, attention_mask=m, training=t,
                                                 return_attention_probs=True),
                          input_signature=spec) for t in (False, True)}
  softmax_ops = {t: [op for op in graph[t].get_concrete_function().graph
                     .get_operations() if op.type == "Softmax"] for t in graph}
  expected = "bfloat16" if precision.onednn_enabled() else "float32"
  assert softmax_ops[False][0].get_attr("T").name == expected
  assert softmax_ops[True][0].get_attr("T").name == "float32"
  _, probs = graph[False](x, mask)
  _, reference = graph[True](x, mask)     # no dropout: the float32 softmax
  probs = tf.cast(probs, tf.float32).numpy()
  reference = tf.cast(reference, tf.float32).numpy()
  assert np.abs(probs - reference).max() <= 2 ** -8
  assert probs[1, :, :, 4:].max() == 0.0
  np.testing.assert_allclose(probs.sum(-1), 1.0, atol=2 ** -6)


def test_without_onednn_bf16_inference_keeps_the_float32_softmax(monkeypatch):
  from bert import precision  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(precision, "onednn_enabled", lambda: False)
  x = tf.cast(np.random.RandomState(8).randn(2, 6, 16), tf.bfloat16)
  with precision.policy_scope("bf16"):
    att = layers.FusedSelfAttention(num_heads=4, dropout_rate=0.0)
    att(x)
  graph = tf.function(lambda a: att(a, training=False),
                      input_signature=[tf.TensorSpec([None, None, 16], tf.bfloat16)])
  softmax = [op for op in graph.get_concrete_function().graph.get_operations()
             if op.type == "Softmax"]
  assert [op.get_attr("T").name for op in softmax] == ["float32"]


@pytest.mark.parametrize("norm_first", [False, True])
def test_block_matches_numpy(norm_first):
  block = layers.TransformerEncoderBlock(
      num_attention_heads=4, intermediate_size=32, norm_first=norm_first,
      hidden_dropout_rate=0.0, attention_dropout_rate=0.0)
  x = np.random.RandomState(2).randn(2, 5, 16).astype(np.float32)
  block(x)
  randomise(block, seed=3)
  mask = padding_mask(2, 5, [5, 3])
  assert max_abs_diff(block(x, attention_mask=mask), np_block(x, block, mask)) < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_block_output_positions_are_those_rows_of_the_full_output(norm_first):
  block = layers.TransformerEncoderBlock(
      num_attention_heads=4, intermediate_size=32, norm_first=norm_first,
      hidden_dropout_rate=0.0, attention_dropout_rate=0.0)
  x = np.random.RandomState(4).randn(2, 7, 16).astype(np.float32)
  block(x)
  randomise(block, seed=5)
  positions = np.array([[0, 3, 6], [0, 2, 2]], np.int32)
  rows = lambda full: np.take_along_axis(np.asarray(full), positions[..., None], 1)
  # A key mask [batch, 1, seq] and a per-query mask [batch, seq, seq].
  key_mask = padding_mask(2, 7, [7, 4])
  query_mask = np.tril(np.ones((7, 7), np.float32))[None].repeat(2, 0)
  for mask in (key_mask, query_mask):
    full = np_block(x, block, mask)
    out = block(x, attention_mask=mask, output_positions=positions)
    assert out.shape == (2, 3, 16)
    assert max_abs_diff(out, rows(full)) < 1e-5
  # The rows really come from the positions asked for.
  assert max_abs_diff(out[:, 1], full[:, 1]) > 1e-3


def _runtime_kernels(fn, *args):
  """(op type, fused ops) of the kernels TensorFlow ran for `fn(*args)`: the
  graph after grappler's remapper and the oneDNN layout pass."""
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  ctx = context.context()
  ctx.enable_run_metadata()
  try:
    fn(*args)
    metadata = ctx.export_run_metadata()
  finally:
    ctx.disable_run_metadata()
  return [(node.op, [op.decode() for op in node.attr["fused_ops"].list.s])
          for graph in metadata.function_graphs
          for partition in graph.partition_graphs for node in partition.node]


@pytest.mark.parametrize("policy", ["fp32", "bf16"])
def test_block_residual_adds_run_inside_the_projections(policy):
  """Served (frozen, unknown batch and length), each residual add of a block
  is folded into its projection's oneDNN matmul (a sum post-op), not a
  separate pass over [batch * seq, hidden]."""
  from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-import-not-at-top
  from bert import precision  # pylint: disable=g-import-not-at-top
  if not precision.onednn_enabled():
    pytest.skip("the fusion is TensorFlow's oneDNN remapper's")
  with precision.policy_scope(policy):
    block = layers.TransformerEncoderBlock(num_attention_heads=2,
                                           intermediate_size=32)
    block.build([None, None, 16])
  randomise(block, seed=7)       # a zero bias would be folded away
  dtype = block.compute_dtype
  def frozen(fn):
    return convert_to_constants.convert_variables_to_constants_v2(
        tf.function(fn, input_signature=[
            tf.TensorSpec([None, None, 16], dtype)]).get_concrete_function())
  x = tf.cast(np.random.RandomState(8).randn(2, 5, 16), dtype)
  kernels = _runtime_kernels(frozen(lambda a: block(a, training=False)), x)
  matmuls = [fused for op, fused in kernels if op == "_MklNativeFusedMatMul"]
  assert sorted(matmuls).count(["BiasAdd", "Add"]) == 2, matmuls
  # Negative control: the projection reshaped to [batch, seq, hidden] before
  # the residual add (as a block written in 3-D does) runs the add alone.
  def three_d(a):
    rows = tf.reshape(a, [-1, 16])
    return tf.reshape(block.attention.output_dense(rows), tf.shape(a)) + a
  kernels = _runtime_kernels(frozen(three_d), x)
  assert ("AddV2", []) in kernels
  assert ["BiasAdd", "Add"] not in [f for op, f in kernels
                                    if op == "_MklNativeFusedMatMul"]


def test_embedding_matches_numpy_and_positions():
  emb = layers.BertEmbedding(vocab_size=20, hidden_size=8,
                             max_position_embeddings=10, dropout_rate=0.0)
  ids = np.array([[1, 5, 7, 0], [2, 3, 0, 0]], np.int32)
  types = np.array([[0, 0, 1, 1], [0, 1, 1, 0]], np.int32)
  out = emb(ids, input_type_ids=types)
  randomise(emb)
  out = emb(ids, input_type_ids=types).numpy()
  ref = (emb.word_embeddings.numpy()[ids] + emb.type_embeddings.numpy()[types]
         + emb.position_embeddings.numpy()[:4][None])
  ref = ln(emb.layer_norm, ref, 1e-12)
  assert max_abs_diff(out, ref) < 1e-5
  # Explicit positions 0..3 equal the default; other positions do not.
  pos = np.tile(np.arange(4, dtype=np.int32), (2, 1))
  assert max_abs_diff(emb(ids, input_type_ids=types, input_positions=pos), out) == 0.0
  assert max_abs_diff(emb(ids, input_type_ids=types, input_positions=pos + 1),
                      out) > 1e-3


def _ops_reading(fn, variable, op_type, *args):
  """The `op_type` ops of tf.function `fn`'s graph that take `variable`."""
  concrete = tf.function(fn).get_concrete_function(*args)
  inner = [internal for external, internal in concrete.graph.captures
           if external is variable.handle]
  return [op for op in concrete.graph.get_operations()
          if op.type == op_type and any(t is i for t in op.inputs for i in inner)]


def test_word_table_is_gathered_from_a_dense_read():
  # A sparse read (ResourceGather) puts the variable in copy-on-read mode for
  # good, and then AdamW's weight decay copies the whole table every step.
  from bert import precision
  with precision.policy_scope("mixed_bfloat16"):
    emb = layers.BertEmbedding(vocab_size=20, hidden_size=8,
                               max_position_embeddings=10)
  ids = tf.constant([[1, 5, 7, 5]], tf.int32)
  emb(ids)
  table = emb.word_embeddings
  assert not _ops_reading(lambda x: emb(x, training=True), table,
                          "ResourceGather", ids)
  assert _ops_reading(lambda x: emb(x, training=True), table,
                      "ReadVariableOp", ids)
  # Negative control: the check sees a sparse read where there is one.
  assert _ops_reading(lambda x: tf.gather(table, x), table, "ResourceGather", ids)
  # The table stays float32 (rows cast after the gather), and its gradient
  # is still the looked-up rows only.
  assert table.dtype == tf.float32 and emb(ids).dtype == tf.bfloat16
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.cast(emb(ids, training=False), tf.float32))
  grad = tape.gradient(loss, table)
  assert isinstance(grad, tf.IndexedSlices)
  assert sorted(grad.indices.numpy().tolist()) == [1, 5, 5, 7]


def test_embedding_factorised_projection():
  emb = layers.BertEmbedding(vocab_size=20, hidden_size=16, embedding_size=4,
                             max_position_embeddings=10)
  out = emb(np.ones((2, 3), np.int32))
  assert out.shape == (2, 3, 16)
  assert tuple(emb.word_embeddings.shape) == (20, 4)
  assert tuple(emb.projection.kernel.shape) == (4, 16)


def test_embedding_too_long_is_a_clear_error():
  emb = layers.BertEmbedding(vocab_size=20, hidden_size=8,
                             max_position_embeddings=4)
  with pytest.raises(ValueError, match="max_position_embeddings=4"):
    emb(np.ones((1, 5), np.int32))

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
  def run(ids):
    return emb(ids)

  run(np.ones((1, 4), np.int32))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="max_position_embeddings=4"):
    run(np.ones((1, 5), np.int32))


def test_masked_lm_head_matches_numpy_and_is_tied():
  table = tf.Variable(np.random.RandomState(4).randn(30, 8).astype(np.float32))
  head = layers.MaskedLMHead(vocab_size=30, embedding_table=table)
  seq = np.random.RandomState(5).randn(2, 6, 16).astype(np.float32)
  positions = np.array([[1, 4], [0, 5]], np.int32)
  head(seq, positions)
  randomise(head, seed=6)
  logits = head(seq, positions)
  assert logits.shape == (2, 2, 30)
  gathered = np.stack([seq[0, [1, 4]], seq[1, [0, 5]]])
  hidden = ln(head.layer_norm, np_gelu_tanh(dense(head.dense, gathered)), 1e-12)
  ref = hidden @ table.numpy().T + head.output_bias.numpy()
  assert max_abs_diff(logits, ref) < 1e-4
  # Tied: the head owns no copy of the table, and gradients reach it.
  assert all(w is not table for w in head.trainable_weights)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(head(seq, positions))
  assert float(tf.reduce_sum(tf.abs(tape.gradient(loss, table)))) > 0
  with pytest.raises(ValueError, match="vocab_size"):
    layers.MaskedLMHead(vocab_size=31, embedding_table=table)


def test_classification_head_uses_cls_and_dropout():
  head = layers.ClassificationHead(num_classes=3, dropout_rate=0.5)
  seq = np.random.RandomState(7).randn(4, 5, 8).astype(np.float32)
  from_seq = head(seq)
  assert from_seq.shape == (4, 3) and from_seq.dtype == tf.float32
  assert max_abs_diff(from_seq, dense(head.out, seq[:, 0])) < 1e-5
  assert max_abs_diff(head(seq[:, 0], training=True), from_seq) > 1e-4


def test_span_head_matches_numpy():
  head = layers.SpanHead()
  seq = np.random.RandomState(8).randn(2, 7, 8).astype(np.float32)
  start, end = head(seq)
  ref = dense(head.dense, seq)
  assert max_abs_diff(start, ref[..., 0]) < 1e-5
  assert max_abs_diff(end, ref[..., 1]) < 1e-5


# ------------------------------------------------------- shared harness
def _floats(*shape, seed=0):
  return np.random.RandomState(seed).randn(*shape).astype(np.float32)


MASK = padding_mask(2, 3, [3, 2])
# id: (class, constructor arguments (not the defaults), input, call kwargs,
# more run_layer_test arguments). Every float-weight layer runs all the
# checks; the mask layer has no weights (no training check).
HARNESS_CASES = {
    "BertEmbedding": (
        layers.BertEmbedding,
        dict(vocab_size=20, hidden_size=8, max_position_embeddings=10,
             type_vocab_size=3, embedding_size=4, dropout_rate=0.2,
             initializer_range=0.05, layer_norm_epsilon=1e-6),
        np.array([[1, 5, 7], [2, 3, 0]], np.int32),
        dict(input_type_ids=np.array([[0, 1, 2], [0, 0, 1]], np.int32)),
        dict(expected_output_shape=(2, 3, 8))),
    "FusedSelfAttention": (
        layers.FusedSelfAttention,
        dict(num_heads=2, dropout_rate=0.3, initializer_range=0.05),
        _floats(2, 3, 8),
        dict(attention_mask=MASK, return_attention_probs=True),
        dict(expected_output_shape=((2, 3, 8), (2, 2, 3, 3)))),
    "TransformerEncoderBlock": (
        layers.TransformerEncoderBlock,
        dict(num_attention_heads=2, intermediate_size=16,
             intermediate_activation="gelu_exact", hidden_dropout_rate=0.2,
             attention_dropout_rate=0.3, norm_first=True,
             layer_norm_epsilon=1e-6, initializer_range=0.05),
        _floats(2, 3, 8),
        dict(attention_mask=MASK),
        dict(expected_output_shape=(2, 3, 8))),
    "MaskedLMHead": (
        layers.MaskedLMHead,
        dict(vocab_size=11, activation="relu", initializer_range=0.05,
             layer_norm_epsilon=1e-6),
        _floats(2, 3, 8),
        dict(masked_lm_positions=np.array([[0, 2], [1, 1]], np.int32)),
        # Untied (its own output matrix): a tied head's table belongs to the
        # encoder; BertPretrainer's harness test covers the tie.
        dict(expected_output_shape=(2, 2, 11),
             expected_mixed_output_dtype="float32")),
    "ClassificationHead": (
        layers.ClassificationHead,
        dict(num_classes=3, inner_dim=5, activation="relu", dropout_rate=0.2,
             initializer_range=0.05),
        _floats(2, 8),
        None,
        dict(expected_output_shape=(2, 3),
             expected_mixed_output_dtype="float32")),
    "SpanHead": (
        layers.SpanHead,
        dict(initializer_range=0.1),
        _floats(2, 3, 8),
        None,
        dict(expected_output_shape=((2, 3), (2, 3)),
             expected_mixed_output_dtype="float32")),
    "SelfAttentionMask": (
        layers.SelfAttentionMask,
        {},
        np.array([[1, 1, 1], [1, 1, 0]], np.int32),
        None,
        # No weights: nothing to train.
        dict(expected_output_shape=(2, 1, 3),
             checks=("config", "saved_model", "mixed_precision"))),
}


@pytest.mark.parametrize("case", list(HARNESS_CASES))
def test_harness(case):
  """Config and SavedModel round trips, a training step and mixed precision
  (tests/harness.py) for each layer with weights or a float output."""
  cls, init_kwargs, input_data, call_kwargs, more = HARNESS_CASES[case]
  harness.run_layer_test(cls, init_kwargs, input_data, call_kwargs=call_kwargs,
                         **more)
