"""Token classification (NER) on CoNLL-style files.

Labels sit on the first word piece of each word (the others are ignored by
the loss); evaluation is entity-level precision/recall/F1 with `seqeval`
(CoNLL semantics: an entity counts only if its type and both ends match);
predict mode writes `predictions.conll` (token, gold tag if any, predicted
tag) in the input's sentence order.
"""

import os
from typing import Dict, List, Optional, Sequence

import gin
import numpy as np
import tensorflow as tf
from seqeval import metrics as seqeval_metrics

from bert.data import ner_data
from bert.models.bert_token_classifier import BertTokenClassifier
from bert.models.preprocessors import TokenClassifierPreprocessor
from bert.losses import token_stats, token_weights
from bert.data.length_buckets import pad_sequence_axis
from bert.tasks.configs import (EncoderSource, FinetuningInputs, HeadConfig,
                                ScheduleConfig, TaggingData, or_default)
from bert.tasks.finetuning import FinetuningTask
from bert.validation import ConfigError


def entity_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                   ) -> Dict[str, float]:
  """Entity-level precision, recall and F1 (seqeval, CoNLL evaluation)."""
  return dict(
      precision=float(seqeval_metrics.precision_score(gold, predicted)),
      recall=float(seqeval_metrics.recall_score(gold, predicted)),
      f1=float(seqeval_metrics.f1_score(gold, predicted)))


@gin.configurable
class TokenClassificationTask(FinetuningTask):
  """Fine-tunes a BERT encoder to tag words (e.g. WNUT-17, CoNLL-2003).

  Args:
    data: a `TaggingData`: CoNLL files (the predict file may have tags; they
      are then written next to the predictions) and the tag set (default: the
      training file's tags, "O" first).
    encoder, inputs, head, schedule: see `FinetuningTask`.
  """

  loss_names = ("loss",)
  packable = True
  pack_pad_values = {"label_ids": -1}
  stat_names = ("loss", "accuracy")
  sequence_outputs = ("logits",)

  def __init__(self, data: Optional[TaggingData] = None,
               encoder: Optional[EncoderSource] = None,
               inputs: Optional[FinetuningInputs] = None,
               head: Optional[HeadConfig] = None,
               schedule: Optional[ScheduleConfig] = None):
    data = or_default("TokenClassificationTask", "data", data, TaggingData)
    self._labels = list(data.labels) if data.labels else None
    self._sentences: Dict[str, List[ner_data.Sentence]] = {}
    super().__init__(data, encoder, inputs, head, schedule)

  @property
  def labels(self) -> List[str]:
    if self._labels is None:
      self._labels = ner_data.label_list(self.sentences("train"))
    return self._labels

  def sentences(self, split: str) -> List[ner_data.Sentence]:
    if split not in self._sentences:
      path = self.files[split]
      if not path:
        raise ConfigError(f"TaggingData.{split}_file is not set")
      sentences = ner_data.read_conll(path, has_tags=split != "predict" or None)
      self._sentences[split] = sentences
      has_tags = sentences[0].tags is not None
      if has_tags and (split != "train" or self._labels is not None):
        ner_data.check_tags(sentences, self.labels, path)
    return self._sentences[split]

  def serving_gate(self, max_drop=None):
    """The accuracy gate of a reduced-precision export: the eval sentences
    (words joined by spaces, as serving splits them), scored by entity F1."""
    from bert.serving import gate  # pylint: disable=g-import-not-at-top
    sentences = self.sentences("eval")
    return gate.tagging_gate([" ".join(s.words) for s in sentences],
                             [s.tags for s in sentences],
                             self.source_file("eval"), max_drop)

  def row_origins(self, split):
    sentences = self.sentences(split)
    return [f"line {sentences[i].line}" for i in self.features(split)["sentence_id"]]

  def records_task_name(self):
    # The label ids of the rows depend on the label list.
    return f"TokenClassificationTask(labels={','.join(self.labels)})"

  def encode(self, split):
    sentences = self.sentences(split)
    return ner_data.encode_sentences(sentences, self.tokenizer, self.seq_length,
                                     self.labels)

  def encode_chunks(self, split, chunk_rows, select=None):
    """`encode(split)` for `chunk_rows` sentences at a time (a long sentence
    may give several rows); chunk k only if `select(k)`, else None."""
    sentences = self.sentences(split)
    for k, start in enumerate(range(0, len(sentences), chunk_rows)):
      if select is not None and not select(k):
        yield None
        continue
      out = ner_data.encode_sentences(sentences[start:start + chunk_rows],
                                      self.tokenizer, self.seq_length,
                                      self.labels)
      out["sentence_id"] = out["sentence_id"] + start
      yield out

  def preprocessor(self):
    return TokenClassifierPreprocessor(labels=self.labels,
                                       **self._preprocessor_args())

  def build_model(self):
    return BertTokenClassifier(self.build_checkpoint().encoder,
                               len(self.labels),
                               dropout_rate=self.head.dropout_rate)

  def loss_denominators(self, features):
    return dict(loss=tf.reduce_sum(token_weights(features["label_ids"])))

  def compute_stats(self, features, outputs):
    # logits [b, s, labels]; ignored positions (label -1) weigh 0.
    return token_stats(outputs["logits"], features["label_ids"])

  def eval_outputs(self, features, outputs):
    predicted = tf.argmax(outputs["logits"], -1, output_type=tf.int32)
    return dict(predicted=pad_sequence_axis(predicted, self.seq_length),
                example_row=features["example_row"])

  def eval_metrics(self, collected):
    sentences = self.sentences("eval")
    # Evaluation runs in length order; back to row order.
    predicted = np.empty_like(collected["predicted"])
    predicted[collected["example_row"]] = collected["predicted"]
    if len(predicted) != self.pipeline.num_rows("eval"):
      raise ConfigError("TokenClassificationTask: entity F1 needs the whole "
                        "eval file; set RuntimeConfig.eval_steps=-1")
    predicted = ner_data.word_predictions(sentences, self.features("eval"),
                                          predicted, self.labels)
    return entity_metrics([s.tags for s in sentences], predicted)

  # What `predict` writes (removed before a predict run).
  prediction_files = ("predictions.conll",)

  def predict(self, model, output_dir: str) -> str:
    sentences = self.sentences("predict")
    predicted_ids = self.logits(model, "predict").argmax(-1)
    predicted = ner_data.word_predictions(sentences, self.features("predict"),
                                          predicted_ids, self.labels)
    path = os.path.join(output_dir, "predictions.conll")
    ner_data.write_conll(path, sentences, predicted)
    return path
