"""SQuAD 1.1 / 2.0 extractive question answering.

Training: cross-entropy of the answer's start and end pieces, averaged
(google-research `run_squad.py`); windows without the answer point at [CLS].
Evaluation: n-best span search over all windows of a question, answers cut
from the original context, official EM/F1 (v2: with no-answer and the best
null-score threshold). Predict mode writes predictions.json,
nbest_predictions.json and (v2) null_odds.json.

Only SQuAD 1.1 dev is on this machine, so `train_fraction` splits one file
by article (never by question): the same seed gives the same split for
training and evaluation.
"""

import json
import os
from typing import Dict, List, Optional

import gin
import numpy as np
import tensorflow as tf

from bert.data import squad_eval, squad_examples
from bert.models.bert_span_labeler import BertSpanLabeler
from bert.networks.bert_encoder import BertEncoder
from bert.data.length_buckets import pad_sequence_axis
from bert.models.preprocessors import SpanLabelerPreprocessor
from bert.tasks.finetuning import FinetuningTask, split_files
from bert.tasks.objectives import span_stats
from bert.validation import (ConfigError, check_bool, check_float, check_int,
                             check_str)


@gin.configurable
class QuestionAnsweringTask(FinetuningTask):
  """Args:
    train_file, eval_file, predict_file: SQuAD json files (data_dir-relative).
    train_fraction: when train_file == eval_file, the fraction of its articles
      to train on; evaluation uses the others.
    version_2: SQuAD 2.0 (no-answer questions, null score).
    doc_stride, max_query_length, n_best_size, max_answer_length,
    null_score_diff_threshold: as google-research run_squad.py.
    Others: see FinetuningTask (seq_length is max_seq_length).
  """

  loss_names = ("loss",)
  stat_names = ("loss", "start_accuracy", "end_accuracy")
  sequence_outputs = ("start_logits", "end_logits")

  def __init__(self, train_file: str = "", eval_file: str = "",
               predict_file: str = "", data_dir: str = "",
               train_fraction: float = 0.8, version_2: bool = False,
               doc_stride: int = 128, max_query_length: int = 64,
               n_best_size: int = 20, max_answer_length: int = 30,
               null_score_diff_threshold: float = 0.0, seq_length: int = 384,
               **kwargs):
    owner = "QuestionAnsweringTask"
    for name, value in (("train_file", train_file), ("eval_file", eval_file),
                        ("predict_file", predict_file), ("data_dir", data_dir)):
      check_str(owner, name, value)
    check_float(owner, "train_fraction", train_fraction, 0, 1, min_open=True,
                max_open=True)
    check_bool(owner, "version_2", version_2)
    for name, value in (("doc_stride", doc_stride),
                        ("max_query_length", max_query_length),
                        ("n_best_size", n_best_size),
                        ("max_answer_length", max_answer_length)):
      check_int(owner, name, value, minimum=1)
    check_float(owner, "null_score_diff_threshold", null_score_diff_threshold)
    check_int(owner, "seq_length", seq_length, minimum=1)
    if max_query_length + 3 >= seq_length:
      raise ConfigError(f"{owner}.max_query_length={max_query_length} leaves "
                        f"no room for the context in seq_length={seq_length} "
                        "(query + context + 3 special tokens)")
    self.files = split_files(data_dir, train=train_file, eval=eval_file,
                             predict=predict_file)
    self.train_fraction = train_fraction
    self.version_2 = version_2
    self.doc_stride = doc_stride
    self.max_query_length = max_query_length
    self.n_best_size = n_best_size
    self.max_answer_length = max_answer_length
    self.null_score_diff_threshold = null_score_diff_threshold
    self._examples: Dict[str, List[squad_examples.SquadExample]] = {}
    self._meta: Dict[str, List[dict]] = {}
    self.last_predictions = None
    super().__init__(seq_length=seq_length, **kwargs)

  # ------------------------------------------------------------------ data
  def articles(self, split: str) -> Optional[List[str]]:
    """Article titles of a split when train and eval share one file."""
    if split == "predict" or self.files["train"] != self.files["eval"]:
      return None
    train, held_out = squad_examples.split_articles(
        squad_examples.article_titles(self.files["train"]),
        self.train_fraction, self.seed)
    return train if split == "train" else held_out

  def examples(self, split: str) -> List[squad_examples.SquadExample]:
    """A split's questions; predict defaults to the eval questions."""
    if split not in self._examples:
      if split == "predict" and not self.files["predict"]:
        self._examples[split] = self.examples("eval")
      else:
        if not self.files[split]:
          raise ConfigError(f"QuestionAnsweringTask.{split}_file is not set")
        self._examples[split] = squad_examples.read_squad(
            self.files[split], self.articles(split))
    return self._examples[split]

  def row_origins(self, split):
    self.features(split)
    examples = self.examples(split)
    return [f"question {examples[m['example']].qas_id}" for m in self._meta[split]]

  def encode(self, split):
    arrays, meta = squad_examples.encode_examples(
        self.examples(split), self.tokenizer, self.seq_length, self.doc_stride,
        self.max_query_length, training=split != "predict")
    self._meta[split] = meta
    return arrays

  # ----------------------------------------------------------------- model
  def preprocessor(self):
    return SpanLabelerPreprocessor(
        doc_stride=self.doc_stride, max_query_length=self.max_query_length,
        n_best_size=self.n_best_size, max_answer_length=self.max_answer_length,
        version_2=self.version_2,
        null_score_diff_threshold=self.null_score_diff_threshold,
        **self._preprocessor_args())

  def build_model(self):
    return BertSpanLabeler(BertEncoder(self.config))

  def loss_denominators(self, features):
    return dict(loss=tf.cast(tf.shape(features["input_word_ids"])[0], tf.float32))

  def compute_stats(self, features, outputs):
    return span_stats(outputs["start_logits"], outputs["end_logits"],
                      features["start_positions"], features["end_positions"],
                      features["input_mask"])

  def eval_outputs(self, features, outputs):
    # Cut batches: padded back to seq_length with scores no span can use.
    return dict(feature_id=features["feature_id"], **{
        k: pad_sequence_axis(outputs[k], self.seq_length, -1e4)
        for k in self.sequence_outputs})

  def _answers(self, split, feature_id, start_logits, end_logits):
    order = np.argsort(feature_id)
    meta = self._meta[split]
    if len(order) != len(meta):
      raise AssertionError(f"{len(order)} evaluated windows, {len(meta)} encoded")
    return squad_eval.postprocess(
        self.examples(split), meta, start_logits[order], end_logits[order],
        self.n_best_size, self.max_answer_length, self.version_2,
        self.null_score_diff_threshold)

  def eval_metrics(self, collected):
    predictions, nbest, null_odds = self._answers(
        "eval", collected["feature_id"], collected["start_logits"],
        collected["end_logits"])
    self.last_predictions = (predictions, nbest, null_odds)
    return squad_eval.squad_metrics(self.examples("eval"), predictions,
                                    null_odds if self.version_2 else None)

  # What `predict` writes (removed before a predict run).
  prediction_files = ("predictions.json", "nbest_predictions.json",
                      "null_odds.json")

  def predict(self, model, output_dir):
    out = self.model_outputs(model, "predict")
    predictions, nbest, null_odds = self._answers(
        "predict", self.features("predict")["feature_id"], out["start_logits"],
        out["end_logits"])
    files = dict(predictions=predictions, nbest_predictions=nbest)
    if self.version_2:
      files["null_odds"] = null_odds
    for name, value in files.items():
      with open(os.path.join(output_dir, f"{name}.json"), "w",
                encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
    return os.path.join(output_dir, "predictions.json")
