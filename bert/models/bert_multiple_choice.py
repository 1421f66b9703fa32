"""`BertMultipleChoice`: scores each (context, choice) pair, softmax over choices."""

import tensorflow as tf
import tf_keras

from bert.layers.classification_head import ClassificationHead
from bert.models import inputs
from bert.models._base import EncoderModel
from bert.models.preprocessors import MultipleChoicePreprocessor
from bert.features import ENCODER_INPUTS
from bert.networks.encoder_scaffold import EncoderScaffold
from bert.validation import check_float


@tf_keras.utils.register_keras_serializable(package="bert")
class BertMultipleChoice(EncoderModel):
  """SWAG-style multiple choice.

  Inputs: the encoder's three tensors with a choice axis, int32 [batch,
  num_choices, seq]. Each (context, choice) row is encoded on its own and its
  pooled [CLS] vector scored by one dense unit; output float32 `logits`
  [batch, num_choices] (a softmax over them picks the answer). The encoder's
  last block computes the [CLS] rows only (`pooled_only`).
  """

  _head_config = ("dropout_rate",)
  input_rank = 3
  preprocessor_class = MultipleChoicePreprocessor

  def __init__(self, encoder: EncoderScaffold, dropout_rate: float = 0.1,
               **kwargs):
    kwargs.setdefault("name", "bert_multiple_choice")
    check_float("BertMultipleChoice", "dropout_rate",
                dropout_rate, 0.0, 1.0, max_open=True)
    super().__init__(encoder, **kwargs)
    self.dropout_rate = dropout_rate
    self.head = ClassificationHead(
        num_classes=1, dropout_rate=dropout_rate,
        initializer_range=self.initializer_range,
        name="choice_score")
    self._built_with({self.head: [None, self.hidden_size]})

  def call(self, inputs, training=None):
    if not isinstance(inputs, dict) or any(k not in inputs for k in ENCODER_INPUTS):
      got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
      raise ValueError(f"{self.name} expects a dict with keys {list(ENCODER_INPUTS)}"
                       f", each [batch, num_choices, seq]; got {got}")
    num_choices = tf.shape(inputs["input_word_ids"])[1]
    seq = tf.shape(inputs["input_word_ids"])[2]
    # Each (context, choice) row on its own: [batch * choices, seq].
    flat = {k: tf.reshape(inputs[k], [-1, seq]) for k in ENCODER_INPUTS}
    pooled = self._encode(flat, training, pooled_only=True)["pooled_output"]
    scores = self.head(pooled, training=training)             # [b * c, 1]
    return dict(logits=tf.reshape(scores, [-1, num_choices]))

  # ---------------------------------------------- Keras training (compile)
  stat_names = ("loss", "accuracy")
  distillation_kind = "classification"

  def objective(self, x, y, outputs):
    """y: int index of the right choice [batch]."""
    from bert import losses  # pylint: disable=g-import-not-at-top
    return losses.classification_stats(outputs["logits"], y)

  def check_targets(self, x, y):
    """y: the index of the right choice, in [0, num_choices)."""
    shape = getattr(x.get("input_word_ids"), "shape", None)
    inputs.class_ids(y, "y", shape[1] if shape is not None and len(shape) == 3
                     else None)
