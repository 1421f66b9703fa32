"""`TextClassifierPreprocessor`: strings, or (a, b) pairs of string lists,
as a text classifier's inputs; its logits back as labels and probabilities.
"""

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert.data.errors import DataError
from bert.models import inputs
from bert.models.preprocessor_base import BertPreprocessor
from bert.validation import check_labels


@tf_keras.utils.register_keras_serializable(package="bert")
class TextClassifierPreprocessor(BertPreprocessor):
  """Strings, or (a, b) pairs of string lists -> [CLS] a [SEP] (b [SEP]).

  `labels`: class names in logit order; `predict` then returns them (and
  `fit` accepts them as targets, besides class ids). `text_pairs`: whether
  the model takes (a, b) pairs; None until `fit` has seen its inputs (the
  serving export needs it).
  """

  def __init__(self, vocabulary, lower_case=None, seq_length=128,
               length_buckets=None, labels: Optional[Sequence[str]] = None,
               text_pairs: Optional[bool] = None, **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets, **kwargs)
    self.labels = check_labels(type(self).__name__, labels) or None
    self.text_pairs = text_pairs

  def call(self, inputs):
    """In-graph: string [batch] (or a pair of them) -> the encoder inputs,
    int32 [batch, seq_length]."""
    segments = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    return self.tokenizer.packer([self.tokenizer.layer(s) for s in segments],
                                 seq_length=self.seq_length)

  def check(self, x, y=None, num_classes=None):
    """x: a list of texts, or an (a, b) pair of lists; y: class ids, or
    names in `labels` (regression, num_classes=1: finite numbers)."""
    columns = inputs.text_columns(x)
    if y is None:
      return columns, None
    if num_classes is None and self.labels:
      num_classes = len(self.labels)
    if num_classes == 1:
      y = inputs.regression_targets(y, "y")
    elif (num_classes is None and inputs.label_array(y, "y").dtype.kind
          == "f"):
      # The head is unknown (a direct `encode`): fractions are targets.
      y = inputs.regression_targets(y, "y")
    else:
      y = inputs.class_ids(y, "y", num_classes, self.labels)
    inputs.same_count(len(y), "y: {} labels", len(columns[0]), "texts in x")
    return columns, y

  def _encode(self, x, y):
    pairs = len(x) == 2
    if self.text_pairs is None and y is not None:
      self.text_pairs = pairs           # what the model is trained on
    elif self.text_pairs is not None and pairs != self.text_pairs:
      wanted = "(a, b) pairs of texts" if self.text_pairs else "single texts"
      raise DataError(f"x: the model takes {wanted}; got "
                      + ("pairs" if pairs else "single texts"))
    features = self.tokenizer.encode(*x, seq_length=self.seq_length)
    if y is not None:
      features["label"] = y
    return features

  def decode(self, outputs, features, x):
    """{"labels", "probabilities"} (regression: {"scores"})."""
    logits = outputs["logits"]
    if logits.shape[-1] == 1:
      return dict(scores=logits[:, 0])
    probabilities = tf.nn.softmax(logits, -1).numpy()
    ids = probabilities.argmax(-1)
    labels = (np.asarray(self.labels, dtype=object)[ids] if self.labels
              else ids)
    return dict(labels=labels, probabilities=probabilities)

  def get_config(self):
    return dict(super().get_config(), labels=self.labels,
                text_pairs=self.text_pairs)
