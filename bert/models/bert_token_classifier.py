"""`BertTokenClassifier`: an encoder and a per-token classification head."""

import tf_keras

from bert.layers._util import initializer
from bert.models._base import EncoderHeadModel
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class BertTokenClassifier(EncoderHeadModel):
  """Token classification (e.g. NER) on `sequence_output`.

  Inputs: the encoder's dict. Output: float32 `logits` [batch, seq,
  num_classes]: dropout + dense on every token's final hidden state.
  """

  _head_config = ("num_classes", "dropout_rate")

  def __init__(self, encoder: EncoderScaffold, num_classes: int,
               dropout_rate: float = 0.1, **kwargs):
    dropout = tf_keras.layers.Dropout(dropout_rate)
    dense = tf_keras.layers.Dense(
        num_classes, name="token_logits",
        kernel_initializer=initializer(getattr(
            getattr(encoder, "config", None), "initializer_range", 0.02)))
    to_float32 = tf_keras.layers.Activation("linear", dtype="float32")

    def heads(encoder_outputs, inputs, training):
      del inputs
      sequence = encoder_outputs["sequence_output"]          # [b, s, hidden]
      return dict(logits=to_float32(dense(dropout(sequence, training=training))))

    kwargs.setdefault("name", "bert_token_classifier")
    super().__init__(encoder, heads, **kwargs)
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
