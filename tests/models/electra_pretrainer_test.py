"""ElectraPretrainer: the generator sharing the discriminator's embeddings,
the sampling, the discriminator's labels and loss, its config, and the
discriminator written as transformers' ElectraForPreTraining."""

import numpy as np
import pytest
import tensorflow as tf

from bert import BertEncoder, checkpoints
from bert.losses import electra_pretraining_stats
from bert.models import ElectraPretrainer
from bert.networks.electra_generator import SharedEmbedding
from conftest import random_inputs, small_config

VOCAB = 100


def electra_config(**overrides):
  return small_config(**dict(dict(family="electra", use_pooler=False,
                                  embedding_size=16), **overrides))


def features(batch=4, seq=12, predictions=5, seed=0):
  """Random inputs with padding and two segments; the masked positions hold
  [MASK] (id 3) and `masked_lm_ids` the original ids; row 0's last two
  predictions are padding (weight 0, position 0)."""
  rng = np.random.RandomState(seed)
  f = {k: v.numpy() for k, v in random_inputs(batch, seq, seed=seed).items()}
  f["input_word_ids"] = np.maximum(f["input_word_ids"], 5) * f["input_mask"]
  positions = np.stack([np.sort(rng.choice(np.arange(1, 8), predictions,
                                           replace=False))
                        for _ in range(batch)]).astype(np.int32)
  weights = np.ones((batch, predictions), np.float32)
  weights[0, -2:] = 0
  positions[0, -2:] = 0
  ids = np.take_along_axis(f["input_word_ids"], positions, 1) * (weights > 0)
  masked = f["input_word_ids"].copy()
  for i in range(batch):
    for p, w in zip(positions[i], weights[i]):
      if w:
        masked[i, p] = 3
  f.update(input_word_ids=masked, masked_lm_positions=positions,
           masked_lm_ids=ids.astype(np.int32), masked_lm_weights=weights)
  return {k: tf.constant(v) for k, v in f.items()}


def originals(f):
  """The unmasked ids, in NumPy."""
  ids = f["input_word_ids"].numpy().copy()
  for i, (pos, orig, w) in enumerate(zip(f["masked_lm_positions"].numpy(),
                                         f["masked_lm_ids"].numpy(),
                                         f["masked_lm_weights"].numpy())):
    for p, o, weight in zip(pos, orig, w):
      if weight:
        ids[i, p] = o
  return ids


def test_the_generator_is_smaller_and_shares_the_embeddings():
  encoder = BertEncoder(electra_config())
  model = ElectraPretrainer(encoder)
  gen = model.generator_config
  # A quarter of hidden size, heads and intermediate size.
  assert (gen.hidden_size, gen.num_attention_heads,
          gen.intermediate_size) == (16, 1, 32)
  assert gen.embedding_size == 16 and gen.num_hidden_layers == 2
  shared = model.generator.embedding_layer.shared
  assert shared is encoder.embedding_layer
  assert model.generator_masked_lm.embedding_table is \
      encoder.get_embedding_table()
  # Each shared weight counted once.
  ids = [id(v) for v in model.trainable_variables]
  assert len(ids) == len(set(ids))


def test_shared_embedding_is_the_tables_sum_projected_and_round_trips():
  # Tables 32 wide, the generator 16: the generator projects them itself.
  encoder = BertEncoder(electra_config(embedding_size=32))
  model = ElectraPretrainer(encoder)
  layer = model.generator.embedding_layer
  f = features()
  ids, types = f["input_word_ids"], f["input_type_ids"]
  # Before its projection: exactly the discriminator's own normalised sum.
  table = encoder.embedding_layer
  expected = layer.projection(table.embed(ids, types))
  np.testing.assert_allclose(layer(ids, types, training=False), expected,
                             atol=1e-6)
  assert layer.projection is not table.projection
  # From its config: a layer of its own tables (fresh weights, as every
  # from_config), equal once given the same weights.
  twin = SharedEmbedding.from_config(layer.get_config())
  twin(ids, types)
  assert twin.shared is not table
  twin.set_weights(layer.get_weights())
  np.testing.assert_allclose(twin(ids, types, training=False),
                             layer(ids, types, training=False), atol=1e-6)
  with pytest.raises(ValueError, match="shared must be a BertEmbedding"):
    SharedEmbedding(encoder, hidden_size=8)


def test_gradients_reach_both_encoders_and_the_shared_embeddings():
  model = ElectraPretrainer(BertEncoder(electra_config()))
  f = features()
  with tf.GradientTape() as tape:
    outputs = model(f, training=True)
    loss = model.objective(f, None, outputs)["loss"][0]
  variables = model.trainable_variables
  grads = dict(zip([id(v) for v in variables],
                   tape.gradient(loss, variables)))

  def norm(v):
    g = grads[id(v)]
    assert g is not None, v.name
    return float(tf.norm(tf.convert_to_tensor(g)))

  emb = model.encoder.embedding_layer
  for v in (emb.word_embeddings, emb.position_embeddings, emb.type_embeddings):
    assert norm(v) > 0, v.name
  for part in (model.generator, model.encoder, model.generator_masked_lm,
               model.discriminator):
    assert part.trainable_variables
    for v in part.trainable_variables:
      assert norm(v) > 0, v.name
  # Every variable of the model is one of these parts'.
  assert all(grads[i] is not None for i in grads)


def test_sampling_is_deterministic_for_a_seed():
  encoder = BertEncoder(electra_config())
  model = ElectraPretrainer(encoder, seed=1)
  f = features()
  first = model(f, training=False)["corrupted_word_ids"].numpy()
  again = model(f, training=False)["corrupted_word_ids"].numpy()
  np.testing.assert_array_equal(first, again)
  # Another model of the same weights and seed samples the same.
  twin = ElectraPretrainer.from_config(model.get_config())
  twin.set_weights(model.get_weights())
  np.testing.assert_array_equal(
      twin(f, training=False)["corrupted_word_ids"].numpy(), first)
  # Another seed samples otherwise.
  other = ElectraPretrainer(encoder, seed=2)
  other.set_weights(model.get_weights())
  assert (other(f, training=False)["corrupted_word_ids"].numpy()
          != first).any()
  # The same rows masked elsewhere (another batch) draw other samples.
  g = dict(f, input_word_ids=tf.constant(originals(f)))
  assert not np.array_equal(model._sample(tf.zeros([4, 5, VOCAB]),
                                          f["input_word_ids"]),
                            model._sample(tf.zeros([4, 5, VOCAB]),
                                          g["input_word_ids"]))


def test_labels_are_exactly_the_replaced_real_tokens():
  model = ElectraPretrainer(BertEncoder(electra_config()))
  f = features()
  out = model(f, training=False)
  corrupted = out["corrupted_word_ids"].numpy()
  labels = out["discriminator_labels"].numpy()
  original = originals(f)
  np.testing.assert_array_equal(labels, (corrupted != original).astype(int))
  # Only the real masked positions can change; padding never does.
  where = np.zeros_like(original, bool)
  for i, (pos, w) in enumerate(zip(f["masked_lm_positions"].numpy(),
                                   f["masked_lm_weights"].numpy())):
    where[i, pos[w > 0]] = True
  assert not labels[~where].any()
  assert (corrupted[~where] == original[~where]).all()
  assert labels.sum() > 0      # a random generator replaces most
  # A generator that always samples the original id: nothing is replaced.
  bias = model.generator_masked_lm.output_bias
  target = np.full(VOCAB, -1e4, np.float32)
  g = dict(f, masked_lm_ids=tf.fill(f["masked_lm_ids"].shape, 42))
  target[42] = 1e4
  bias.assign(target)
  out = model(g, training=False)
  assert not out["discriminator_labels"].numpy().any()
  assert (out["corrupted_word_ids"].numpy() == originals(g)).all()


def test_the_loss_is_masked_lm_plus_weighted_mean_discriminator_loss():
  model = ElectraPretrainer(BertEncoder(electra_config()),
                            discriminator_weight=50.0)
  f = features(seed=3)
  out = model(f, training=False)
  stats = electra_pretraining_stats(f, out, 50.0)
  value = {k: float(n / d) for k, (n, d) in stats.items()}
  mask = f["input_mask"].numpy() > 0
  z = out["discriminator_logits"].numpy().astype(np.float64)[mask]
  y = out["discriminator_labels"].numpy()[mask]
  bce = np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z))))
  assert abs(value["discriminator_loss"] - bce) < 1e-5
  assert abs(value["weighted_discriminator_loss"] - 50 * bce) < 1e-3
  assert abs(value["discriminator_accuracy"]
             - np.mean((z > 0) == (y == 1))) < 1e-6
  assert abs(value["replaced_fraction"] - y.mean()) < 1e-6
  total = float(model.objective(f, None, out)["loss"][0])
  mlm = float(stats["masked_lm_loss"][0] / (stats["masked_lm_loss"][1] + 1e-5))
  assert abs(total - (mlm + 50 * bce)) < 1e-3


def test_config_round_trip():
  model = ElectraPretrainer(BertEncoder(electra_config()),
                            generator_fraction=0.5, discriminator_weight=20.0,
                            seed=7)
  config = model.get_config()
  assert (config["generator_fraction"], config["discriminator_weight"],
          config["seed"]) == (0.5, 20.0, 7)
  back = ElectraPretrainer.from_config(config)
  assert back.get_config() == config
  assert back.generator_config == model.generator_config
  assert len(back.weights) == len(model.weights)
  back.set_weights(model.get_weights())
  f = features()
  for key, value in model(f, training=False).items():
    np.testing.assert_allclose(back(f, training=False)[key], value, atol=1e-6,
                               err_msg=key)


def test_bad_arguments_are_one_line():
  with pytest.raises(ValueError, match="generator_fraction"):
    ElectraPretrainer(BertEncoder(electra_config()), generator_fraction=0)
  with pytest.raises(ValueError, match="discriminator_weight"):
    ElectraPretrainer(BertEncoder(electra_config()), discriminator_weight=-1)


def test_the_discriminator_is_transformers_electra_for_pretraining(tmp_path):
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  model = ElectraPretrainer(BertEncoder(electra_config(hidden_act="gelu_exact")))
  f = features()
  out = model(f, training=False)
  path = checkpoints.save(model.discriminator_checkpoint(),
                          str(tmp_path / "disc"), format="hf")
  theirs = transformers.ElectraForPreTraining.from_pretrained(path).eval()
  with torch.no_grad():
    logits = theirs(
        input_ids=torch.tensor(out["corrupted_word_ids"].numpy(),
                               dtype=torch.long),
        attention_mask=torch.tensor(f["input_mask"].numpy(), dtype=torch.long),
        token_type_ids=torch.tensor(f["input_type_ids"].numpy(),
                                    dtype=torch.long)).logits.numpy()
  mask = f["input_mask"].numpy() > 0
  diff = np.abs(logits - out["discriminator_logits"].numpy())[mask].max()
  assert diff <= 1e-5, diff
  # And ours reads it back with its head.
  back = checkpoints.load(path, with_heads=True)
  assert back.discriminator is not None


def test_generator_shapes_of_the_released_sizes():
  """ELECTRA-Small's generator at 1/4 and Base's at 1/3: google-research
  ELECTRA's `get_generator_config` gives these (hidden 64, 1 head, FFN 256;
  hidden 256, 4 heads, FFN 1024)."""
  from bert.config import BertConfig  # pylint: disable=g-import-not-at-top
  from bert.networks import generator_config  # pylint: disable=g-import-not-at-top
  small = generator_config(BertConfig.preset("electra_small_discriminator"),
                           0.25)
  assert (small.hidden_size, small.num_attention_heads,
          small.intermediate_size, small.embedding_size) == (64, 1, 256, 128)
  base = generator_config(BertConfig.preset("electra_base_discriminator"),
                          1 / 3)
  assert (base.hidden_size, base.num_attention_heads,
          base.intermediate_size, base.embedding_size) == (256, 4, 1024, 768)
