"""Packed rows give the same per-example outputs, losses and gradients as
one example per row (fp32, <= 1e-5): encoder, classifier, pre-trainer."""


import numpy as np
import pytest
import tensorflow as tf

from bert.data.packing import pack
from bert.features import ENCODER_INPUTS
from bert.models import BertClassifier, BertPretrainer
from bert.networks import BertEncoder
from bert.tasks import ClassificationTask
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs, HeadConfig)
from bert.losses import pretraining_stats
from conftest import max_abs_diff, small_config, vocab

SEQ = 32
TOL = 1e-5


def examples(n=11, seq=SEQ, vocab=100, seed=0, predictions=0):
  """n examples of lengths 3..seq/2 (so that rows hold several), padded to
  `seq`; segment B is the second half of each; with `predictions`, masked-LM
  positions/ids/weights (some slots unused) and next-sentence labels."""
  rng = np.random.RandomState(seed)
  lengths = rng.randint(3, seq // 2 + 1, size=n)
  f = dict(input_word_ids=np.zeros((n, seq), np.int32),
           input_mask=np.zeros((n, seq), np.int32),
           input_type_ids=np.zeros((n, seq), np.int32),
           label=rng.randint(0, 3, size=n).astype(np.int32))
  for i, length in enumerate(lengths):
    f["input_word_ids"][i, :length] = rng.randint(1, vocab, size=length)
    f["input_mask"][i, :length] = 1
    f["input_type_ids"][i, length // 2:length] = 1
  if predictions:
    f["masked_lm_positions"] = np.zeros((n, predictions), np.int32)
    f["masked_lm_ids"] = np.zeros((n, predictions), np.int32)
    f["masked_lm_weights"] = np.zeros((n, predictions), np.float32)
    for i, length in enumerate(lengths):
      used = min(predictions - 1, length - 2)
      f["masked_lm_positions"][i, :used] = rng.choice(
          np.arange(1, length), used, replace=False)
      f["masked_lm_ids"][i, :used] = rng.randint(1, vocab, size=used)
      f["masked_lm_weights"][i, :used] = 1.0
    f["next_sentence_labels"] = rng.randint(0, 2, size=n).astype(np.int32)
  return f


def packed_of(f, max_per_row=4):
  p = pack(f, SEQ, max_per_row)
  assert len(p["input_word_ids"]) < len(f["input_word_ids"])  # really packed
  assert p["packed_example_mask"].sum(1).max() > 1
  return p


def slots(p):
  """(row, slot, example) of every packed example."""
  return [(r, s, int(i)) for r, s in zip(*np.nonzero(p["packed_example_mask"]))
          for i in [p["packed_example_index"][r, s]]]


def tensors(f, keys):
  return {k: tf.constant(f[k]) for k in keys}


PACKED_INPUTS = ENCODER_INPUTS + ("input_positions", "cls_positions")


def test_packed_encoder_outputs_equal_unpacked():
  encoder = BertEncoder(small_config(hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0))
  f = examples()
  p = packed_of(f)
  plain = encoder(tensors(f, ENCODER_INPUTS))
  packed = encoder(tensors(p, PACKED_INPUTS))
  assert packed["pooled_output"].shape == (len(p["input_word_ids"]), 4, 64)
  lengths = f["input_mask"].sum(1)
  for r, s, i in slots(p):
    start, n = p["cls_positions"][r, s], lengths[i]
    for a, b in zip(plain["encoder_outputs"], packed["encoder_outputs"]):
      assert max_abs_diff(a[i, :n], b[r, start:start + n]) <= TOL
    assert max_abs_diff(plain["pooled_output"][i],
                        packed["pooled_output"][r, s]) <= TOL
  # Without the block-diagonal mask the examples would see each other: far
  # above the tolerance for every example after the first of its row.
  leaky = encoder(dict(tensors(p, PACKED_INPUTS),
                       input_mask=tf.constant(np.minimum(p["input_mask"], 1))))
  leaks = [max_abs_diff(plain["sequence_output"][i, :lengths[i]],
                        leaky["sequence_output"][r, p["cls_positions"][r, s]:
                                                 p["cls_positions"][r, s] + lengths[i]])
           for r, s, i in slots(p) if s >= 1]
  assert leaks and min(leaks) > 100 * TOL, leaks


def _grads(model, loss_fn):
  with tf.GradientTape() as tape:
    loss = loss_fn()
  return loss, tape.gradient(loss, model.trainable_variables)


def _assert_same_grads(model, g1, g2):
  compared = 0
  for v, a, b in zip(model.trainable_variables, g1, g2):
    if a is None and b is None:
      continue
    a, b = tf.convert_to_tensor(a), tf.convert_to_tensor(b)
    assert max_abs_diff(a, b) <= TOL, v.name
    compared += 1
  assert compared >= 20


def test_packed_classifier_logits_loss_and_gradients_equal_unpacked():
  task = ClassificationTask(
      data=ClassificationData(labels=("a", "b", "c")),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522, hidden_dropout_prob=0.0,
                                   attention_probs_dropout_prob=0.0),
          vocab_file=vocab(),
          lower_case=True),
      inputs=FinetuningInputs(seq_length=SEQ), head=HeadConfig(dropout_rate=0.0))
  model = task.build_model()
  assert isinstance(model, BertClassifier)
  f = examples(vocab=30522)
  p = packed_of(f)
  ft = tensors(f, ENCODER_INPUTS + ("label",))
  pt = tensors(p, PACKED_INPUTS + ("label", "packed_example_mask"))
  plain, packed = model(ft)["logits"], model(pt)["logits"]
  assert packed.shape == (len(p["input_word_ids"]), 4, 3)
  for r, s, i in slots(p):
    assert max_abs_diff(plain[i], packed[r, s]) <= TOL

  def loss(features):
    stats = task.compute_stats(features, model(features, training=True))
    den = task.loss_denominators(features)["loss"]
    assert float(stats["loss"][1]) == float(den) == len(f["label"])
    return stats["loss"][0] / den

  l1, g1 = _grads(model, lambda: loss(ft))
  l2, g2 = _grads(model, lambda: loss(pt))
  assert abs(float(l1) - float(l2)) <= TOL
  _assert_same_grads(model, g1, g2)


def test_packed_pretrainer_outputs_losses_and_gradients_equal_unpacked():
  encoder = BertEncoder(small_config(hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0))
  model = BertPretrainer(encoder)
  f = examples(predictions=5)
  p = packed_of(f)
  assert p["masked_lm_positions"].shape == (len(p["input_word_ids"]), 4 * 5)
  labels = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
  ft = tensors(f, ENCODER_INPUTS + ("masked_lm_positions",) + labels)
  pt = tensors(p, PACKED_INPUTS + ("masked_lm_positions", "packed_example_mask")
               + labels)
  plain, packed = model(ft), model(pt)
  assert packed["next_sentence_logits"].shape == (len(p["input_word_ids"]), 4, 2)
  for r, s, i in slots(p):
    used = f["masked_lm_weights"][i] > 0
    assert max_abs_diff(plain["masked_lm_logits"][i][used],
                        packed["masked_lm_logits"][r, s * 5:(s + 1) * 5][used]) <= TOL
    assert max_abs_diff(plain["next_sentence_logits"][i],
                        packed["next_sentence_logits"][r, s]) <= TOL

  def loss(features):
    stats = pretraining_stats(features, model(features, training=True))
    assert float(stats["next_sentence_loss"][1]) == len(f["input_word_ids"])
    assert float(stats["masked_lm_loss"][1]) == f["masked_lm_weights"].sum()
    return sum(stats[k][0] / stats[k][1]
               for k in ("masked_lm_loss", "next_sentence_loss"))

  l1, g1 = _grads(model, lambda: loss(ft))
  l2, g2 = _grads(model, lambda: loss(pt))
  assert abs(float(l1) - float(l2)) <= TOL
  _assert_same_grads(model, g1, g2)


def test_packed_inputs_missing_a_head_input_are_rejected():
  model = BertPretrainer(BertEncoder(small_config()))
  p = packed_of(examples(predictions=5))
  with pytest.raises(ValueError, match="masked_lm_positions"):
    model(tensors(p, PACKED_INPUTS))
