"""`MultipleChoicePreprocessor`: (contexts, endings) as one row per choice,
as the SWAG task encodes them; the logits back as the chosen ending.
"""

import tensorflow as tf
import tf_keras

from bert.models import inputs
from bert.models.preprocessor_base import BertPreprocessor


@tf_keras.utils.register_keras_serializable(package="bert")
class MultipleChoicePreprocessor(BertPreprocessor):
  """(contexts, endings) -> one [CLS] context [SEP] ending [SEP] row per
  choice: int32 [n, choices, seq_length], as the SWAG task encodes them.
  `endings`: per context, a list of the same number of strings. Targets:
  the index of the right ending. `predict`: {"choices", "probabilities"}."""

  def check(self, x, y=None, num_classes=None):
    """x: (contexts, endings); y: the index of each context's right ending."""
    del num_classes
    return inputs.contexts_and_endings(x, y)

  def _encode(self, x, y):
    contexts, endings = x
    c = len(endings[0])
    flat = self.tokenizer.encode([t for t in contexts for _ in range(c)],
                                 [e for ends in endings for e in ends],
                                 seq_length=self.seq_length)
    features = {k: v.reshape(len(contexts), c, self.seq_length)
                for k, v in flat.items()}
    if y is not None:
      features["label"] = y
    return features

  def decode(self, outputs, features, x):
    probabilities = tf.nn.softmax(outputs["logits"], -1).numpy()
    return dict(choices=probabilities.argmax(-1), probabilities=probabilities)
