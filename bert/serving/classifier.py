"""Classifier serving: `text` (+ `text_b`) -> `probabilities` and `label`
(regression: `score`)."""

from typing import Optional, Sequence

import tensorflow as tf

from bert.layers.bert_pack_inputs import PackTemplate
from bert.layers.bert_tokenizer import BertTokenizer
from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.serving import host
from bert.serving.stages import ServingModule, cut_to_bucket


class ClassifierServing(ServingModule):
  """Raw strings -> class probabilities and label names. The classifier's
  last block runs for [CLS] only (`BertClassifier` computes `pooled_only`)."""

  def __init__(self, model, vocab, lower_case: bool, seq_length: int,
               labels: Optional[Sequence[str]], pairs: bool,
               buckets: Sequence[int]):
    self.string_inputs = ("text", "text_b") if pairs else ("text",)
    self.tokenizer, self.packer = tokenizer_and_packer(vocab, lower_case,
                                                       seq_length)
    self.labels = tf.constant(list(labels or []), tf.string)
    self.regression = not labels
    super().__init__(model, buckets, name="classifier_serving")

  def _preprocess(self, strings):
    inputs = self.packer([self.tokenizer(strings[k])
                          for k in self.string_inputs])
    return cut_to_bucket(inputs, self.buckets)

  def host(self):
    """Small batches in Python (`bert.serving.host`) where the tokenizer is
    BERT's WordPiece with no whole-matched special tokens."""
    if (not isinstance(self.tokenizer, BertTokenizer)
        or self.tokenizer.special_tokens):
      return None
    labels = None if self.regression else [
        l.decode("utf-8") for l in self.labels.numpy()]
    return host.classifier_spec(PackTemplate.of(self.tokenizer),
                                self.packer.seq_length, self.buckets,
                                self.string_inputs, labels), self.tokenizer

  def _postprocess(self, strings, features, outputs):
    logits = outputs["logits"]                                   # [b, classes]
    if self.regression:
      return dict(score=logits[:, 0])
    probabilities = tf.nn.softmax(logits, -1)
    return dict(probabilities=probabilities,
                label=tf.gather(self.labels, tf.argmax(probabilities, -1)))
