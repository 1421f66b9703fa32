"""`TokenClassifierPreprocessor`: lists of words as a token classifier's
inputs (word pieces, one tag per word, as `bert.data.ner_data` encodes
CoNLL files); its logits back as one tag per word.
"""

from typing import Sequence

import tf_keras

from bert.data import ner_data
from bert.models import inputs
from bert.models.preprocessor_base import BertPreprocessor
from bert.validation import ConfigError, check_labels


@tf_keras.utils.register_keras_serializable(package="bert")
class TokenClassifierPreprocessor(BertPreprocessor):
  """Lists of words (one per sentence) -> word pieces, one tag per word.

  Each word's tag sits on its first word piece (-1 on the others, on
  [CLS]/[SEP] and padding), as `bert.data.ner_data` encodes CoNLL files; a
  sentence longer than the sequence is split at word boundaries into
  several rows. `labels`: the tag names in logit order.
  """

  sequence_outputs = ("logits",)

  def __init__(self, vocabulary, lower_case=None, seq_length=128,
               length_buckets=None, labels: Sequence[str] = (), **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets, **kwargs)
    if not labels:
      raise ConfigError("TokenClassifierPreprocessor needs the tag names: "
                        "from_pretrained(..., labels=[...])")
    self.labels = check_labels(type(self).__name__, labels)

  def check(self, x, y=None, num_classes=None):
    """x: a list of sentences, each a list of words; y: per sentence, one
    tag name per word."""
    del num_classes
    return inputs.tagged_sentences(x, y, self.labels)

  @staticmethod
  def _sentences(words, tags=None):
    return [ner_data.Sentence(list(w), None if tags is None else list(tags[i]),
                              i + 1) for i, w in enumerate(words)]

  def _encode(self, x, y):
    """`y`: the tags, one list of tag names per sentence."""
    sentences = self._sentences(x, y)
    features = ner_data.encode_sentences(sentences, self.tokenizer,
                                         self.seq_length,
                                         self.labels if y is not None else None)
    # The sentences for `decode` (not model inputs).
    return dict(features, sentences=sentences)

  def targets(self, features):
    return features["label_ids"]     # [rows, seq], -1 where no tag

  def decode(self, outputs, features, x):
    """{"tags": one list of tag names per sentence, one per word}."""
    predicted = outputs["logits"].argmax(-1)
    return dict(tags=ner_data.word_predictions(
        features["sentences"], features, predicted, self.labels))

  def get_config(self):
    return dict(super().get_config(), labels=self.labels)
