"""`BertClassifier`: an encoder and a classification/regression head."""

import tensorflow as tf
import tf_keras

from bert.layers.classification_head import ClassificationHead
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class BertClassifier(tf_keras.Model):
  """Sentence(-pair) classification or regression on `pooled_output`.

  Inputs: the encoder's dict (`input_word_ids`, `input_mask`,
  `input_type_ids`). Output: float32 `logits` [batch, num_classes]
  (num_classes = 1 for regression: the predicted value), as google-research
  `run_classifier.create_model`: dropout + dense on the pooled [CLS] vector.
  """

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

  def get_config(self):
    return dict(encoder=tf_keras.layers.serialize(self.encoder),
                num_classes=self.num_classes, dropout_rate=self.dropout_rate,
                name=self.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    encoder = tf_keras.layers.deserialize(config.pop("encoder"),
                                          custom_objects=custom_objects)
    return cls(encoder, **config)
