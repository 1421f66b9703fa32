"""`BertSpanLabeler`: an encoder and start/end logits for extractive QA."""

from typing import Optional

import tf_keras

from bert.layers.span_head import SpanHead
from bert.models._base import EncoderModel
from bert.models.preprocessors import SpanLabelerPreprocessor
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class BertSpanLabeler(EncoderModel):
  """SQuAD-style span prediction on `sequence_output`.

  Inputs: the encoder's dict. Outputs: float32 `start_logits` and
  `end_logits` [batch, seq] (one dense layer to 2 logits per token, as
  google-research `run_squad.create_model`).
  """

  preprocessor_class = SpanLabelerPreprocessor

  def __init__(self, encoder: EncoderScaffold, **kwargs):
    kwargs.setdefault("name", "bert_span_labeler")
    super().__init__(encoder, **kwargs)
    self.head = SpanHead(initializer_range=self.initializer_range, name="span")
    self._built_with({self.head: [None, None, self.hidden_size]})

  def call(self, inputs, training=None):
    sequence = self._encode(inputs, training)["sequence_output"]  # [b, s, h]
    start_logits, end_logits = self.head(sequence)
    return dict(start_logits=start_logits, end_logits=end_logits)

  def export(self, path: str, precision: Optional[str] = None, gate=None,
             runtime=None) -> dict:
    """Serving SavedModel: `question`, `context` -> `answer` (cut from the
    context), `score`, `start`/`end` (UTF-8 byte offsets): the answer
    `predict` finds, with the preprocessor's `squad` settings; see
    `bert.export.export_span_labeler` (`precision`, `gate`, `runtime`:
    `write_serving`)."""
    from bert import export  # pylint: disable=g-import-not-at-top
    pre = self._needs_preprocessor("export")
    return export.export_span_labeler(
        self, path, pre.vocabulary, pre.lower_case, pre.squad,
        precision=precision, length_buckets=pre.length_buckets, gate=gate,
        runtime=runtime)

  # ---------------------------------------------- Keras training (compile)
  stat_names = ("loss", "start_accuracy", "end_accuracy")
  distillation_kind = "spans"
  main_output = "start_logits"

  def objective(self, x, y, outputs):
    """y: {"start_positions", "end_positions"}: int [batch] token indices
    (0, the [CLS] token, for no answer)."""
    from bert import losses  # pylint: disable=g-import-not-at-top
    return losses.span_stats(outputs["start_logits"], outputs["end_logits"],
                                 y["start_positions"], y["end_positions"],
                                 x["input_mask"])
