"""Task models: output shapes, and the shared harness (tests/harness.py):
config round trip, Keras SavedModel revival, a training step, mixed
precision (heads' logits stay float32)."""

import pytest
import tensorflow as tf

from bert import BertEncoder
from bert.models import (BertClassifier, BertMultipleChoice, BertSpanLabeler,
                         BertTokenClassifier)
from conftest import random_inputs, small_config
import harness

X = random_inputs(4, 10)
F32 = tf.float32


def grouped(x):
  """[batch * choices, seq] -> [batch, 2 choices, seq]."""
  return {k: tf.reshape(v, [2, 2, 10]) for k, v in x.items()}


# id: (class, head arguments (not the defaults), input, output shapes,
# float32 outputs under a mixed policy, weights the outputs do not use).
CASES = {
    "BertClassifier": (BertClassifier, dict(num_classes=3, dropout_rate=0.2),
                       X, dict(logits=(4, 3)), dict(logits=F32), ()),
    "BertTokenClassifier": (
        BertTokenClassifier, dict(num_classes=5, dropout_rate=0.2), X,
        dict(logits=(4, 10, 5)), dict(logits=F32),
        ("pooler",)),              # a token head reads sequence_output only
    "BertSpanLabeler": (
        BertSpanLabeler, {}, X, dict(start_logits=(4, 10), end_logits=(4, 10)),
        dict(start_logits=F32, end_logits=F32), ("pooler",)),
    "BertMultipleChoice": (BertMultipleChoice, dict(dropout_rate=0.2),
                           grouped(X), dict(logits=(2, 2)), dict(logits=F32),
                           ()),
}


@pytest.mark.parametrize("case", list(CASES))
def test_harness(case):
  cls, head_args, inputs, shapes, float32_outputs, unused = CASES[case]
  harness.run_model_test(
      cls, dict(encoder=BertEncoder(small_config()), **head_args), inputs,
      expected_output_shape=shapes, no_gradient=unused,
      expected_mixed_output_dtype=float32_outputs)


def test_harness_config_keeps_a_frozen_encoder_frozen():

  def classifier_on_a_frozen_encoder():
    encoder = BertEncoder(small_config())
    encoder.trainable = False            # feature-based fine-tuning
    return BertClassifier(encoder, num_classes=2)

  harness.run_model_test(classifier_on_a_frozen_encoder, None, X,
                         checks=("config",))

