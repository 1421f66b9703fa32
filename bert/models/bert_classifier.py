"""`BertClassifier`: an encoder and a classification/regression head."""

import tf_keras

from bert.layers.classification_head import ClassificationHead
from bert.models._base import EncoderHeadModel, per_example
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class BertClassifier(EncoderHeadModel):
  """Sentence(-pair) classification or regression on `pooled_output`.

  Inputs: the encoder's dict (`input_word_ids`, `input_mask`,
  `input_type_ids`). Output: float32 `logits` [batch, num_classes]
  (num_classes = 1 for regression: the predicted value), as google-research
  `run_classifier.create_model`: dropout + dense on the pooled [CLS] vector.
  Packed rows (with `cls_positions` [batch, k]): logits [batch, k, classes],
  one per packed example. The encoder's last block computes the [CLS] rows
  only (`EncoderScaffold.pooled`).
  """

  _head_config = ("num_classes", "dropout_rate")

  def __init__(self, encoder: EncoderScaffold, num_classes: int,
               dropout_rate: float = 0.1, **kwargs):
    head = ClassificationHead(
        num_classes=num_classes, dropout_rate=dropout_rate,
        initializer_range=getattr(getattr(encoder, "config", None),
                                  "initializer_range", 0.02),
        name="classifier")

    def heads(encoder_outputs, inputs, training):
      del inputs
      return dict(logits=per_example(head, encoder_outputs["pooled_output"],
                                     training))

    kwargs.setdefault("name", "bert_classifier")
    super().__init__(encoder, heads, pooled_only=True, **kwargs)
    self.head = head
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
