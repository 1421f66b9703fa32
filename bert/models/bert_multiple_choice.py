"""`BertMultipleChoice`: scores each (context, choice) pair, softmax over choices."""

import tensorflow as tf
import tf_keras

from bert.layers.classification_head import ClassificationHead
from bert.models._base import EncoderModel
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class BertMultipleChoice(EncoderModel):
  """SWAG-style multiple choice.

  Inputs: the encoder's three tensors with a choice axis, int32 [batch,
  num_choices, seq]. Each (context, choice) row is encoded on its own and its
  pooled [CLS] vector scored by one dense unit; output float32 `logits`
  [batch, num_choices] (a softmax over them picks the answer).
  """

  _head_config = ("dropout_rate",)

  def __init__(self, encoder: EncoderScaffold, dropout_rate: float = 0.1,
               **kwargs):
    inputs = {k: tf_keras.Input(shape=(None, None), dtype=tf.int32, name=k)
              for k in ("input_word_ids", "input_mask", "input_type_ids")}
    num_choices = tf.shape(inputs["input_word_ids"])[1]
    seq = tf.shape(inputs["input_word_ids"])[2]
    flat = {k: tf.reshape(v, [-1, seq]) for k, v in inputs.items()}  # [b*c, s]
    head = ClassificationHead(
        num_classes=1, dropout_rate=dropout_rate,
        initializer_range=getattr(getattr(encoder, "config", None),
                                  "initializer_range", 0.02),
        name="choice_score")
    scores = head(encoder(flat)["pooled_output"])                  # [b*c, 1]
    logits = tf.reshape(scores, [-1, num_choices])
    kwargs.setdefault("name", "bert_multiple_choice")
    super().__init__(inputs=inputs, outputs=dict(logits=logits), **kwargs)
    self.encoder = encoder
    self.dropout_rate = dropout_rate
