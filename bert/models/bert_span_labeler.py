"""`BertSpanLabeler`: an encoder and start/end logits for extractive QA."""

import tensorflow as tf
import tf_keras

from bert.layers.span_head import SpanHead
from bert.models._base import EncoderHeadModel
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class BertSpanLabeler(EncoderHeadModel):
  """SQuAD-style span prediction on `sequence_output`.

  Inputs: the encoder's dict. Outputs: float32 `start_logits` and
  `end_logits` [batch, seq] (one dense layer to 2 logits per token, as
  google-research `run_squad.create_model`).
  """

  _head_config = ()

  def __init__(self, encoder: EncoderScaffold, **kwargs):
    inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k)
              for k in ("input_word_ids", "input_mask", "input_type_ids")}
    head = SpanHead(initializer_range=getattr(
        getattr(encoder, "config", None), "initializer_range", 0.02), name="span")
    start_logits, end_logits = head(encoder(inputs)["sequence_output"])
    kwargs.setdefault("name", "bert_span_labeler")
    super().__init__(inputs=inputs, outputs=dict(start_logits=start_logits,
                                                 end_logits=end_logits), **kwargs)
    self.encoder = encoder
