"""A SavedModel the library writes is traced without custom gradients, so
loading it registers nothing in TensorFlow's global gradient registry and a
dropped load is freed, while a loaded model still trains with the same
gradients (bert/io/output_saved_model.py; bench/PERFORMANCE.md, "Memory a
load keeps")."""

import gc
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.eager import context
import tf_keras

from bert import BertEncoder, export
from bert.models import BertClassifier
from conftest import random_inputs, registered_gradients, small_config, vocab


def _recorded_gradients(path: str) -> int:
  """The custom gradients a SavedModel records (each load registers them
  again, for good)."""
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    proto.ParseFromString(f.read())
  return sum(len(m.graph_def.library.registered_gradients)
             for m in proto.meta_graphs)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """A classifier (no dropout: training=True gives the same outputs twice)
  and what each of the library's SavedModel writers made of it, beside
  Keras' own save of it (`plain`, outside the library's writers)."""
  model = BertClassifier(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=64, num_hidden_layers=1,
      hidden_act="gelu", hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0)), 2, dropout_rate=0.0)
  model(random_inputs(2, 8), training=False)
  folder = tmp_path_factory.mktemp("saved")
  paths = {k: str(folder / k) for k in ("keras", "hub", "serving", "plain")}
  # The training GELU (a custom gradient) is traced into a SavedModel of a
  # layer's call with training=True: Keras' and the TF Hub export hold one.
  model.save(paths["keras"])
  export.export_encoder(model.encoder, paths["hub"])
  export.export_classifier(model, paths["serving"], vocab(), True, 16,
                           ["no", "yes"], pairs=False)
  tf_keras.Model.save(model, paths["plain"], save_format="tf")
  return model, paths


def test_every_savedmodel_writer_leaves_the_custom_gradients_out(saved):
  _, paths = saved
  assert {k: _recorded_gradients(p) for k, p in paths.items()} == dict(
      keras=0, hub=0, serving=0, plain=_recorded_gradients(paths["plain"]))
  # Negative control: Keras' own save of the same model records the
  # training GELU's gradient.
  assert _recorded_gradients(paths["plain"]) > 0


def _load_and_drop(path):
  loaded = tf_keras.models.load_model(path, compile=False)
  del loaded
  tf_keras.backend.clear_session()
  gc.collect()
  return (registered_gradients(),
          len(context.context().list_function_names()))


def test_loading_again_keeps_nothing(saved):
  _, paths = saved
  before = _load_and_drop(paths["keras"])
  # Neither a gradient registered nor a function left in the eager context.
  assert _load_and_drop(paths["keras"]) == before
  # Negative control: each load of Keras' own SavedModel registers the
  # recorded gradients again, and the functions the load restored stay.
  gradients, functions = _load_and_drop(paths["plain"])
  again = _load_and_drop(paths["plain"])
  assert again[0] == gradients + _recorded_gradients(paths["plain"])
  assert again[1] > functions


def _gradients(model, variables, x):
  with tf.GradientTape() as tape:
    out = model(x, training=True)
    loss = sum(tf.reduce_sum(out[k] ** 2) for k in out
               if k in ("sequence_output", "pooled_output", "logits"))
  return {v.name: tf.convert_to_tensor(g).numpy() for v, g in zip(
      variables, tape.gradient(loss, variables))}


def _assert_same_gradients(got, want):
  assert sorted(got) == sorted(want)
  for name, g in want.items():
    # Both are float32 sums in other orders: equal to 1e-4 of the largest.
    scale = np.abs(g).max()
    assert scale > 0, name
    assert np.abs(got[name] - g).max() <= 1e-4 * scale, name


def test_loaded_models_train_with_the_in_memory_gradients(saved):
  """The TF Hub export (loaded without the library's classes) and the Keras
  SavedModel: TensorFlow's own GELU gradient in place of the hand-written
  one gives the same values."""
  model, paths = saved
  x = {k: tf.constant(v) for k, v in random_inputs(3, 9).items()}
  hub = tf.saved_model.load(paths["hub"])
  _assert_same_gradients(
      _gradients(hub, hub.trainable_variables, x),
      _gradients(model.encoder, model.encoder.trainable_variables, x))
  keras = tf_keras.models.load_model(paths["keras"], compile=False)
  _assert_same_gradients(_gradients(keras, keras.trainable_variables, x),
                         _gradients(model, model.trainable_variables, x))
