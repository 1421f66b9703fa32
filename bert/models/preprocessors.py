"""Task preprocessors: what a task model built by `from_pretrained` carries as
`model.preprocessor`, so `fit`, `evaluate` and `predict` take raw inputs.

A preprocessor holds the checkpoint's vocabulary and casing and the
`seq_length`; it turns a task's raw inputs into the model's int inputs (the
same ids and packing as the task classes and `bert-train`: one tokenizer,
`bert.data.Tokenizer`, run in-graph over batches), builds the `tf.data`
pipeline over them (for training, the stream `bert-train` draws from:
shuffled, batches of one length bucket, cut to it: no compute on padding), and turns the model's outputs back into
what the task means (labels and probabilities, one tag per word).

  TextClassifierPreprocessor   strings, or (a, b) pairs of string lists
  TokenClassifierPreprocessor  lists of words (one list per sentence)
  SpanLabelerPreprocessor      (questions, contexts)
  MultipleChoicePreprocessor   (contexts, endings)
"""

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert.models.preprocessor_base import BertPreprocessor, text_columns


@tf_keras.utils.register_keras_serializable(package="bert")
class TextClassifierPreprocessor(BertPreprocessor):
  """Strings, or (a, b) pairs of string lists -> [CLS] a [SEP] (b [SEP]).

  `labels`: class names in logit order; `predict` then returns them (and
  `fit` accepts them as targets, besides class ids). `text_pairs`: whether
  the model takes (a, b) pairs; None until `fit` has seen its inputs (the
  serving export needs it).
  """

  def __init__(self, vocabulary, lower_case, seq_length=128,
               length_buckets=None, labels: Optional[Sequence[str]] = None,
               text_pairs: Optional[bool] = None, **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets, **kwargs)
    self.labels = list(labels) if labels else None
    self.text_pairs = text_pairs

  def call(self, inputs):
    """In-graph: string [batch] (or a pair of them) -> the encoder inputs,
    int32 [batch, seq_length]."""
    segments = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    return self.tokenizer.packer([self.tokenizer.layer(s) for s in segments],
                                 seq_length=self.seq_length)

  def encode(self, x, y=None):
    texts = text_columns(x, "TextClassifierPreprocessor")
    pairs = len(texts) == 2
    if self.text_pairs is None and y is not None:
      self.text_pairs = pairs           # what the model is trained on
    elif self.text_pairs is not None and pairs != self.text_pairs:
      raise ValueError("the model takes " + ("(a, b) pairs of texts" if
                       self.text_pairs else "single texts") + "; got " +
                       ("pairs" if pairs else "single texts"))
    return self.tokenizer.encode(*texts, seq_length=self.seq_length)

  def targets(self, y, features):
    y = np.asarray(y)
    if y.dtype.kind in "USO":
      if not self.labels:
        raise ValueError("string labels need the class names: "
                         "from_pretrained(..., labels=[...])")
      index = {name: i for i, name in enumerate(self.labels)}
      unknown = sorted({str(v) for v in y if v not in index})
      if unknown:
        raise ValueError(f"labels {unknown[:5]} are not among {self.labels}")
      y = np.asarray([index[v] for v in y], np.int32)
    if len(y) != len(features["input_word_ids"]):
      raise ValueError(f"{len(y)} labels for {len(features['input_word_ids'])} "
                       "texts")
    return y

  def decode(self, outputs, features, x):
    """{"labels", "probabilities"} (regression: {"scores"})."""
    logits = outputs["logits"]
    if logits.shape[-1] == 1:
      return dict(scores=logits[:, 0])
    probabilities = tf.nn.softmax(logits, -1).numpy()
    ids = probabilities.argmax(-1)
    labels = (np.asarray(self.labels, dtype=object)[ids] if self.labels
              else ids)
    return dict(labels=labels, probabilities=probabilities)

  def get_config(self):
    return dict(super().get_config(), labels=self.labels,
                text_pairs=self.text_pairs)


@tf_keras.utils.register_keras_serializable(package="bert")
class TokenClassifierPreprocessor(BertPreprocessor):
  """Lists of words (one per sentence) -> word pieces, one tag per word.

  Each word's tag sits on its first word piece (-1 on the others, on
  [CLS]/[SEP] and padding), as `bert.data.ner_data` encodes CoNLL files; a
  sentence longer than the sequence is split at word boundaries into
  several rows. `labels`: the tag names in logit order.
  """

  sequence_outputs = ("logits",)

  def __init__(self, vocabulary, lower_case, seq_length=128,
               length_buckets=None, labels: Sequence[str] = (), **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets, **kwargs)
    if not labels:
      raise ValueError("TokenClassifierPreprocessor needs the tag names: "
                       "from_pretrained(..., labels=[...])")
    self.labels = list(labels)

  def _sentences(self, x, tags=None):
    from bert.data import ner_data  # pylint: disable=g-import-not-at-top
    if tags is not None and len(tags) != len(x):
      raise ValueError(f"{len(tags)} tag lists for {len(x)} sentences")
    sentences = []
    for i, words in enumerate(x):
      if isinstance(words, str):
        raise ValueError(f"sentence {i}: give a list of words, not a string")
      sentence_tags = None if tags is None else list(tags[i])
      if sentence_tags is not None and len(sentence_tags) != len(words):
        raise ValueError(f"sentence {i}: {len(sentence_tags)} tags for "
                         f"{len(words)} words")
      sentences.append(ner_data.Sentence(list(words), sentence_tags, i + 1))
    return sentences

  def encode(self, x, y=None):
    """`y`: the tags, one list of tag names per sentence."""
    from bert.data import ner_data  # pylint: disable=g-import-not-at-top
    sentences = self._sentences(x, y)
    if y is not None:
      ner_data.check_tags(sentences, self.labels, "(tags given to fit)")
    return ner_data.encode_sentences(sentences, self.tokenizer, self.seq_length,
                                     self.labels if y is not None else None)

  def targets(self, y, features):
    del y
    return features["label_ids"]     # [rows, seq], -1 where no tag

  def decode(self, outputs, features, x):
    """{"tags": one list of tag names per sentence, one per word}."""
    from bert.data import ner_data  # pylint: disable=g-import-not-at-top
    predicted = outputs["logits"].argmax(-1)
    return dict(tags=ner_data.word_predictions(
        self._sentences(x), features, predicted, self.labels))

  def get_config(self):
    return dict(super().get_config(), labels=self.labels)


@tf_keras.utils.register_keras_serializable(package="bert")
class SpanLabelerPreprocessor(BertPreprocessor):
  """(questions, contexts) -> windows, answers cut from the contexts.

  Each (question, context) becomes windows of `seq_length` pieces every
  `doc_stride` context pieces, the question (at most `max_query_length`
  pieces) first, as `bert.data.squad_examples` encodes SQuAD. Targets for
  `fit`: one answer per question, `(text, answer_start)` with the start in
  characters of the context (or `None` for no answer: SQuAD 2.0). `predict`
  runs the task's post-processing: n-best spans inside the context, each
  piece scored only in its max-context window, at most `max_answer_length`
  pieces, the answer cut from the original context with its character
  offsets; with `version_2`, "" when the null score wins by more than
  `null_score_diff_threshold`.
  """

  sequence_outputs = ("start_logits", "end_logits")

  def __init__(self, vocabulary, lower_case, seq_length=384,
               length_buckets=None, doc_stride: int = 128,
               max_query_length: int = 64, n_best_size: int = 20,
               max_answer_length: int = 30, version_2: bool = False,
               null_score_diff_threshold: float = 0.0, **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets, **kwargs)
    self.doc_stride = doc_stride
    self.max_query_length = max_query_length
    self.n_best_size = n_best_size
    self.max_answer_length = max_answer_length
    self.version_2 = version_2
    self.null_score_diff_threshold = null_score_diff_threshold

  def examples(self, x, y=None):
    from bert.data import squad_examples  # pylint: disable=g-import-not-at-top
    if not (isinstance(x, tuple) and len(x) == 2):
      raise ValueError("SpanLabelerPreprocessor: give (questions, contexts), "
                       "two lists of strings")
    questions, contexts = (list(t) for t in x)
    if len(questions) != len(contexts):
      raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
    if y is not None and len(y) != len(questions):
      raise ValueError(f"{len(y)} answers for {len(questions)} questions")
    out = []
    for i, (question, context) in enumerate(zip(questions, contexts)):
      answers, impossible = [], False
      if y is not None:
        answer = y[i]
        if answer is None:
          impossible = True
        else:
          text, start = (answer["text"], answer["answer_start"]) if isinstance(
              answer, dict) else answer
          if context[start:start + len(text)] != text:
            raise ValueError(f"answer {i}: {text!r} is not at character "
                             f"{start} of its context")
          answers = [(text, int(start))]
      out.append(squad_examples.SquadExample(str(i), question, context, answers,
                                         impossible))
    return out

  def encode(self, x, y=None):
    from bert.data import squad_examples  # pylint: disable=g-import-not-at-top
    examples = self.examples(x, y)
    arrays, meta = squad_examples.encode_examples(
        examples, self.tokenizer, self.seq_length, self.doc_stride,
        self.max_query_length, training=y is not None)
    # The windows' bookkeeping for `decode` (not model inputs).
    return dict(arrays, examples=examples, meta=meta)

  def targets(self, y, features):
    return {k: features[k] for k in ("start_positions", "end_positions")}

  def decode(self, outputs, features, x):
    """{"answers": text per question, "start", "end": its character offsets
    in the context (None for no answer), "nbest": the n-best lists}."""
    from bert.data import squad_eval  # pylint: disable=g-import-not-at-top
    examples = features["examples"]
    _, nbest, null_odds = squad_eval.postprocess(
        examples, features["meta"], outputs["start_logits"],
        outputs["end_logits"], self.n_best_size, self.max_answer_length,
        self.version_2, self.null_score_diff_threshold)
    answers, starts, ends = [], [], []
    for e in examples:
      best = next((b for b in nbest[e.qas_id] if b["text"]), None)
      if best is None or (self.version_2 and null_odds[e.qas_id]
                          > self.null_score_diff_threshold):
        best = dict(text="", start=None, end=None)
      answers.append(best["text"])
      starts.append(best["start"])
      ends.append(best["end"])
    return dict(answers=answers, start=starts, end=ends,
                nbest=[nbest[e.qas_id] for e in examples])

  def get_config(self):
    return dict(super().get_config(), doc_stride=self.doc_stride,
                max_query_length=self.max_query_length,
                n_best_size=self.n_best_size,
                max_answer_length=self.max_answer_length,
                version_2=self.version_2,
                null_score_diff_threshold=self.null_score_diff_threshold)


@tf_keras.utils.register_keras_serializable(package="bert")
class MultipleChoicePreprocessor(BertPreprocessor):
  """(contexts, endings) -> one [CLS] context [SEP] ending [SEP] row per
  choice: int32 [n, choices, seq_length], as the SWAG task encodes them.
  `endings`: per context, a list of the same number of strings. Targets:
  the index of the right ending. `predict`: {"choices", "probabilities"}."""

  def encode(self, x, y=None):
    del y
    if not (isinstance(x, tuple) and len(x) == 2):
      raise ValueError("MultipleChoicePreprocessor: give (contexts, endings)")
    contexts, endings = list(x[0]), [list(e) for e in x[1]]
    if len(contexts) != len(endings):
      raise ValueError(f"{len(contexts)} contexts but {len(endings)} ending lists")
    counts = {len(e) for e in endings}
    if len(counts) != 1:
      raise ValueError(f"every context needs the same number of endings; got "
                       f"{sorted(counts)}")
    c = counts.pop()
    flat = self.tokenizer.encode([t for t in contexts for _ in range(c)],
                                 [e for ends in endings for e in ends],
                                 seq_length=self.seq_length)
    return {k: v.reshape(len(contexts), c, self.seq_length)
            for k, v in flat.items()}

  def decode(self, outputs, features, x):
    probabilities = tf.nn.softmax(outputs["logits"], -1).numpy()
    return dict(choices=probabilities.argmax(-1), probabilities=probabilities)
