"""Every task model on every family: `from_pretrained(folder)` of a Hugging
Face folder (a random tiny model with its tokenizer, as `save_pretrained`
writes them) gives the family's encoder and preprocessor; one `fit` step
lowers the loss; config and save/load round trips give the same outputs
(<= 1e-6); the serving export answers as `predict` does."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert.data import classification_data as cd
from bert.data import ner_data
from bert.data.squad_examples import read_squad
from bert.validation import ConfigError
from bert.models import (BertClassifier, BertMultipleChoice, BertSpanLabeler,
                         BertTextEmbedder, BertTokenClassifier)
from conftest import shared_data
from family import FAMILIES, family_folder, hf_tokenizer
import harness

KIND = dict(bert="wordpiece", distilbert="wordpiece", electra="wordpiece",
            roberta="byte_pair", albert="sentencepiece")


def mrpc(n):
  examples = cd.read_glue("mrpc", shared_data("glue", "MRPC", "train.tsv"))[:n]
  return ([e.text_a for e in examples], [e.text_b for e in examples],
          np.array([int(e.label) for e in examples]))


def compile_fast(model):
  """The task's loss and metrics, with a learning rate that moves a tiny
  random model's near-uniform outputs in one step."""
  model.compile(optimizer=tf_keras.optimizers.Adam(1e-3))


# Each test runs by default on one of RoBERTa and ALBERT (their own
# tokenizers and templates), the other family and the WordPiece families
# (whose preprocessing is BERT's) in the slow tier: the default suite's time.
DEFAULT = dict(classifier="roberta", tagger="albert", span_labeler="albert",
               multiple_choice="roberta", embedder="albert")


def families(test):
  return [f if f == DEFAULT[test] else pytest.param(f, marks=pytest.mark.slow)
          for f in FAMILIES]


@pytest.fixture(scope="module")
def folders(family_root):
  return lambda name: family_folder(name, family_root)


@pytest.mark.parametrize("name", families("classifier"))
def test_classifier(name, folders, family_root, tmp_path):
  folder = folders(name)
  a, b, y = mrpc(16)
  tf_keras.utils.set_random_seed(1)
  model = BertClassifier.from_pretrained(folder, num_classes=2, seq_length=64)
  pre = model.preprocessor
  assert model.encoder.config.family == name
  assert pre.vocabulary.kind == KIND[name]
  # The rows are transformers' own pairs (template, ids, type ids).
  reference = hf_tokenizer(name, family_root)
  kwargs = dict(return_token_type_ids=True) if name == "albert" else {}
  short_a, short_b = [t[:60] for t in a], [t[:60] for t in b]
  want = reference(short_a, short_b, padding="max_length", max_length=64,
                   **kwargs)
  got = pre.encode((short_a, short_b))
  np.testing.assert_array_equal(got["input_word_ids"], want["input_ids"])
  if "token_type_ids" in want and name != "distilbert":
    np.testing.assert_array_equal(got["input_type_ids"],
                                  want["token_type_ids"])
  compile_fast(model)
  harness.one_step_lowers_the_loss(model, (a, b), y)
  got = harness.same_after_round_trips(model, (a[:6], b[:6]), tmp_path)
  model.export(str(tmp_path / "served"))
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](text=tf.constant(a[:6]), text_b=tf.constant(b[:6]))
  np.testing.assert_allclose(served["probabilities"], got["probabilities"],
                             atol=1e-5)


@pytest.mark.parametrize("name", families("tagger"))
def test_tagger(name, folders, tmp_path):
  folder = folders(name)
  sentences = ner_data.read_conll(shared_data("ner", "wnut17",
                                              "wnut17train.conll"))[:16]
  labels = ner_data.label_list(sentences)
  words, tags = [s.words for s in sentences], [s.tags for s in sentences]
  tf_keras.utils.set_random_seed(2)
  model = BertTokenClassifier.from_pretrained(folder, labels=labels,
                                              seq_length=64)
  assert model.encoder.config.family == name
  compile_fast(model)
  harness.one_step_lowers_the_loss(model, words, tags)
  got = harness.same_after_round_trips(model, words[:4], tmp_path)
  assert [len(t) for t in got["tags"]] == [len(w) for w in words[:4]]
  model.export(str(tmp_path / "served"))
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](text=tf.constant([" ".join(w) for w in words[:4]]))
  for row, want in zip(served["tags"].numpy(), got["tags"]):
    assert [t.decode() for t in row[:len(want)]] == want


@pytest.mark.parametrize("name", families("span_labeler"))
def test_span_labeler(name, folders, tmp_path):
  folder = folders(name)
  examples = read_squad(shared_data("squad", "dev-v1.1.json"))[:6]
  x = ([e.question for e in examples], [e.context for e in examples])
  y = [e.answers[0] for e in examples]
  tf_keras.utils.set_random_seed(3)
  model = BertSpanLabeler.from_pretrained(
      folder, preprocessor_args=dict(doc_stride=32, max_query_length=16),
      seq_length=64)
  compile_fast(model)
  harness.one_step_lowers_the_loss(model, x, y)
  got = harness.same_after_round_trips(model, x, tmp_path)
  for e, answer, start, end in zip(examples, got["answers"], got["start"],
                                   got["end"]):
    assert e.context[start:end] == answer
  model.export(str(tmp_path / "served"))
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](question=tf.constant(x[0]), context=tf.constant(x[1]))
  assert [a.decode() for a in served["answer"].numpy()] == list(got["answers"])


def test_a_question_that_leaves_roberta_no_room_is_one_config_error(folders):
  # BERT's 3 special tokens leave one piece for the context; RoBERTa's 4 none.
  with pytest.raises(ConfigError, match=r"max_query_length=60 leaves no room "
                     r"for the context in seq_length=64 .*4 special tokens"):
    BertSpanLabeler.from_pretrained(
        folders("roberta"), preprocessor_args=dict(max_query_length=60),
        seq_length=64)


@pytest.mark.parametrize("name", families("multiple_choice"))
def test_multiple_choice(name, folders, tmp_path):
  folder = folders(name)
  a, b, _ = mrpc(8)
  endings = [[b[i], b[(i + 3) % 8], b[(i + 5) % 8]] for i in range(8)]
  y = np.zeros(8, np.int32)
  tf_keras.utils.set_random_seed(4)
  model = BertMultipleChoice.from_pretrained(folder, seq_length=64)
  assert model.encoder.config.family == name
  # Without dropout: this tiny random model scores every ending alike, and
  # one step moves its loss by less than the draw of the dropout masks
  # does, so with them the check would hinge on the seed.
  for layer in model.submodules:
    if isinstance(layer, tf_keras.layers.Dropout):
      layer.rate = 0.0
  compile_fast(model)
  harness.one_step_lowers_the_loss(model, (a, endings), y)
  got = harness.same_after_round_trips(model, (a[:4], endings[:4]), tmp_path)
  assert got["probabilities"].shape == (4, 3)


@pytest.mark.parametrize("name", families("embedder"))
def test_embedder(name, folders, tmp_path):
  folder = folders(name)
  a, _, _ = mrpc(8)
  model = BertTextEmbedder.from_pretrained(folder, pooling="mean",
                                           seq_length=64)
  assert model.encoder.config.family == name
  got = model.predict(a)["embeddings"]
  assert got.shape == (8, 32)
  model.save(str(tmp_path / "saved"))
  loaded = tf_keras.models.load_model(str(tmp_path / "saved"))
  np.testing.assert_allclose(loaded.predict(a)["embeddings"], got, rtol=0,
                             atol=1e-6)
  model.export(str(tmp_path / "served"))
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](text=tf.constant(a))
  np.testing.assert_allclose(served["embeddings"], got, atol=1e-5)
