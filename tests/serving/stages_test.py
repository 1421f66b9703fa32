"""A serving export's stages: each traced once, `serving_default` chaining
the stage functions, and the SavedModel answering as the stages do."""

import collections
import functools

import numpy as np
import tensorflow as tf

from bert import export
from bert.serving.stages import STAGES
from conftest import vocab
from serving_helpers import classifier


def test_an_export_traces_each_stage_once_and_serves_them_chained(
    tmp_path, monkeypatch):
  traces = collections.Counter()

  def counted(name, fn):
    @functools.wraps(fn)
    def wrapper(self, *args):
      traces[name] += 1           # once per trace: tracing runs the Python
      return fn(self, *args)
    return wrapper

  for name in ("_preprocess", "_network", "_postprocess_flat", "_serve"):
    monkeypatch.setattr(export.ClassifierServing, name,
                        counted(name, getattr(export.ClassifierServing, name)))
  module = export.ClassifierServing(classifier(), vocab(), True, 64,
                                    ["neg", "pos"], False, (32, 64))
  # As `bert.serving.writer` saves an export.
  tf.saved_model.save(module, str(tmp_path), signatures=module.signatures())
  # A stage traced again while saving (a save keys traces apart), by
  # `serve` tracing the tokenizer and network anew, or by a first call that
  # creates variables (the dropouts' generators) counts 2 or more.
  assert traces == dict.fromkeys(
      ("_preprocess", "_network", "_postprocess_flat", "_serve"), 1), traces

  loaded = tf.saved_model.load(str(tmp_path))
  assert set(loaded.signatures) == {"serving_default", *STAGES}
  texts = tf.constant(["a gripping, funny film", "", "Dull.",
                       "it never finds its feet " * 20])
  served = loaded.signatures["serving_default"](text=texts)
  features = loaded.signatures["preprocess"](text=texts)
  outputs = loaded.signatures["network"](
      **{k: features[k] for k in module.network_inputs})
  staged = loaded.signatures["postprocess"](text=texts, **features, **outputs)
  assert set(served) == set(staged) and "probabilities" in served
  for k, v in served.items():
    np.testing.assert_array_equal(v.numpy(), staged[k].numpy(), err_msg=k)
