"""`BertTextEmbedder.compile()` / `fit` / `evaluate`: sentence-transformers'
recipe, each loss wired to the right columns, and data that does not fit
the loss refused in one line."""

import numpy as np
import pytest
import tf_keras

from bert import embedding_losses
from bert.models import BertTextEmbedder
from bert.models.embedding_objective import default_recipe, unique_texts
from bert.validation import ConfigError
from tests.conftest import one_line
from tests.models.text_embedder_test import _tiny_st_folder

QUESTIONS = ["where do penguins live", "who painted the kitchen",
             "when does the train leave", "what did the police do",
             "why was the flight cancelled", "how salty is the soup"]
ANSWERS = ["Penguins live in cold places near the south pole.",
           "She painted the kitchen yellow last spring.",
           "The train leaves at six in the morning.",
           "The police arrested the thief after a chase.",
           "The storm led to the flight being called off.",
           "There is far too much salt in the soup."]
NEGATIVES = ANSWERS[1:] + ANSWERS[:1]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
  return _tiny_st_folder(str(tmp_path_factory.mktemp("st")))[0]


def test_the_default_recipe_is_sentence_transformers_trainers():
  # Their defaults as the dataclass declares them (an instance needs
  # accelerate, which the test extra does not install).
  import dataclasses  # pylint: disable=g-import-not-at-top
  import types  # pylint: disable=g-import-not-at-top
  from sentence_transformers import (  # pylint: disable=g-import-not-at-top
      SentenceTransformerTrainingArguments as Arguments)
  def default(f):
    if f.default is not dataclasses.MISSING:
      return f.default
    if f.default_factory is not dataclasses.MISSING:
      return f.default_factory()
    return None
  theirs = types.SimpleNamespace(**{f.name: default(f) for f in
                                    dataclasses.fields(Arguments)})
  ours = default_recipe()
  assert ours.learning_rate == theirs.learning_rate
  assert ours.weight_decay == theirs.weight_decay
  assert ours.epsilon == theirs.adam_epsilon
  assert (ours.beta_1, ours.beta_2) == (theirs.adam_beta1, theirs.adam_beta2)
  assert ours.clip_norm == theirs.max_grad_norm
  assert str(theirs.lr_scheduler_type).endswith("linear") and ours.power == 1
  assert ours.end_learning_rate == 0
  assert not theirs.warmup_steps and not theirs.warmup_ratio
  assert ours.warmup_fraction == 0


@pytest.mark.heavy
def test_evaluate_loss_is_the_ranking_loss_of_encode(folder):
  # The columns' batch -> embeddings -> loss wiring, against the loss of
  # `encode`'s vectors (no dropout in evaluate).
  model = BertTextEmbedder.from_pretrained(folder)
  model.compile(loss="symmetric_ranking", scale=7.0)
  pre = model.preprocessor
  features = pre.encode((QUESTIONS, ANSWERS, NEGATIVES))
  got = model.evaluate(pre.dataset(features, batch_size=len(QUESTIONS)),
                       return_dict=True, verbose=0)
  a, p, n = (model.encode(c) for c in (QUESTIONS, ANSWERS, NEGATIVES))
  stats = embedding_losses.ranking_stats(a, [p, n], scale=7.0, symmetric=True)
  want = float(stats["loss"][0] / stats["loss"][1])
  assert abs(got["loss"] - want) <= 1e-5
  # Control: the one-directional loss is another number.
  plain = embedding_losses.ranking_stats(a, [p, n], scale=7.0)
  assert abs(float(plain["loss"][0] / plain["loss"][1]) - want) > 1e-3


@pytest.mark.heavy
@pytest.mark.parametrize("loss,x,y", [
    ("ranking", (QUESTIONS, ANSWERS), None),
    pytest.param("triplet", (QUESTIONS, ANSWERS, NEGATIVES), None,
                 marks=pytest.mark.slow),
    ("cosent", (QUESTIONS + QUESTIONS, ANSWERS + NEGATIVES),
     [1.0] * 6 + [0.0] * 6),
])
def test_fit_lowers_each_loss(folder, loss, x, y):
  tf_keras.utils.set_random_seed(0)
  model = BertTextEmbedder.from_pretrained(folder)
  model.compile(optimizer=tf_keras.optimizers.Adam(1e-3), loss=loss,
                jit_compile=False)
  history = model.fit(x, y, batch_size=6, epochs=5, verbose=0).history
  assert min(history["loss"][-2:]) < history["loss"][0], history
  assert ("accuracy" in history) == (loss != "cosent")


@pytest.mark.heavy
def test_auto_loss_follows_the_data(folder):
  model = BertTextEmbedder.from_pretrained(folder)
  model.compile(jit_compile=False)
  model.fit((QUESTIONS, ANSWERS), batch_size=3, verbose=0)
  assert model._loss_name == "ranking"
  model.fit((QUESTIONS, ANSWERS), [0.5] * 6, batch_size=3, verbose=0)
  assert model._loss_name == "cosent"


@pytest.mark.parametrize("loss,x,y,fragment", [
    ("cosent", (QUESTIONS, ANSWERS), None, "loss='cosent' takes x=(a, b)"),
    ("triplet", (QUESTIONS, ANSWERS), None, "loss='triplet' takes"),
    ("ranking", QUESTIONS, None, "loss='ranking' takes"),
    ("ranking", (QUESTIONS, ANSWERS), [1.0] * 6, "loss='ranking' takes"),
])
def test_data_that_does_not_fit_the_loss_is_one_line(folder, loss, x, y,
                                                     fragment):
  model = BertTextEmbedder.from_pretrained(folder)
  model.compile(loss=loss)
  with pytest.raises(ConfigError) as e:
    model.fit(x, y, verbose=0)
  one_line(e, fragment)


def test_bad_compile_arguments_are_one_line(folder):
  model = BertTextEmbedder.from_pretrained(folder)
  with pytest.raises(ConfigError) as e:
    model.compile(loss="contrastive")
  one_line(e, "loss", "'ranking'")
  with pytest.raises(ConfigError) as e:
    model.compile(scale=0)
  one_line(e, "scale")


def test_xla_is_off_unless_asked_even_where_auto_would_pick_it(folder):
  from bert import precision  # pylint: disable=g-import-not-at-top
  model = BertTextEmbedder.from_pretrained(folder)
  # The choice `precision="auto"` makes on a CPU without bf16 (fp32, XLA
  # on: faster for the fixed-shape classifiers); the other models follow it.
  xla_choice = precision.choose("auto", cpu_flags=frozenset(), onednn=True,
                                gpu=None)
  assert xla_choice.jit_compile
  object.__setattr__(model, "precision_choice", xla_choice)
  model.compile()
  assert model.jit_compile is False
  model.compile(jit_compile=True)            # asked for: on
  assert model.jit_compile is True


def test_retrieval_evaluation_counts_distinct_documents(folder):
  model = BertTextEmbedder.from_pretrained(folder)
  docs = ANSWERS + ANSWERS[:2]          # two questions share documents
  result = model.evaluate((QUESTIONS + QUESTIONS[:2], docs))
  assert 0 <= result["recall@1"] <= 1 and "mrr@6" in result   # 6 documents
  corpus, ids = unique_texts(docs)
  assert corpus == ANSWERS and list(ids) == [0, 1, 2, 3, 4, 5, 0, 1]
  # Identical queries and documents retrieve themselves.
  assert model.evaluate((ANSWERS, ANSWERS))["recall@1"] == 1.0
  sts = model.evaluate((ANSWERS, ANSWERS[::-1]), np.linspace(0, 1, 6))
  assert set(sts) == {"pearson", "spearman"}
