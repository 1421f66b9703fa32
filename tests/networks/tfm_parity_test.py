"""Parity of BertEncoder with Model Garden's tfm.nlp.networks.BertEncoder.

Model Garden is the reference implementation (a test-only import). Its
weights are copied into ours through the explicit name map below; every
output must then agree within 1e-5 (fp32).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_models as tfm
import tf_keras

from bert import BertEncoder
from conftest import max_abs_diff, random_inputs, small_config

TOL = 1e-5


def build_tfm(config):
  # Weights scaled by fan-in (0.1 at width 64, 0.029 at 768) so activations
  # have the magnitude of a trained BERT; far larger weights only amplify
  # float32 rounding, which both implementations do in different orders.
  stddev = 0.8 / np.sqrt(config.hidden_size)
  return tfm.nlp.networks.BertEncoder(
      vocab_size=config.vocab_size,
      hidden_size=config.hidden_size,
      num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      inner_dim=config.intermediate_size,
      inner_activation=lambda x: tf.nn.gelu(x, approximate=True),
      output_dropout=config.hidden_dropout_prob,
      attention_dropout=config.attention_probs_dropout_prob,
      initializer=tf_keras.initializers.TruncatedNormal(stddev=stddev),
      embedding_width=config.embedding_size,
      norm_first=config.norm_first,
      dict_outputs=True)


def copy_tfm_weights(theirs, ours):
  """The name map: Model Garden object -> our object, weight by weight."""
  h = ours.config.hidden_size
  written = []

  def copy(src, dst):
    assert tuple(src.shape) == tuple(dst.shape), (src.name, dst.name)
    dst.assign(src)
    written.append(dst.ref())

  emb = ours.embedding_layer
  copy(theirs._embedding_layer.embeddings, emb.word_embeddings)
  copy(theirs._position_embedding_layer._position_embeddings,
       emb.position_embeddings)
  copy(theirs._type_embedding_layer.embeddings, emb.type_embeddings)
  copy(theirs._embedding_norm_layer.gamma, emb.layer_norm.gamma)
  copy(theirs._embedding_norm_layer.beta, emb.layer_norm.beta)
  if emb.projection is not None:
    copy(theirs._embedding_projection.kernel, emb.projection.kernel)
    copy(theirs._embedding_projection.bias, emb.projection.bias)

  for their_block, our_block in zip(theirs.transformer_layers,
                                    ours.transformer_layers):
    mha = their_block._attention_layer
    # Model Garden: query/key/value kernels [hidden, heads, head_size] and
    # biases [heads, head_size]; ours: one [hidden, 3*hidden] kernel, columns
    # ordered Q | K | V, each (heads, head_size) row-major.
    kernels = [d.kernel.numpy().reshape(h, h)
               for d in (mha._query_dense, mha._key_dense, mha._value_dense)]
    biases = [d.bias.numpy().reshape(h)
              for d in (mha._query_dense, mha._key_dense, mha._value_dense)]
    att = our_block.attention
    copy(np.concatenate(kernels, axis=1), att.qkv.kernel)
    copy(np.concatenate(biases), att.qkv.bias)
    # attention output: [heads, head_size, hidden] -> [hidden, hidden]
    copy(mha._output_dense.kernel.numpy().reshape(h, h), att.output_dense.kernel)
    copy(mha._output_dense.bias, att.output_dense.bias)
    for theirs_ln, ours_ln in (
        (their_block._attention_layer_norm, our_block.attention_layer_norm),
        (their_block._output_layer_norm, our_block.output_layer_norm)):
      copy(theirs_ln.gamma, ours_ln.gamma)
      copy(theirs_ln.beta, ours_ln.beta)
    for theirs_d, ours_d in (
        (their_block._intermediate_dense, our_block.intermediate_dense),
        (their_block._output_dense, our_block.output_dense)):
      # EinsumDense kernels are already [in, out].
      copy(theirs_d.kernel, ours_d.kernel)
      copy(theirs_d.bias, ours_d.bias)

  copy(theirs.pooler_layer.kernel, ours.pooler_layer.kernel)
  copy(theirs.pooler_layer.bias, ours.pooler_layer.bias)
  # Every weight of ours was written exactly once.
  assert len(set(written)) == len(written) == len(ours.weights)


def randomise_norms_and_biases(model, seed):
  """Zero biases and unit LayerNorms would hide a mixed-up map; randomise."""
  rng = np.random.RandomState(seed)
  for w in model.weights:
    if "gamma" in w.name:
      w.assign(1.0 + 0.1 * rng.randn(*w.shape))
    elif "beta" in w.name or "bias" in w.name:
      w.assign(0.1 * rng.randn(*w.shape))


def run_both(config, batch, seq, seed):
  theirs = build_tfm(config)
  ours = BertEncoder(config)
  inputs = random_inputs(batch, seq, config.vocab_size, seed=seed)
  randomise_norms_and_biases(theirs, seed)
  theirs_out = theirs([inputs["input_word_ids"], inputs["input_mask"],
                       inputs["input_type_ids"]], training=False)
  copy_tfm_weights(theirs, ours)
  ours_out = ours(inputs, training=False)
  return theirs_out, ours_out


def assert_parity(theirs_out, ours_out):
  assert max_abs_diff(theirs_out["sequence_output"],
                      ours_out["sequence_output"]) <= TOL
  assert max_abs_diff(theirs_out["pooled_output"],
                      ours_out["pooled_output"]) <= TOL
  assert len(theirs_out["encoder_outputs"]) == len(ours_out["encoder_outputs"])
  for t, o in zip(theirs_out["encoder_outputs"], ours_out["encoder_outputs"]):
    assert max_abs_diff(t, o) <= TOL


@pytest.mark.parametrize("seq", [16, 7])
@pytest.mark.parametrize("norm_first", [False, True])
def test_parity_with_model_garden(seq, norm_first):
  config = small_config(num_hidden_layers=3, norm_first=norm_first)
  theirs_out, ours_out = run_both(config, batch=3, seq=seq, seed=seq)
  # Sanity: the outputs are not trivially equal (e.g. all zeros).
  assert float(tf.math.reduce_std(ours_out["sequence_output"])) > 0.1
  assert_parity(theirs_out, ours_out)


def test_parity_with_factorised_embeddings():
  config = small_config(embedding_size=24)
  theirs_out, ours_out = run_both(config, batch=2, seq=12, seed=3)
  assert_parity(theirs_out, ours_out)


@pytest.mark.heavy
def test_parity_bert_base_shape():
  """The real BERT-Base shape (12 x 768), one batch with padding."""
  from bert import BertConfig
  config = BertConfig.preset("bert_base")
  theirs_out, ours_out = run_both(config, batch=2, seq=24, seed=5)
  assert_parity(theirs_out, ours_out)


def test_parity_detects_a_wrong_map():
  """The comparison can fail: swapping Q and K breaks parity."""
  config = small_config()
  theirs = build_tfm(config)
  ours = BertEncoder(config)
  inputs = random_inputs(2, 10, config.vocab_size)
  theirs_out = theirs([inputs["input_word_ids"], inputs["input_mask"],
                       inputs["input_type_ids"]], training=False)
  copy_tfm_weights(theirs, ours)
  kernel = ours.transformer_layers[0].attention.qkv.kernel
  h = config.hidden_size
  k = kernel.numpy()
  kernel.assign(np.concatenate([k[:, h:2 * h], k[:, :h], k[:, 2 * h:]], axis=1))
  ours_out = ours(inputs, training=False)
  assert max_abs_diff(theirs_out["sequence_output"],
                      ours_out["sequence_output"]) > 1e-3
