"""Multiple choice (SWAG-style): pick the ending that follows a context.

Each choice is encoded as the pair ([CLS] context [SEP] start + ending [SEP]),
scored by `BertMultipleChoice`, and the softmax over choices trained with
cross-entropy; the metric is accuracy; predict mode writes
`predictions.csv` (id, the probability of each choice, the chosen index).
"""

import os
from typing import Optional

import gin
import numpy as np
import tensorflow as tf

from bert.data import classification_data as cd
from bert.models.bert_multiple_choice import BertMultipleChoice
from bert.models.preprocessors import MultipleChoicePreprocessor
from bert.losses import softmax_stats
from bert.tasks.configs import (EncoderSource, FinetuningInputs, HeadConfig,
                                MultipleChoiceData, ScheduleConfig, or_default)
from bert.tasks.finetuning import FinetuningTask
from bert.data.errors import DataError
from bert.validation import ConfigError


@gin.configurable
class MultipleChoiceTask(FinetuningTask):
  """Args:
    data: a `MultipleChoiceData` (SWAG CSV files, num_choices).
    encoder, inputs, head, schedule: see `FinetuningTask`.
  """

  loss_names = ("loss",)
  stat_names = ("loss", "accuracy")

  def __init__(self, data: Optional[MultipleChoiceData] = None,
               encoder: Optional[EncoderSource] = None,
               inputs: Optional[FinetuningInputs] = None,
               head: Optional[HeadConfig] = None,
               schedule: Optional[ScheduleConfig] = None):
    data = or_default("MultipleChoiceTask", "data", data, MultipleChoiceData)
    self.num_choices = data.num_choices
    self._examples = {}
    super().__init__(data, encoder, inputs, head, schedule)

  def examples(self, split):
    if split not in self._examples:
      if not self.files[split]:
        raise ConfigError(f"MultipleChoiceData.{split}_file is not set")
      self._examples[split] = cd.read_swag(self.files[split], self.num_choices)
    return self._examples[split]

  def row_origins(self, split):
    return [e.guid for e in self.examples(split)]

  def records_task_name(self):
    return f"MultipleChoiceTask(num_choices={self.num_choices})"

  def encode(self, split):
    return self.encode_examples(self.examples(split), split)

  def encode_chunks(self, split, chunk_rows, select=None):
    """`encode(split)` for `chunk_rows` examples at a time; chunk k only if
    `select(k)`, else None."""
    examples = self.examples(split)
    for k, start in enumerate(range(0, len(examples), chunk_rows)):
      yield (self.encode_examples(examples[start:start + chunk_rows], split)
             if select is None or select(k) else None)

  def encode_examples(self, examples, split):
    c = self.num_choices
    contexts = [e.context for e in examples for _ in range(c)]
    endings = [f"{e.start} {ending}".strip() for e in examples for ending in e.endings]
    flat = self.tokenizer.encode(contexts, endings, self.seq_length)
    out = {k: v.reshape(len(examples), c, self.seq_length) for k, v in flat.items()}
    if split != "predict":
      missing = [e.guid for e in examples if e.label is None]
      if missing:
        raise DataError(f"{self.files[split]}: example {missing[0]} has no "
                        "label")
      out["label"] = np.array([e.label for e in examples], np.int32)
    return out

  def preprocessor(self):
    return MultipleChoicePreprocessor(**self._preprocessor_args())

  def build_model(self):
    return BertMultipleChoice(self.build_checkpoint().encoder,
                              dropout_rate=self.head.dropout_rate)

  def loss_denominators(self, features):
    return dict(loss=tf.cast(tf.shape(features["label"])[0], tf.float32))

  def compute_stats(self, features, outputs):
    return softmax_stats(outputs["logits"], features["label"])   # [b, choices]

  # What `predict` writes (removed before a predict run).
  prediction_files = ("predictions.csv",)

  def predict(self, model, output_dir):
    probabilities = tf.nn.softmax(self.logits(model, "predict"), -1).numpy()
    path = os.path.join(output_dir, "predictions.csv")
    with open(path, "w", encoding="utf-8") as f:
      f.write("id," + ",".join(f"p{i}" for i in range(self.num_choices))
              + ",prediction\n")
      for e, p in zip(self.examples("predict"), probabilities):
        f.write(f"{e.guid}," + ",".join(f"{v:.6f}" for v in p)
                + f",{int(p.argmax())}\n")
    return path
