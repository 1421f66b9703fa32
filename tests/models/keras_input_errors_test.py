"""Bad input to the task models' Keras API (issue 42, finding 9): every bad
`x`, `y`, `labels` or `num_classes` stops at once with one line naming the
argument, the index of the bad item and what it is (`bert.models.inputs`,
`ConfigError` for constructor arguments); never a TensorFlow/Keras trace
from inside a step, never a label truncated or a call accepted silently.
Valid inputs of every kind still fit and predict."""

import numpy as np
import pytest
import tf_keras

from bert import BertConfig, BertEncoder, checkpoints
from bert.data.errors import DataError
from bert.models import (BertClassifier, BertMultipleChoice, BertSpanLabeler,
                         BertTokenClassifier)
from bert.models.distiller import Distiller
from bert.models.preprocessors import SpanLabelerPreprocessor
from bert.validation import ConfigError

WORDS = "the a man dog cat is was good bad movie film it not very".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
TEXTS = ["the man", "a dog", "the cat is good", "bad movie"]
SENTENCES = [["the", "man"], ["a", "dog", "is"]]
TAGS = ["O", "B"]
QA = (["who is good"], ["the man is good"])
CHOICES = (["the man", "a dog"], [["is good", "is bad"], ["is bad", "was"]])


def _tiny_checkpoint(folder):
  open(f"{folder}/vocab.txt", "w").write("\n".join(VOCAB) + "\n")
  config = BertConfig(vocab_size=len(VOCAB), hidden_size=16,
                      num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=32)
  return checkpoints.save(BertEncoder(config), f"{folder}/ckpt",
                          vocab_file=f"{folder}/vocab.txt", lower_case=True)


def _build(kind, ckpt):
  if kind == "classifier":
    model = BertClassifier.from_pretrained(ckpt, seq_length=16, num_classes=2)
  elif kind == "named":
    model = BertClassifier.from_pretrained(ckpt, seq_length=16,
                                           labels=["neg", "pos"])
  elif kind == "regression":
    model = BertClassifier.from_pretrained(ckpt, seq_length=16, num_classes=1)
  elif kind == "tagger":
    model = BertTokenClassifier.from_pretrained(ckpt, seq_length=16,
                                                labels=TAGS)
  elif kind == "spans":
    model = BertSpanLabeler.from_pretrained(
        ckpt, seq_length=32,
        preprocessor_args=dict(doc_stride=8, max_query_length=8))
  else:
    model = BertMultipleChoice.from_pretrained(ckpt, seq_length=16)
  model.compile(jit_compile=False)    # (XLA's compile time is most of a fit)
  return model


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
  return _tiny_checkpoint(str(tmp_path_factory.mktemp("tiny")))


@pytest.fixture(scope="module")
def models(ckpt):
  """One model of each kind: every case fails before a step runs, so the
  cases share them."""
  return {kind: _build(kind, ckpt) for kind in (
      "classifier", "named", "regression", "tagger", "spans", "choices")}


def _fit(kind, x, y, **kwargs):
  return lambda m, c: m[kind].fit(x, y, verbose=0, **kwargs)


def _predict(kind, x, **kwargs):
  return lambda m, c: m[kind].predict(x, verbose=0, **kwargs)


def _construct(cls, **kwargs):
  return lambda m, c: cls.from_pretrained(c, seq_length=16, **kwargs)


def _dict_inputs(n):
  ids = np.full([n, 8], 5, np.int32)
  return dict(input_word_ids=ids, input_mask=np.ones_like(ids),
              input_type_ids=np.zeros_like(ids))


# (id, call, error class, exact message). Each was, on 471c388, a
# TensorFlow/Keras error from inside (InvalidArgumentError, "mixed types",
# KeyError: 'pop from an empty set', IndexError), a misleading message or
# silent acceptance (noted per case).
CASES = [
    # The repros of finding 9.
    ("float_label_0.5", _fit("classifier", TEXTS, [0.5, 1, 0, 1]), DataError,
     "y[0] = 0.5 is not a class id: ids are integers in [0, 2)"),  # truncated
    ("float_label_1.7", _fit("classifier", TEXTS, np.array([0, 1.7, 0, 1])),
     DataError, "y[1] = 1.7 is not a class id: ids are integers in [0, 2)"),
    ("labels_fewer_than_num_classes",       # accepted; predict failed later
     _construct(BertClassifier, labels=["a", "b"], num_classes=3), ConfigError,
     "BertClassifier.from_pretrained: labels=['a', 'b'] names 2 classes but "
     "num_classes=3"),
    ("fit_empty", _fit("classifier", [], []), DataError,
     "x is empty: give at least one text"),
    ("predict_empty", _predict("classifier", []), DataError,
     "x is empty: give at least one text"),
    ("none_among_texts", _predict("classifier", ["the man", None]), TypeError,
     "x[1] is None, not a string"),
    ("int_among_texts", _fit("classifier", ["the man", 3], [0, 1]), TypeError,
     "x[1] is 3, not a string"),
    ("none_first_among_texts", _predict("classifier", [None, "a"]), TypeError,
     "x[0] is None, not a string"),
    ("class_id_out_of_range", _fit("classifier", TEXTS, [0, 1, 2, 1]),
     DataError, "y[2] = 2 is out of range: class ids are integers in [0, 2)"),
    ("duplicate_labels", _construct(BertClassifier, labels=["a", "a"]),
     ConfigError, "BertClassifier.from_pretrained.labels repeats a: "
     "['a', 'a']"),                                                 # accepted
    # The same rule at the other entry points, for the other labels.
    ("negative_class_id", _fit("classifier", TEXTS, [0, -1, 1, 1]), DataError,
     "y[1] = -1 is out of range: class ids are integers in [0, 2)"),
    ("evaluate_id_out_of_range",
     lambda m, c: m["classifier"].evaluate(TEXTS, [0, 1, 5, 1], verbose=0),
     DataError, "y[2] = 5 is out of range: class ids are integers in [0, 2)"),
    ("validation_data_id_out_of_range",
     _fit("classifier", TEXTS, [0, 1, 0, 1],
          validation_data=(TEXTS, [0, 1, 7, 1])), DataError,
     "validation_data: y[2] = 7 is out of range: class ids are integers in "
     "[0, 2)"),
    ("keras_dict_inputs_id_out_of_range",
     _fit("classifier", _dict_inputs(3), np.array([0, 1, 4])), DataError,
     "y[2] = 4 is out of range: class ids are integers in [0, 2)"),
    ("labels_more_than_num_classes",        # InvalidArgumentError in fit
     _construct(BertClassifier, labels=["a", "b", "c"], num_classes=2),
     ConfigError, "BertClassifier.from_pretrained: labels=['a', 'b', 'c'] "
     "names 3 classes but num_classes=2"),
    ("one_label_is_a_regression", _construct(BertClassifier, labels=["a"]),
     ConfigError, "BertClassifier.from_pretrained: labels=['a'] names 1 "
     "class(es); a BertClassifier needs at least 2 (num_classes=1, without "
     "labels, is a regression)"),                                   # accepted
    ("num_classes_a_string", _construct(BertClassifier, num_classes="2"),
     ConfigError, "BertClassifier.num_classes must be an integer >= 1, got "
     "'2'"),                       # TypeError: '<' not supported between ...
    ("regression_nan", _fit("regression", TEXTS, [0.5, float("nan"), 1, 1]),
     DataError, "y[1] = nan is not a finite number"),       # fit to a nan loss
    ("regression_string", _fit("regression", TEXTS, ["a", "b", "c", "d"]),
     TypeError, "y[0] is 'a', not a number (a regression target: the model "
     "has num_classes=1)"),                  # "string labels need the names"
    ("evaluate_without_y",
     lambda m, c: m["classifier"].evaluate(TEXTS, verbose=0), TypeError,
     "bert_classifier.evaluate: y is missing; give the labels of x"),
    ("pair_of_two_strings", _predict("classifier", ("the man", "a dog")),
     TypeError, "x is a pair of strings: give a list of texts, or an (a, b) "
     "pair of two lists of texts"),       # read as pairs of single characters
    ("lone_surrogate", _predict("classifier", ["the man", "a \ud800 dog"]),
     DataError, "x[1] is not valid Unicode: a lone surrogate '\\ud800' at "
     "character 2"),
    ("batch_size_zero", _predict("classifier", TEXTS, batch_size=0),
     ConfigError, "BertClassifier.predict.batch_size must be an integer >= 1 or "
     "None, got 0"),                                             # taken as 32
    ("unknown_label_name", _fit("named", TEXTS, ["neg", "pos", "meh", "pos"]),
     DataError, "y: labels ['meh'] are not among ['neg', 'pos'] (first: "
     "y[2])"),
    # NER tags.
    ("tagger_fit_without_tags", _fit("tagger", SENTENCES, None), TypeError,
     "bert_token_classifier.fit: y is missing; give the labels of x"),
    ("tagger_predict_empty", _predict("tagger", []), DataError,
     "x is empty: give at least one sentence (a list of words)"),
    ("tagger_none_word", _predict("tagger", [["the", None]]), TypeError,
     "x[0][1] is None, not a string"),
    ("tagger_labels_and_num_classes",              # IndexError in predict
     _construct(BertTokenClassifier, labels=TAGS, num_classes=5), ConfigError,
     "BertTokenClassifier.from_pretrained: labels=['O', 'B'] names 2 classes "
     "but num_classes=5"),
    ("tagger_duplicate_tags", _construct(BertTokenClassifier,
                                         labels=["O", "B", "O"]),
     ConfigError, "BertTokenClassifier.from_pretrained.labels repeats O: "
     "['O', 'B', 'O']"),
    # SQuAD.
    ("spans_predict_empty", _predict("spans", ([], [])), DataError,
     "x is empty: give at least one question"),
    ("spans_none_context", _predict("spans", (["who"], [None])), TypeError,
     "x[1][0] is None, not a string"),
    ("spans_answer_an_int", _fit("spans", QA, [3]), TypeError,
     "y[0] is 3: give (text, answer_start), a dict of them, or None for no "
     "answer"),
    ("spans_labels", _construct(BertSpanLabeler, labels=["a", "b"]),
     ConfigError, "BertSpanLabeler.from_pretrained: a BertSpanLabeler has no "
     "classes to name; labels=['a', 'b'] is not one of its arguments"),
    # Multiple choice.
    ("choices_label_out_of_range", _fit("choices", CHOICES, [0, 2]),
     DataError, "y[1] = 2 is out of range: class ids are integers in [0, 2)"),
    ("choices_float_label", _fit("choices", CHOICES, [0, 0.5]), DataError,
     "y[1] = 0.5 is not a class id: ids are integers in [0, 2)"),  # accepted
    ("choices_predict_empty", _predict("choices", ([], [])), DataError,
     "x is empty: give at least one context"),
    ("choices_none_context", _predict("choices", (["the", None],
                                                  [["a", "b"], ["a", "b"]])),
     TypeError, "x[0][1] is None, not a string"),
    # Constructors the models are put together with.
    ("preprocessor_of_another_task",                               # accepted
     lambda m, c: BertClassifier(BertEncoder(m["classifier"].encoder.config),
                                 2).attach_preprocessor(
         SpanLabelerPreprocessor(VOCAB, True, seq_length=16,
                                 max_query_length=8)),
     ConfigError, "bert_classifier.attach_preprocessor: a BertClassifier "
     "takes a TextClassifierPreprocessor, not SpanLabelerPreprocessor"),
    ("distiller_teacher_of_another_task",                          # accepted
     lambda m, c: Distiller(m["classifier"], m["tagger"]), ConfigError,
     "Distiller.teacher must be a BertClassifier like the student, got "
     "BertTokenClassifier"),
]


@pytest.mark.parametrize("call,error,message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_named_in_one_line(models, ckpt, call, error, message):
  with pytest.raises(error) as e:
    call(models, ckpt)
  assert str(e.value) == message
  # A library error (the CLI prints these as one line), a ValueError or a
  # TypeError as Python's conventions want.
  assert isinstance(e.value, (DataError, ConfigError))


def _targets(model, x, y):
  """The targets `fit` and `evaluate` feed for raw (x, y)."""
  pre = model.preprocessor
  return pre.targets(pre.encode(x, y, num_classes=getattr(
      model, "num_classes", None)))


@pytest.mark.heavy
def test_valid_labels_of_every_kind_still_fit_and_predict(ckpt):
  """Positive control: class ids as a list, an int array, Keras' [n, 1],
  integral floats, bools and names give the same targets, and so do the
  other tasks' labels; a classifier and a tagger fit, every kind predicts
  (`tests/models/keras_api_test.py` fits every kind on real data); a
  generator of texts and an empty sentence predict too."""
  tf_keras.utils.set_random_seed(0)
  named = _build("named", ckpt)
  expected = np.array([0, 1, 0, 1], np.int32)
  for y in ([0, 1, 0, 1], np.array([0, 1, 0, 1]), np.array([[0], [1], [0], [1]]),
            [0.0, 1.0, 0.0, 1.0], np.array([False, True, False, True]),
            ["neg", "pos", "neg", "pos"], ["neg", 1, 0, "pos"]):
    np.testing.assert_array_equal(_targets(named, TEXTS, y), expected)
  history = named.fit(TEXTS, ["neg", "pos", "neg", "pos"], batch_size=4,
                      verbose=0).history
  assert np.isfinite(history["loss"][0])
  got = named.predict(TEXTS)
  assert set(got["labels"]) <= {"neg", "pos"} and len(got["labels"]) == 4
  # A generator of texts: every text predicted (the first was dropped).
  again = named.predict(t for t in TEXTS)
  np.testing.assert_allclose(again["probabilities"], got["probabilities"],
                             atol=1e-6)
  pairs = _build("classifier", ckpt)
  np.testing.assert_array_equal(_targets(
      pairs, (TEXTS, TEXTS[::-1]), np.array([[0], [1], [1], [0]])),
                                [0, 1, 1, 0])
  assert pairs.predict((TEXTS, TEXTS))["probabilities"].shape == (4, 2)
  regression = _build("regression", ckpt)
  np.testing.assert_array_equal(
      _targets(regression, TEXTS, [0.5, 1, 2.25, np.float32(4)]),
      np.array([0.5, 1, 2.25, 4], np.float32))
  assert regression.predict(TEXTS)["scores"].shape == (4,)
  tagger = _build("tagger", ckpt)
  history = tagger.fit(SENTENCES, [["O", "B"], ["B", "O", "O"]], batch_size=2,
                       verbose=0).history
  assert np.isfinite(history["loss"][0])
  assert [len(t) for t in tagger.predict(SENTENCES + [[]])["tags"]] == [2, 3, 0]
  spans = _build("spans", ckpt)
  positions = _targets(spans, (QA[0] * 3, QA[1] * 3), [
      ("man", 4), dict(text="good", answer_start=11), None])
  assert list(positions["start_positions"][2:]) == [0]      # no answer: [CLS]
  assert (positions["start_positions"][:2] > 0).all()
  assert len(spans.predict(QA)["answers"]) == 1
  choices = _build("choices", ckpt)
  np.testing.assert_array_equal(_targets(choices, CHOICES, [0, 1.0]), [0, 1])
  assert choices.predict(CHOICES)["probabilities"].shape == (2, 2)
