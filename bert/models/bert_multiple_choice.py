"""`BertMultipleChoice`: scores each (context, choice) pair, softmax over choices."""

import tensorflow as tf
import tf_keras

from bert.layers.classification_head import ClassificationHead
from bert.models._base import ENCODER_KEYS, EncoderModel
from bert.networks.encoder_scaffold import EncoderScaffold


def _score_choices(inputs, encode, head, training):
  """logits [batch, num_choices]: each (context, choice) row of inputs
  [batch, num_choices, seq] encoded on its own, its pooled vector scored."""
  num_choices = tf.shape(inputs["input_word_ids"])[1]
  seq = tf.shape(inputs["input_word_ids"])[2]
  flat = {k: tf.reshape(inputs[k], [-1, seq]) for k in ENCODER_KEYS}  # [b*c, s]
  scores = head(encode(flat, training=training)["pooled_output"],
                training=training)                                # [b*c, 1]
  return dict(logits=tf.reshape(scores, [-1, num_choices]))


@tf_keras.utils.register_keras_serializable(package="bert")
class BertMultipleChoice(EncoderModel):
  """SWAG-style multiple choice.

  Inputs: the encoder's three tensors with a choice axis, int32 [batch,
  num_choices, seq]. Each (context, choice) row is encoded on its own and its
  pooled [CLS] vector scored by one dense unit; output float32 `logits`
  [batch, num_choices] (a softmax over them picks the answer). The encoder's
  last block computes the [CLS] rows only (`EncoderScaffold.pooled`).
  """

  _head_config = ("dropout_rate",)

  def __init__(self, encoder: EncoderScaffold, dropout_rate: float = 0.1,
               **kwargs):
    inputs = {k: tf_keras.Input(shape=(None, None), dtype=tf.int32, name=k)
              for k in ENCODER_KEYS}
    head = ClassificationHead(
        num_classes=1, dropout_rate=dropout_rate,
        initializer_range=getattr(getattr(encoder, "config", None),
                                  "initializer_range", 0.02),
        name="choice_score")
    outputs = _score_choices(
        inputs, lambda f, training: encoder(f, training=training), head, None)
    kwargs.setdefault("name", "bert_multiple_choice")
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.encoder = encoder
    self.head = head
    self.dropout_rate = dropout_rate

  def call(self, inputs, training=None, mask=None):
    pooled = getattr(self.encoder, "pooled", None)
    if (pooled is None or not isinstance(inputs, dict)
        or any(k not in inputs for k in ENCODER_KEYS)):
      # The functional graph (which also reports malformed inputs).
      return super().call(inputs, training=training, mask=mask)
    inputs = {k: tf.cast(inputs[k], tf.int32) for k in ENCODER_KEYS}
    return _score_choices(inputs, pooled, self.head, training)
