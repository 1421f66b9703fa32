"""BertPretrainer and the pre-training losses."""

import numpy as np
import pytest
import tensorflow as tf

from bert import BertEncoder
from bert.models import BertPretrainer
from bert.losses import pretraining_losses
from conftest import max_abs_diff, random_inputs, small_config
import harness


def features(batch=3, seq=10, predictions=4, seed=0):
  rng = np.random.RandomState(seed)
  f = random_inputs(batch, seq, seed=seed)
  f["masked_lm_positions"] = tf.constant(
      np.sort(rng.randint(1, 6, size=(batch, predictions)), axis=1), tf.int32)
  f["masked_lm_ids"] = tf.constant(rng.randint(0, 100, size=(batch, predictions)),
                                   tf.int32)
  w = np.ones((batch, predictions), np.float32)
  w[0, -2:] = 0.0       # padded predictions
  f["masked_lm_weights"] = tf.constant(w)
  f["next_sentence_labels"] = tf.constant(rng.randint(0, 2, size=(batch, 1)), tf.int32)
  return f


def test_outputs_heads_tied_and_only_at_positions():
  encoder = BertEncoder(small_config())
  model = BertPretrainer(encoder)
  f = features()
  out = model(f, training=False)
  assert out["masked_lm_logits"].shape == (3, 4, 100)
  assert out["next_sentence_logits"].shape == (3, 2)
  assert model.masked_lm.embedding_table is encoder.get_embedding_table()
  # The logits at positions equal the head applied to those rows.
  seq = out["sequence_output"].numpy()
  pos = f["masked_lm_positions"].numpy()
  gathered = np.stack([seq[i, pos[i]] for i in range(3)])
  single = model.masked_lm(tf.constant(gathered.reshape(3 * 4, 1, -1)),
                           tf.zeros([12, 1], tf.int32))
  assert max_abs_diff(single.numpy().reshape(3, 4, 100), out["masked_lm_logits"]) < 1e-5


def test_losses_match_reference_formula():
  model = BertPretrainer(BertEncoder(small_config()))
  f = features(seed=1)
  out = model(f, training=False)
  got = pretraining_losses(f, out)
  logits = out["masked_lm_logits"].numpy().astype(np.float64)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  ids = f["masked_lm_ids"].numpy()
  w = f["masked_lm_weights"].numpy()
  per = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
  mlm = (per * w).sum() / (w.sum() + 1e-5)
  nsp_logits = out["next_sentence_logits"].numpy().astype(np.float64)
  nsp_lp = nsp_logits - np.log(np.exp(nsp_logits).sum(-1, keepdims=True))
  labels = f["next_sentence_labels"].numpy()[:, 0]
  nsp = -nsp_lp[np.arange(3), labels].mean()
  assert abs(float(got["masked_lm_loss"]) - mlm) < 1e-5
  assert abs(float(got["next_sentence_loss"]) - nsp) < 1e-5
  assert abs(float(got["loss"]) - (mlm + nsp)) < 1e-5
  correct = (logits.argmax(-1) == ids) * w
  assert abs(float(got["masked_lm_accuracy"]) - correct.sum() / w.sum()) < 1e-6
  # Padded predictions carry no weight: changing their labels changes nothing.
  f2 = dict(f)
  ids2 = ids.copy()
  ids2[0, -2:] = 7
  f2["masked_lm_ids"] = tf.constant(ids2)
  assert float(pretraining_losses(f2, out)["masked_lm_loss"]) == float(got["masked_lm_loss"])


def test_tie_survives_serialisation():
  model = BertPretrainer(BertEncoder(small_config()))
  clone = BertPretrainer.from_config(model.get_config())
  assert clone.masked_lm.embedding_table is clone.encoder.get_embedding_table()
  assert len(clone.trainable_weights) == len(model.trainable_weights)


def test_harness():
  """The shared harness (tests/harness.py): config round trip (the clone's
  outputs equal), the default traced Keras SavedModel revived with as many
  weights and equal outputs, a training step through the tied table, and
  mixed_float16 with the heads' logits float32 and the encoder's outputs
  float16."""
  f = features(seed=2)
  inputs = {k: f[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                              "masked_lm_positions")}
  out = harness.run_model_test(
      BertPretrainer, dict(encoder=BertEncoder(small_config())), inputs,
      saved_model_mode="keras_traced", mixed_precision_policy="mixed_float16",
      expected_mixed_output_dtype=dict(masked_lm_logits=tf.float32,
                                       next_sentence_logits=tf.float32))
  assert out["masked_lm_logits"].shape == (3, 4, 100)


def test_untied_or_partial_heads_are_rejected():
  from bert.layers import MaskedLMHead
  encoder = BertEncoder(small_config())
  other = BertEncoder(small_config())
  model = BertPretrainer(other)
  with pytest.raises(ValueError, match="tied"):
    BertPretrainer(encoder, masked_lm=model.masked_lm,
                   next_sentence=model.next_sentence)
  with pytest.raises(ValueError, match="neither"):
    BertPretrainer(encoder, masked_lm=MaskedLMHead(100))
