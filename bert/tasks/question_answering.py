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

import dataclasses
import json
import os
from typing import Dict, List, Optional

import gin
import numpy as np
import tensorflow as tf

from bert.data import squad_eval, squad_examples
from bert.data.squad_config import SquadConfig
from bert.models.bert_span_labeler import BertSpanLabeler
from bert.data.length_buckets import pad_sequence_axis
from bert.models.preprocessors import SpanLabelerPreprocessor
from bert.tasks.configs import (AnswerConfig, EncoderSource, FinetuningInputs,
                                HeadConfig, ScheduleConfig, SquadData,
                                or_default)
from bert.tasks.finetuning import FinetuningTask
from bert.losses import span_stats
from bert.validation import ConfigError


@gin.configurable
class QuestionAnsweringTask(FinetuningTask):
  """Args:
    data: a `SquadData`: SQuAD json files (data_dir-relative), SQuAD 2.0 or
      not, the article split and the windowing (doc_stride, max_query_length).
    answers: an `AnswerConfig` (the answer search of evaluation and predict).
    encoder, inputs, head, schedule: see `FinetuningTask`
      (`FinetuningInputs.seq_length`, the reference's max_seq_length: default
      384).

  `self.squad`, the one `SquadConfig` made of these, is what encoding,
  answers, the Keras preprocessor and the serving export use.
  """

  loss_names = ("loss",)
  stat_names = ("loss", "start_accuracy", "end_accuracy")
  sequence_outputs = ("start_logits", "end_logits")
  default_seq_length = SquadConfig.seq_length

  def __init__(self, data: Optional[SquadData] = None,
               answers: Optional[AnswerConfig] = None,
               encoder: Optional[EncoderSource] = None,
               inputs: Optional[FinetuningInputs] = None,
               head: Optional[HeadConfig] = None,
               schedule: Optional[ScheduleConfig] = None):
    owner = "QuestionAnsweringTask"
    data = or_default(owner, "data", data, SquadData)
    self.answers = or_default(owner, "answers", answers, AnswerConfig)
    self._examples: Dict[str, List[squad_examples.SquadExample]] = {}
    self._meta: Dict[str, List[dict]] = {}
    self.last_predictions = None
    super().__init__(data, encoder, inputs, head, schedule)
    try:
      self.squad = SquadConfig(
          seq_length=self.seq_length, version_2=data.version_2,
          doc_stride=data.doc_stride, max_query_length=data.max_query_length,
          **dataclasses.asdict(self.answers))
    except ConfigError as e:
      raise ConfigError(
          f"{owner}: SquadData.max_query_length={data.max_query_length} with "
          f"FinetuningInputs.seq_length={self.seq_length}: {e}") from None

  # ------------------------------------------------------------------ data
  def articles(self, split: str) -> Optional[List[str]]:
    """Article titles of a split when train and eval share one file."""
    if split == "predict" or self.files["train"] != self.files["eval"]:
      return None
    path = self.files["train"]
    titles = squad_examples.article_titles(path)
    train, held_out = squad_examples.split_articles(
        titles, self.data.train_fraction,
        self.inputs.seed if self.data.split_seed is None else self.data.split_seed)
    if not train or not held_out:
      raise ConfigError(
          f"SquadData.train_fraction={self.data.train_fraction} of the "
          f"{len(titles)} article(s) of {path} leaves none for "
          f"{'training' if not train else 'evaluation'} (the split is by "
          "article title); give separate train_file and eval_file")
    return train if split == "train" else held_out

  def examples(self, split: str) -> List[squad_examples.SquadExample]:
    """A split's questions; predict defaults to the eval questions."""
    if split not in self._examples:
      if split == "predict" and not self.files["predict"]:
        self._examples[split] = self.examples("eval")
      else:
        if not self.files[split]:
          raise ConfigError(f"SquadData.{split}_file is not set")
        self._examples[split] = squad_examples.read_squad(
            self.files[split], self.articles(split))
    return self._examples[split]

  def serving_gate(self, max_drop=None):
    """The accuracy gate of a reduced-precision export: the eval questions,
    scored by SQuAD F1 (v1.1 rules)."""
    from bert.serving import gate  # pylint: disable=g-import-not-at-top
    examples = [e for e in self.examples("eval") if e.answers]
    return gate.squad_gate([e.question for e in examples],
                           [e.context for e in examples],
                           [[a[0] for a in e.answers] for e in examples],
                           self.source_file("eval"), max_drop)

  def row_origins(self, split):
    examples = self.examples(split)
    return [f"question {examples[m['example']].qas_id}" for m in self.meta(split)]

  # Written to records beside the model inputs, read back for the answers.
  records_side_features = squad_examples.META_FEATURES

  def records_task_name(self):
    d = self.data
    seed = self.inputs.seed if d.split_seed is None else d.split_seed
    articles = ("all" if self.files["train"] != self.files["eval"]
                else f"train_fraction={d.train_fraction},seed={seed}")
    return (f"QuestionAnsweringTask(version_2={d.version_2}, doc_stride="
            f"{d.doc_stride}, max_query_length={d.max_query_length}, "
            f"articles={articles})")

  # Features equal to the row's index in its split (set when chunks encoded
  # in parallel are merged).
  records_row_index = ("feature_id",)

  def encode_chunks(self, split, chunk_rows, select=None):
    """`encode(split)` and the windows' post-processing data
    (`squad_examples.META_FEATURES`), `chunk_rows` questions at a time;
    chunk k is encoded only if `select(k)` (None is yielded otherwise, and
    later chunks' feature_id then count from 0: see records_row_index)."""
    examples = self.examples(split)
    windows = 0
    for k, start in enumerate(range(0, len(examples), chunk_rows)):
      if select is not None and not select(k):
        yield None
        continue
      arrays, meta = squad_examples.encode_examples(
          examples[start:start + chunk_rows], self.tokenizer, self.squad,
          training=split != "predict")
      arrays["feature_id"] = arrays["feature_id"] + windows
      windows += len(meta)
      yield dict(arrays, **squad_examples.meta_arrays(meta, self.seq_length,
                                                      first_example=start))

  def meta(self, split):
    """Per window: its question, length, character spans and max-context
    flags (from the encoding, or read back from records)."""
    if split not in self._meta:
      records = self.pipeline.records
      if records is not None:
        self._meta[split] = squad_examples.meta_from_arrays(
            records.read_arrays(split, self.records_side_features))
      else:
        self.features(split)
    return self._meta[split]

  def encode(self, split):
    arrays, meta = squad_examples.encode_examples(
        self.examples(split), self.tokenizer, self.squad,
        training=split != "predict")
    self._meta[split] = meta
    return arrays

  # ----------------------------------------------------------------- model
  def preprocessor(self):
    return SpanLabelerPreprocessor(squad=self.squad,
                                   **self._preprocessor_args())

  def build_model(self):
    return BertSpanLabeler(self.build_checkpoint().encoder)

  def loss_denominators(self, features):
    return dict(loss=tf.cast(tf.shape(features["input_word_ids"])[0], tf.float32))

  def compute_stats(self, features, outputs):
    return span_stats(outputs["start_logits"], outputs["end_logits"],
                      features["start_positions"], features["end_positions"],
                      features["input_mask"])

  def eval_outputs(self, features, outputs):
    # Cut batches: padded back to seq_length with scores no span can use.
    return dict(feature_id=features["feature_id"], **{
        k: pad_sequence_axis(outputs[k], self.seq_length,
                             squad_eval.PAD_LOGIT)
        for k in self.sequence_outputs})

  def _answers(self, split, feature_id, start_logits, end_logits):
    order = np.argsort(feature_id)
    meta = self.meta(split)
    if len(order) != len(meta):
      raise AssertionError(f"{len(order)} evaluated windows, {len(meta)} encoded")
    return squad_eval.postprocess(
        self.examples(split), meta, start_logits[order], end_logits[order],
        self.squad)

  def eval_metrics(self, collected):
    predictions, nbest, null_odds = self._answers(
        "eval", collected["feature_id"], collected["start_logits"],
        collected["end_logits"])
    self.last_predictions = (predictions, nbest, null_odds)
    return squad_eval.squad_metrics(self.examples("eval"), predictions,
                                    null_odds if self.squad.version_2 else None)

  # What `predict` writes (removed before a predict run).
  prediction_files = ("predictions.json", "nbest_predictions.json",
                      "null_odds.json")

  def predict(self, model, output_dir):
    out = self.model_outputs(model, "predict")
    predictions, nbest, null_odds = self._answers(
        "predict", self.features("predict")["feature_id"], out["start_logits"],
        out["end_logits"])
    files = dict(predictions=predictions, nbest_predictions=nbest)
    if self.squad.version_2:
      files["null_odds"] = null_odds
    for name, value in files.items():
      with open(os.path.join(output_dir, f"{name}.json"), "w",
                encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
    return os.path.join(output_dir, "predictions.json")
