"""Sentence and sentence-pair classification and regression (GLUE and own data).

As google-research `run_classifier.py`: [CLS] a [SEP] (b [SEP]) truncated to
`seq_length`, dropout + dense on `pooled_output`, softmax cross-entropy (or
squared error with one output for regression, e.g. STS-B); metrics per GLUE
task (accuracy, F1, Matthews correlation, Pearson/Spearman); predict mode
writes `test_results.tsv` with one line of class probabilities per example.
"""

import os
from typing import List, Optional, Sequence

import gin
import numpy as np
import tensorflow as tf

from bert.data import classification_data as cd
from bert.models.bert_classifier import BertClassifier
from bert.networks.bert_encoder import BertEncoder
from bert.tasks.base import example_weights
from bert.models.preprocessors import TextClassifierPreprocessor
from bert.tasks.objectives import classification_stats
from bert.tasks.finetuning import FinetuningTask
from bert.validation import (ConfigError, check_bool, check_int, check_labels,
                             check_str)
from bert.tasks.metrics import classification_metrics, regression_metrics


@gin.configurable
class ClassificationTask(FinetuningTask):
  """Fine-tunes a BERT encoder on a GLUE task or on generic labelled files.

  Args:
    glue_task: a GLUE task name (cola, sst-2, mrpc, qqp, sts-b, mnli, qnli,
      rte, wnli); reads `data_dir`/train.tsv, dev.tsv (MNLI: dev_matched.tsv),
      test.tsv. Or None, with `train_file`/`eval_file`/`predict_file` and the
      column names for `read_generic`.
    labels: class names (generic data); None for GLUE (fixed) or regression.
    max_train_examples: use only the first N training examples (0 = all).
    num_train_epochs: sets the run length when RuntimeConfig.train_steps is
      not given.
    Others: see FinetuningTask (init_checkpoint, bert_config, vocab_file,
      do_lower_case, seq_length, batch sizes, dropout_rate, seed).
  """

  loss_names = ("loss",)
  packable = True
  stat_names = ("loss", "accuracy")

  def __init__(self, glue_task: Optional[str] = None, data_dir: str = "",
               train_file: str = "", eval_file: str = "", predict_file: str = "",
               text_a_column: str = "sentence", text_b_column: Optional[str] = None,
               label_column: str = "label", labels: Optional[Sequence[str]] = None,
               regression: bool = False, max_train_examples: int = 0, **kwargs):
    owner = "ClassificationTask"
    check_str(owner, "glue_task", glue_task, optional=True)
    for name, value in (("data_dir", data_dir), ("train_file", train_file),
                        ("eval_file", eval_file), ("predict_file", predict_file),
                        ("text_a_column", text_a_column),
                        ("label_column", label_column)):
      check_str(owner, name, value)
    check_str(owner, "text_b_column", text_b_column, optional=True)
    check_bool(owner, "regression", regression)
    check_int(owner, "max_train_examples", max_train_examples, minimum=0)
    check_labels(owner, labels)
    self.glue_task = glue_task
    self.layout = cd.glue_layout(glue_task) if glue_task else None
    self.data_dir = data_dir
    self.max_train_examples = max_train_examples
    self.files = dict(train=train_file, eval=eval_file, predict=predict_file)
    self.columns = (text_a_column, text_b_column, label_column)
    if self.layout is not None:
      self.labels = (list(self.layout.labels) if self.layout.labels is not None
                     else None)
      self.metric_names = tuple(self.layout.metrics)
    else:
      self.labels = None if regression else list(labels or [])
      if not regression and not self.labels:
        raise ConfigError("ClassificationTask: give labels (class names) or "
                          "regression=True for generic data")
      self.metric_names = (("pearson", "spearman") if regression
                           else ("accuracy", "f1") if len(self.labels) == 2
                           else ("accuracy",))
    self.regression = self.labels is None
    self.num_classes = 1 if self.regression else len(self.labels)
    if self.regression:
      self.stat_names = ("loss",)
    super().__init__(**kwargs)

  # ------------------------------------------------------------------ data
  def _path(self, split: str) -> str:
    if self.layout is None:
      path = self.files[split]
      if not path:
        raise ConfigError(f"ClassificationTask.{split}_file is not set")
      return path
    name = {"train": "train.tsv", "eval": self.layout.dev_files[0],
            "predict": self.layout.test_files[0]}[split]
    return os.path.join(self.data_dir, name)

  def source_file(self, split):
    return self._path(split)

  def row_origins(self, split):
    # guids end in the line number: "train-12", "data.tsv-12".
    return ["line " + e.guid.rsplit("-", 1)[-1] for e in self.read_examples(split)]

  def read_examples(self, split: str) -> List[cd.Example]:
    path = self._path(split)
    if self.layout is not None:
      examples = cd.read_glue(self.glue_task, path,
                              "test" if split == "predict" else split)
    else:
      a, b, label = self.columns
      examples = cd.read_generic(path, a, b, None if split == "predict" else label,
                                 labels=self.labels)
    if split == "train" and self.max_train_examples:
      examples = examples[:self.max_train_examples]
    return examples

  def encode(self, split):
    examples = self.read_examples(split)
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
             else self.columns[1] is not None)
    return TextClassifierPreprocessor(labels=self.labels, text_pairs=pairs,
                                      **self._preprocessor_args())

  def build_model(self):
    return BertClassifier(BertEncoder(self.config), self.num_classes,
                          dropout_rate=self.dropout_rate)

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
