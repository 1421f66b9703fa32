"""`BertClassifier`: an encoder and a classification/regression head."""

import tensorflow as tf
import tf_keras

from bert.layers.classification_head import ClassificationHead
from bert.models._base import EncoderHeadModel
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class BertClassifier(EncoderHeadModel):
  """Sentence(-pair) classification or regression on `pooled_output`.

  Inputs: the encoder's dict (`input_word_ids`, `input_mask`,
  `input_type_ids`). Output: float32 `logits` [batch, num_classes]
  (num_classes = 1 for regression: the predicted value), as google-research
  `run_classifier.create_model`: dropout + dense on the pooled [CLS] vector.
  """

  _head_config = ("num_classes", "dropout_rate")

  def __init__(self, encoder: EncoderScaffold, num_classes: int,
               dropout_rate: float = 0.1, **kwargs):
    inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k)
              for k in ("input_word_ids", "input_mask", "input_type_ids")}
    head = ClassificationHead(
        num_classes=num_classes, dropout_rate=dropout_rate,
        initializer_range=getattr(getattr(encoder, "config", None),
                                  "initializer_range", 0.02),
        name="classifier")
    logits = head(encoder(inputs)["pooled_output"])
    kwargs.setdefault("name", "bert_classifier")
    super().__init__(inputs=inputs, outputs=dict(logits=logits), **kwargs)
    self.encoder = encoder
    self.head = head
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
