"""`BertSpanLabeler`: an encoder and start/end logits for extractive QA."""

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
    head = SpanHead(initializer_range=getattr(
        getattr(encoder, "config", None), "initializer_range", 0.02), name="span")

    def heads(encoder_outputs, inputs, training):
      del inputs, training
      start_logits, end_logits = head(encoder_outputs["sequence_output"])
      return dict(start_logits=start_logits, end_logits=end_logits)

    kwargs.setdefault("name", "bert_span_labeler")
    super().__init__(encoder, heads, **kwargs)
