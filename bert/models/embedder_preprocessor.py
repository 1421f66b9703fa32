"""`TextEmbedderPreprocessor`: texts -> one encoder row each, for
`BertTextEmbedder`.

`encode(texts)` gives plain rows (the encoder's inputs). Training and
evaluation data come as columns of texts: `(anchors, positives)`,
`(anchors, positives, negatives)` or `(a, b)` with `y` scores; each column
is tokenized on its own and kept under `text_<i>/<input name>`. Its batches
are nested dicts `{"text_0": inputs, "text_1": inputs, ...}`, each column
cut to its own length bucket: a batch of short queries and long paragraphs
computes no paragraph-length padding for the queries.

Training batches are drawn at random (seeded, anew each pass), not grouped
by length as the other tasks do: the other rows of a batch are each
anchor's negatives, and a batch of equally long texts would make them
easier or harder than the data's own mix.
"""

import math
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
import tf_keras

from bert.data import length_buckets as lb
from bert.data.errors import DataError
from bert.features import ENCODER_INPUTS
from bert.models import inputs
from bert.models.preprocessor_base import BertPreprocessor
from bert.validation import ConfigError


def column_key(i: int, name: str) -> str:
  return f"text_{i}/{name}"


def column_inputs(features, num_columns: int):
  """The model's inputs of a batch of columns: {"text_<i>": inputs}."""
  return {f"text_{i}": {m: features[column_key(i, m)] for m in ENCODER_INPUTS}
          for i in range(num_columns)}


def column_cutter(num_columns: int, buckets):
  """A function that cuts each of the `num_columns` columns of a batch (a
  dict with `text_<i>/<input>` features) to the smallest bucket holding
  that column's longest row: what `fit` and `bert-train --task=embedding`
  both cut their batches with."""
  cutters = [lb.bucket_cutter([column_key(i, m) for m in ENCODER_INPUTS],
                              buckets, column_key(i, "input_mask"))
             for i in range(num_columns)]

  def cut(batch):
    for one in cutters:
      batch = one(batch)
    return batch

  return cut


@tf_keras.utils.register_keras_serializable(package="bert")
class TextEmbedderPreprocessor(BertPreprocessor):
  """Texts -> [CLS] text [SEP] rows, with the model's prompts.

  prompts: name -> text put before a text (sentence-transformers'
    `prompts`, e.g. {"query": "query: "}); `default_prompt_name` is used
    when `encode` names none.
  """

  def __init__(self, vocabulary, lower_case=None, seq_length=128,
               length_buckets=None, prompts: Optional[Dict[str, str]] = None,
               default_prompt_name: Optional[str] = None, **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets,
                     **kwargs)
    self.prompts = dict(prompts or {})
    if default_prompt_name is not None and default_prompt_name not in self.prompts:
      raise ConfigError(f"TextEmbedderPreprocessor: default_prompt_name="
                        f"{default_prompt_name!r} is not one of the prompts "
                        f"{sorted(self.prompts)}")
    self.default_prompt_name = default_prompt_name

  def call(self, inputs):
    """In-graph: string [batch] -> the encoder inputs [batch, seq_length]."""
    return self.tokenizer.packer([self.tokenizer.layer(inputs)],
                                 seq_length=self.seq_length)

  def prompt(self, prompt_name: Optional[str] = None,
             prompt: Optional[str] = None) -> str:
    """The text put before each input: `prompt`, or the prompt named
    `prompt_name`, or the default prompt's (none: "")."""
    if prompt is not None and prompt_name is not None:
      raise ConfigError("give prompt= or prompt_name=, not both")
    if prompt is not None:
      if not isinstance(prompt, str):
        raise ConfigError(f"prompt must be a string, got {inputs.show(prompt)}")
      return prompt
    name = prompt_name or self.default_prompt_name
    if name is None:
      return ""
    if name not in self.prompts:
      raise ConfigError(f"prompt_name={name!r} is not one of the model's "
                        f"prompts {sorted(self.prompts)}")
    return self.prompts[name]

  # ------------------------------------------------------------ checking
  def check(self, x, y=None, num_classes=None):
    """x: a list of texts, or a tuple of 2+ equally long lists (anchors,
    positives[, negatives...]; or (a, b) with y); y: None, or one finite
    score per row (CoSENT's gold similarity)."""
    del num_classes
    if isinstance(x, tuple) and len(x) != 2 and len(x) > 1:
      columns = [inputs.texts(c, f"x[{i}]") for i, c in enumerate(x)]
      for i, column in enumerate(columns[1:], 1):
        inputs.same_count(len(column), f"x: {{}} texts in x[{i}]",
                          len(columns[0]), "in x[0]")
      inputs.not_empty(columns[0], "x", "text")
    else:
      columns = inputs.text_columns(x)
    if y is None:
      return columns, None
    if len(columns) != 2:
      raise DataError(f"y: scores are for (a, b) pairs of texts; x has "
                      f"{len(columns)} column(s)")
    y = inputs.regression_targets(y, "y")
    inputs.same_count(len(y), "y: {} scores", len(columns[0]), "pairs in x")
    return columns, np.asarray(y, np.float32)

  def _encode(self, x: List[list], y, prompt: str = ""):
    if len(x) == 1:
      texts = x[0]
      if prompt:
        texts = [prompt + (t.decode("utf-8") if isinstance(t, bytes) else t)
                 for t in texts]
      return self.tokenizer.encode(list(texts), seq_length=self.seq_length)
    features = {}
    for i, column in enumerate(x):
      encoded = self.tokenizer.encode(list(column), seq_length=self.seq_length)
      features.update({column_key(i, k): v for k, v in encoded.items()})
    if y is not None:
      features["score"] = y
    return features

  def encode_texts(self, texts, prompt: str = "") -> Dict[str, np.ndarray]:
    """The rows of a list of texts (checked: one error naming a bad item),
    each after `prompt`."""
    columns, _ = self.check(texts)
    if len(columns) != 1:
      raise inputs.InputTypeError("texts: give one list of texts")
    return self._encode(columns, None, prompt)

  def targets(self, features):
    return features.get("score")

  # ------------------------------------------------------------- pipeline
  @staticmethod
  def num_columns(features) -> int:
    return sum(1 for k in features if k.endswith("/input_mask"))

  def num_rows(self, features) -> int:
    key = "input_mask" if "input_mask" in features else column_key(0, "input_mask")
    return len(features[key])

  def num_batches(self, features, batch_size: int) -> int:
    if not self.num_columns(features):
      return super().num_batches(features, batch_size)
    return math.ceil(self.num_rows(features) / batch_size)

  def dataset(self, features, targets=None, batch_size: int = 32,
              training: bool = False, shuffle: bool = True,
              seed: Optional[int] = lb.SHUFFLE_SEED) -> tf.data.Dataset:
    """Batches of columns (`{"text_i": inputs}`, with the scores as
    targets when given); plain rows go the base class's way."""
    k = self.num_columns(features)
    if not k:
      return super().dataset(features, targets, batch_size, training,
                             shuffle, seed)
    data = {column_key(i, n): features[column_key(i, n)]
            for i in range(k) for n in ENCODER_INPUTS}
    if targets is not None:
      data["targets"] = np.asarray(targets, np.float32)
    n = self.num_rows(features)
    ds = tf.data.Dataset.from_tensor_slices(data)
    if training:
      ds = lb.training_batches(ds, n, batch_size, self.length_buckets,
                               shuffle=shuffle, seed=seed,
                               group_by_length=False)
    else:
      ds = ds.batch(batch_size)
    cut = column_cutter(k, self.length_buckets)

    def split(d):
      d = cut(d)
      x = column_inputs(d, k)
      return x if targets is None else (x, d["targets"])

    ds = ds.map(split, num_parallel_calls=tf.data.AUTOTUNE)
    if not training:
      ds = ds.apply(tf.data.experimental.assert_cardinality(
          self.num_batches(features, batch_size)))
    return ds.prefetch(tf.data.AUTOTUNE)

  def get_config(self):
    return dict(super().get_config(), prompts=dict(self.prompts),
                default_prompt_name=self.default_prompt_name)
