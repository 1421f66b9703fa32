"""`BertTokenClassifier`: an encoder and a per-token classification head."""

from typing import Optional

import tensorflow as tf
import tf_keras

from bert.layers.dropout import Dropout
from bert.layers._util import initializer
from bert.models import inputs
from bert.models._base import EncoderModel
from bert.models.preprocessors import TokenClassifierPreprocessor
from bert.networks.encoder_scaffold import EncoderScaffold
from bert.validation import check_float, check_int


@tf_keras.utils.register_keras_serializable(package="bert")
class BertTokenClassifier(EncoderModel):
  """Token classification (e.g. NER) on `sequence_output`.

  Inputs: the encoder's dict. Output: float32 `logits` [batch, seq,
  num_classes]: dropout + dense on every token's final hidden state.
  """

  _head_config = ("num_classes", "dropout_rate")
  preprocessor_class = TokenClassifierPreprocessor
  needs_labels = True

  def __init__(self, encoder: EncoderScaffold, num_classes: int,
               dropout_rate: float = 0.1, **kwargs):
    kwargs.setdefault("name", "bert_token_classifier")
    num_classes = check_int("BertTokenClassifier", "num_classes", num_classes,
                            1)
    check_float("BertTokenClassifier", "dropout_rate",
                dropout_rate, 0.0, 1.0, max_open=True)
    super().__init__(encoder, **kwargs)
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.dropout = Dropout(dropout_rate)
    self.dense = tf_keras.layers.Dense(
        num_classes, name="token_logits",
        kernel_initializer=initializer(self.initializer_range))
    self._built_with({self.dense: [None, None, self.hidden_size]})

  def call(self, inputs, training=None):
    sequence = self._encode(inputs, training)["sequence_output"]  # [b, s, h]
    logits = self.dense(self.dropout(sequence, training=training))
    return dict(logits=tf.cast(logits, tf.float32))

  def export(self, path: str, precision: Optional[str] = None, gate=None,
             runtime=None) -> dict:
    """Serving SavedModel: `text` -> `words` (whitespace-split) and `tags`;
    see `bert.export.export_tagger` (`precision`, `gate`,
    `runtime`: `bert.export.write_serving`)."""
    from bert import export  # pylint: disable=g-import-not-at-top
    pre = self._needs_preprocessor("export")
    return export.export_tagger(self, path, pre.vocabulary, pre.lower_case,
                                pre.seq_length, pre.labels, precision=precision,
                                length_buckets=pre.length_buckets, gate=gate,
                                runtime=runtime)

  # ---------------------------------------------- Keras training (compile)
  stat_names = ("loss", "accuracy")
  distillation_kind = "tokens"

  def objective(self, x, y, outputs):
    """y: int label ids [batch, seq], -1 where no tag is predicted."""
    from bert import losses  # pylint: disable=g-import-not-at-top
    return losses.token_stats(outputs["logits"], y)

  def check_targets(self, x, y):
    """y: tag ids [batch, seq] in [0, num_classes), -1 where untagged."""
    inputs.ids_in_range(y, "y", -1, self.num_classes)
