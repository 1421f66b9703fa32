"""Sentence and sentence-pair classification and regression (GLUE and own data).

As google-research `run_classifier.py`: [CLS] a [SEP] (b [SEP]) truncated to
`seq_length`, dropout + dense on `pooled_output`, softmax cross-entropy (or
squared error with one output for regression, e.g. STS-B); metrics per GLUE
task (accuracy, F1, Matthews correlation, Pearson/Spearman); predict mode
writes `test_results.tsv` with one line of class probabilities per example.
"""

import math
import os
from typing import Dict, List, Optional, Sequence

import gin
import numpy as np
import tensorflow as tf

from bert.data import classification_data as cd
from bert.data.tokenization import Tokenizer
from bert.models.bert_classifier import BertClassifier
from bert.networks.bert_encoder import BertEncoder
from bert.tasks.base import Task
from bert.tasks.metrics import classification_metrics, regression_metrics
from bert.tasks.pretraining import initialize_from_checkpoint, resolve_bert_config


@gin.configurable
class ClassificationTask(Task):
  """Fine-tunes a BERT encoder on a GLUE task or on generic labelled files.

  Args:
    glue_task: a GLUE task name (cola, sst-2, mrpc, qqp, sts-b, mnli, qnli,
      rte, wnli); reads `data_dir`/train.tsv, dev.tsv (MNLI: dev_matched.tsv),
      test.tsv. Or None, with `train_file`/`eval_file`/`predict_file` and the
      column names for `read_generic`.
    init_checkpoint: a checkpoint folder (any format the loader reads); gives
      the encoder weights, config, vocab and casing.
    bert_config, vocab_file, do_lower_case: when there is no init_checkpoint
      (or to override its casing).
    labels: class names (generic data); None for GLUE (fixed) or regression.
    max_train_examples: use only the first N training examples (0 = all).
    num_train_epochs: sets the run length when RuntimeConfig.train_steps is
      not given.
  """

  loss_names = ("loss",)
  stat_names = ("loss", "accuracy")

  def __init__(self, glue_task: Optional[str] = None, data_dir: str = "",
               init_checkpoint: Optional[str] = None, bert_config=None,
               vocab_file: Optional[str] = None,
               do_lower_case: Optional[bool] = None, seq_length: int = 128,
               global_batch_size: int = 32, eval_batch_size: int = 64,
               num_train_epochs: float = 3.0, dropout_rate: float = 0.1,
               max_train_examples: int = 0, seed: int = 42,
               train_file: str = "", eval_file: str = "", predict_file: str = "",
               text_a_column: str = "sentence", text_b_column: Optional[str] = None,
               label_column: str = "label", labels: Optional[Sequence[str]] = None,
               regression: bool = False):
    self.glue_task = glue_task
    self.layout = cd.glue_layout(glue_task) if glue_task else None
    self.data_dir = data_dir
    self.seq_length = seq_length
    self._global_batch_size = global_batch_size
    self.eval_batch_size = eval_batch_size
    self.num_train_epochs = num_train_epochs
    self.dropout_rate = dropout_rate
    self.max_train_examples = max_train_examples
    self.seed = seed
    self.files = dict(train=train_file, eval=eval_file, predict=predict_file)
    self.columns = (text_a_column, text_b_column, label_column)
    if self.layout is not None:
      self.labels = (list(self.layout.labels) if self.layout.labels is not None
                     else None)
      self.metric_names = tuple(self.layout.metrics)
    else:
      self.labels = None if regression else list(labels or [])
      if not regression and not self.labels:
        raise ValueError("ClassificationTask: give labels (class names) or "
                         "regression=True for generic data")
      self.metric_names = (("pearson", "spearman") if regression
                           else ("accuracy", "f1") if len(self.labels) == 2
                           else ("accuracy",))
    self.regression = self.labels is None
    self.num_classes = 1 if self.regression else len(self.labels)
    if self.regression:
      self.stat_names = ("loss",)
    self._init_weights = None
    if init_checkpoint:
      from bert import checkpoints  # pylint: disable=g-import-not-at-top
      ckpt = checkpoints.load(init_checkpoint)
      self.config = ckpt.config
      self._init_checkpoint = init_checkpoint
      self._init_weights = ckpt.encoder.get_weights()
      vocab_file = vocab_file or ckpt.vocab_file
      if do_lower_case is None:
        do_lower_case = ckpt.do_lower_case
    else:
      if bert_config is None:
        raise ValueError("ClassificationTask needs init_checkpoint or bert_config")
      self.config = resolve_bert_config(bert_config)
    if vocab_file is None:
      raise ValueError("ClassificationTask: no vocab (the checkpoint has no "
                       "vocab.txt; set vocab_file)")
    if do_lower_case is None:
      raise ValueError(f"ClassificationTask: casing of {vocab_file} unknown; "
                       "set do_lower_case")
    if seq_length > self.config.max_position_embeddings:
      raise ValueError(f"ClassificationTask.seq_length={seq_length} exceeds "
                       f"max_position_embeddings={self.config.max_position_embeddings}")
    self.tokenizer = Tokenizer(vocab_file, lower_case=do_lower_case)
    if self.tokenizer.get_special_tokens_dict()["vocab_size"] != self.config.vocab_size:
      raise ValueError(f"vocab {vocab_file} has "
                       f"{self.tokenizer.get_special_tokens_dict()['vocab_size']} "
                       f"tokens but the model's vocab_size is {self.config.vocab_size}")
    self._cache: Dict[str, Dict[str, np.ndarray]] = {}

  # ------------------------------------------------------------------ data
  @property
  def global_batch_size(self) -> int:
    return self._global_batch_size

  def _path(self, split: str) -> str:
    if self.layout is None:
      path = self.files[split]
      if not path:
        raise ValueError(f"ClassificationTask.{split}_file is not set")
      return path
    name = {"train": "train.tsv", "eval": self.layout.dev_files[0],
            "predict": self.layout.test_files[0]}[split]
    return os.path.join(self.data_dir, name)

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

  def features(self, split: str) -> Dict[str, np.ndarray]:
    """Encoded inputs (+ `label`) of a split, computed once."""
    if split not in self._cache:
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
      self._cache[split] = out
    return self._cache[split]

  def num_train_steps(self) -> int:
    n = len(self.features("train")["input_word_ids"])
    return max(1, int(math.ceil(n * self.num_train_epochs / self._global_batch_size)))

  def build_inputs(self, input_context, training, start_step=0):
    data = self.features("train" if training else "eval")
    ds = tf.data.Dataset.from_tensor_slices(data)
    pipelines = input_context.num_input_pipelines if input_context else 1
    if input_context is not None and pipelines > 1:
      ds = ds.shard(pipelines, input_context.input_pipeline_id)
    batch = (input_context.get_per_replica_batch_size(self._global_batch_size)
             if input_context and training else
             self._global_batch_size if training else self.eval_batch_size)
    if training:
      ds = ds.shuffle(len(data["input_word_ids"]), seed=self.seed,
                      reshuffle_each_iteration=True).repeat()
      ds = ds.skip(start_step * self._global_batch_size // pipelines)
    ds = ds.batch(batch, drop_remainder=training)
    return ds.prefetch(tf.data.AUTOTUNE)

  # ----------------------------------------------------------------- model
  def build_model(self):
    return BertClassifier(BertEncoder(self.config), self.num_classes,
                          dropout_rate=self.dropout_rate)

  def initialize(self, model):
    if self._init_weights is not None:
      model.encoder.set_weights(self._init_weights)

  def model_inputs(self, features):
    return {k: features[k] for k in ("input_word_ids", "input_mask",
                                     "input_type_ids")}

  def loss_denominators(self, features):
    return dict(loss=tf.cast(tf.shape(features["label"])[0], tf.float32))

  def compute_stats(self, features, outputs):
    logits = outputs["logits"]
    n = tf.cast(tf.shape(logits)[0], tf.float32)
    if self.regression:
      error = logits[:, 0] - tf.cast(features["label"], tf.float32)
      return dict(loss=(tf.reduce_sum(tf.square(error)), n))
    labels = tf.cast(features["label"], tf.int32)
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                               labels), tf.float32)
    return dict(loss=(tf.reduce_sum(per_example), n),
                accuracy=(tf.reduce_sum(correct), n))

  def eval_outputs(self, features, outputs):
    return dict(logits=outputs["logits"], label=features["label"])

  def eval_metrics(self, collected):
    if self.regression:
      return regression_metrics(collected["label"], collected["logits"][:, 0])
    return classification_metrics(collected["label"],
                                  collected["logits"].argmax(-1),
                                  self.metric_names)

  # --------------------------------------------------------------- predict
  def predict(self, model, output_dir: str) -> str:
    """Writes `test_results.tsv`: per example, the class probabilities
    (tab-separated, in label order) or the regression value."""
    data = self.features("predict")
    ds = tf.data.Dataset.from_tensor_slices(data).batch(self.eval_batch_size)
    rows = []
    for batch in ds:
      logits = model(self.model_inputs(batch), training=False)["logits"]
      values = logits if self.regression else tf.nn.softmax(logits, -1)
      rows += values.numpy().tolist()
    path = os.path.join(output_dir, "test_results.tsv")
    with open(path, "w", encoding="utf-8") as f:
      for row in rows:
        f.write("\t".join(f"{v:.8f}" for v in row) + "\n")
    return path
