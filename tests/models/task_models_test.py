"""Task models: output shapes and get_config/from_config round trips."""

import numpy as np
import tensorflow as tf
import tf_keras

from bert import BertEncoder
from bert.models import (BertClassifier, BertMultipleChoice, BertSpanLabeler,
                         BertTokenClassifier)
from conftest import random_inputs, small_config


def round_trip(model, inputs):
  clone = type(model).from_config(model.get_config())
  clone.set_weights(model.get_weights())
  a, b = model(inputs, training=False), clone(inputs, training=False)
  for k in a:
    np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), atol=1e-6)
  return a


def test_task_models_round_trip_with_shapes():
  x = random_inputs(4, 10)
  out = round_trip(BertClassifier(BertEncoder(small_config()), 3), x)
  assert out["logits"].shape == (4, 3) and out["logits"].dtype == tf.float32
  out = round_trip(BertTokenClassifier(BertEncoder(small_config()), 5), x)
  assert out["logits"].shape == (4, 10, 5)
  out = round_trip(BertSpanLabeler(BertEncoder(small_config())), x)
  assert out["start_logits"].shape == out["end_logits"].shape == (4, 10)
  grouped = {k: tf.reshape(v, [2, 2, 10]) for k, v in x.items()}
  out = round_trip(BertMultipleChoice(BertEncoder(small_config())), grouped)
  assert out["logits"].shape == (2, 2)
  config = BertClassifier(BertEncoder(small_config()), 3, dropout_rate=0.2).get_config()
  assert config["num_classes"] == 3 and config["dropout_rate"] == 0.2
  assert tf_keras.layers.deserialize(
      tf_keras.layers.serialize(BertClassifier(BertEncoder(small_config()), 2))
  ).num_classes == 2
