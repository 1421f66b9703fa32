"""fp32 serving equals the Python predictions on whole dev sets (slow)."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import export
from bert.data import classification_data as cd
from bert.data import squad_examples
from bert.models import BertClassifier, BertSpanLabeler
from conftest import minilm_dir, shared_data


def served(path, inputs, batch_size=32):
  """The export's outputs over all rows, in batches as a server sees them."""
  serve = export.load_serving(path)
  n = len(next(iter(inputs.values())))
  parts = [{k: v.numpy() for k, v in serve(
      **{k: x[i:i + batch_size] for k, x in inputs.items()}).items()}
           for i in range(0, n, batch_size)]
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


@pytest.mark.slow
@pytest.mark.parametrize("task", ["sst-2", "mrpc"])
def test_classifier_serving_equals_predict_on_the_dev_set(task, tmp_path):
  folder = {"sst-2": "SST-2", "mrpc": "MRPC"}[task]
  examples = cd.read_glue(task, shared_data("glue", folder, "dev.tsv"), "eval")
  pairs = examples[0].text_b is not None
  tf_keras.utils.set_random_seed(0)
  model = BertClassifier.from_pretrained(minilm_dir(), labels=["0", "1"])
  model.preprocessor.text_pairs = pairs
  texts = [e.text_a for e in examples]
  x = (texts, [e.text_b for e in examples]) if pairs else texts
  expected = model.predict(x)
  model.export(str(tmp_path / "m"))
  inputs = {"text": texts}
  if pairs:
    inputs["text_b"] = [e.text_b for e in examples]
  got = served(str(tmp_path / "m"), inputs)
  assert len(got["label"]) == len(examples)
  assert np.abs(got["probabilities"] - expected["probabilities"]).max() <= 1e-5
  assert [l.decode() for l in got["label"]] == list(expected["labels"])


@pytest.mark.slow
def test_squad_serving_equals_predict_on_every_held_out_question(tmp_path):
  path = shared_data("squad", "dev-v1.1.json")
  _, held_out = squad_examples.split_articles(
      squad_examples.article_titles(path), 0.8, 42)
  examples = squad_examples.read_squad(path, held_out)
  tf_keras.utils.set_random_seed(0)
  model = BertSpanLabeler.from_pretrained(minilm_dir())
  questions = [e.question for e in examples]
  contexts = [e.context for e in examples]
  expected = model.predict((questions, contexts))["answers"]
  model.export(str(tmp_path / "m"))
  got = served(str(tmp_path / "m"), {"question": questions, "context": contexts})
  answers = [a.decode() for a in got["answer"]]
  differ = [i for i, (a, b) in enumerate(zip(answers, expected)) if a != b]
  assert len(examples) > 2000
  assert not differ, (f"{len(differ)} of {len(examples)} answers differ, e.g. "
                      f"{[(answers[i], expected[i]) for i in differ[:3]]}")
  # Long contexts are answered from later windows too.
  assert any(c.find(a) > 1500 for a, c in zip(answers, contexts) if a)
  assert os.path.exists(os.path.join(str(tmp_path / "m"), "saved_model.pb"))
