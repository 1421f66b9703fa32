"""Sentence and sentence-pair classification and regression (GLUE and own data).

As google-research `run_classifier.py`: [CLS] a [SEP] (b [SEP]) truncated to
`seq_length`, dropout + dense on `pooled_output`, softmax cross-entropy (or
squared error with one output for regression, e.g. STS-B); metrics per GLUE
task (accuracy, F1, Matthews correlation, Pearson/Spearman); predict mode
writes `test_results.tsv` with one line of class probabilities per example.
"""

import os
from typing import List, Optional

import gin
import numpy as np
import tensorflow as tf

from bert.data import classification_data as cd
from bert.models.bert_classifier import BertClassifier
from bert.losses import example_weights
from bert.models.preprocessors import TextClassifierPreprocessor
from bert.losses import classification_stats
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs, HeadConfig, ScheduleConfig,
                                or_default)
from bert.tasks.finetuning import FinetuningTask
from bert.validation import ConfigError
from bert.metrics import classification_metrics, regression_metrics


@gin.configurable
class ClassificationTask(FinetuningTask):
  """Fine-tunes a BERT encoder on a GLUE task or on generic labelled files.

  Args:
    data: a `ClassificationData` (a GLUE task, or files, columns and labels).
    encoder, inputs, head, schedule: see `FinetuningTask`.
  """

  loss_names = ("loss",)
  packable = True
  stat_names = ("loss", "accuracy")

  def __init__(self, data: Optional[ClassificationData] = None,
               encoder: Optional[EncoderSource] = None,
               inputs: Optional[FinetuningInputs] = None,
               head: Optional[HeadConfig] = None,
               schedule: Optional[ScheduleConfig] = None):
    data = or_default("ClassificationTask", "data", data, ClassificationData)
    self.layout = cd.glue_layout(data.glue_task) if data.glue_task else None
    if self.layout is not None:
      self.labels = (list(self.layout.labels) if self.layout.labels is not None
                     else None)
      self.metric_names = tuple(self.layout.metrics)
    else:
      self.labels = None if data.regression else list(data.labels)
      self.metric_names = (("pearson", "spearman") if data.regression
                           else ("accuracy", "f1") if len(self.labels) == 2
                           else ("accuracy",))
    self.regression = self.labels is None
    self.num_classes = 1 if self.regression else len(self.labels)
    if self.regression:
      self.stat_names = ("loss",)
    super().__init__(data, encoder, inputs, head, schedule)

  # ------------------------------------------------------------------ data
  def _path(self, split: str) -> str:
    if self.layout is None:
      path = self.files[split]
      if not path:
        raise ConfigError(f"ClassificationData.{split}_file is not set")
      return path
    name = {"train": "train.tsv", "eval": self.layout.dev_files[0],
            "predict": self.layout.test_files[0]}[split]
    return os.path.join(self.data.data_dir, name)

  def source_file(self, split):
    return self._path(split)

  def row_origins(self, split):
    # guids end in the line number: "train-12", "data.tsv-12".
    return ["line " + e.guid.rsplit("-", 1)[-1] for e in self.read_examples(split)]

  def read_examples(self, split: str) -> List[cd.Example]:
    path = self._path(split)
    if self.layout is not None:
      examples = cd.read_glue(self.data.glue_task, path,
                              "test" if split == "predict" else split)
    else:
      d = self.data
      examples = cd.read_generic(
          path, d.text_a_column, d.text_b_column,
          None if split == "predict" else d.label_column, labels=self.labels)
    if split == "train" and self.data.max_train_examples:
      examples = examples[:self.data.max_train_examples]
    return examples

  def encode(self, split):
    return self.encode_examples(self.read_examples(split), split)

  def encode_chunks(self, split, chunk_rows, select=None):
    """`encode(split)` in chunks of `chunk_rows` rows (one per example);
    chunk k is encoded only if `select(k)` (None is yielded otherwise)."""
    examples = self.read_examples(split)
    for k, start in enumerate(range(0, len(examples), chunk_rows)):
      yield (self.encode_examples(examples[start:start + chunk_rows], split)
             if select is None or select(k) else None)

  def records_task_name(self):
    what = (f"glue_task={self.data.glue_task}" if self.layout is not None
            else "regression" if self.regression
            else "labels=" + ",".join(self.labels))
    return f"ClassificationTask({what})"

  def encode_examples(self, examples, split):
    pairs = examples[0].text_b is not None
    out = self.tokenizer.encode([e.text_a for e in examples],
                                [e.text_b for e in examples] if pairs else None,
                                self.seq_length)
    if split != "predict":
      if self.regression:
        out["label"] = np.array([e.label for e in examples], np.float32)
      else:
        index = {name: i for i, name in enumerate(self.labels)}
        out["label"] = np.array([index[e.label] for e in examples], np.int32)
    return out

  # ----------------------------------------------------------------- model
  def preprocessor(self):
    pairs = (self.layout.text_b is not None if self.layout is not None
             else self.data.text_b_column is not None)
    return TextClassifierPreprocessor(labels=self.labels, text_pairs=pairs,
                                      **self._preprocessor_args())

  def build_model(self):
    return BertClassifier(self.build_checkpoint().encoder, self.num_classes,
                          dropout_rate=self.head.dropout_rate)

  def loss_denominators(self, features):
    return dict(loss=tf.reduce_sum(example_weights(features, features["label"])))

  def compute_stats(self, features, outputs):
    # logits [b, classes], or [b, k, classes] for packed rows (label [b, k];
    # empty slots weigh 0).
    return classification_stats(
        outputs["logits"], features["label"],
        example_weights(features, features["label"]), self.regression)

  def eval_outputs(self, features, outputs):
    return dict(logits=outputs["logits"], label=features["label"])

  def eval_metrics(self, collected):
    if self.regression:
      return regression_metrics(collected["label"], collected["logits"][:, 0])
    return classification_metrics(collected["label"],
                                  collected["logits"].argmax(-1),
                                  self.metric_names)

  def serving_gate(self, max_drop=None):
    """The accuracy gate of a reduced-precision export: the eval split,
    scored by accuracy (regression: Pearson r, in points)."""
    from bert.serving import gate  # pylint: disable=g-import-not-at-top
    examples = self.read_examples("eval")
    pairs = examples[0].text_b is not None
    texts_b = [e.text_b for e in examples] if pairs else None
    source = self.source_file("eval")
    if self.regression:
      return gate.regression_gate([e.text_a for e in examples],
                                  [e.label for e in examples], source,
                                  texts_b, max_drop)
    return gate.classification_gate([e.text_a for e in examples],
                                     [e.label for e in examples], source,
                                     texts_b, max_drop)

  # --------------------------------------------------------------- predict
  # What `predict` writes (removed before a predict run).
  prediction_files = ("test_results.tsv",)

  def predict(self, model, output_dir: str) -> str:
    """Writes `test_results.tsv`: per example, the class probabilities
    (tab-separated, in label order) or the regression value."""
    logits = self.logits(model, "predict")
    values = logits if self.regression else tf.nn.softmax(logits, -1).numpy()
    path = os.path.join(output_dir, "test_results.tsv")
    with open(path, "w", encoding="utf-8") as f:
      for row in values:
        f.write("\t".join(f"{v:.8f}" for v in row) + "\n")
    return path
