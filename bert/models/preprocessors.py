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
  FillMaskPreprocessor         texts with the mask token
"""

import dataclasses
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert.data import ner_data, squad_config, squad_eval, squad_examples
from bert.data.errors import DataError
from bert.data.squad_config import SquadConfig
from bert.models import inputs
from bert.models.preprocessor_base import BertPreprocessor
from bert.validation import ConfigError, check_int, check_labels


@tf_keras.utils.register_keras_serializable(package="bert")
class TextClassifierPreprocessor(BertPreprocessor):
  """Strings, or (a, b) pairs of string lists -> [CLS] a [SEP] (b [SEP]).

  `labels`: class names in logit order; `predict` then returns them (and
  `fit` accepts them as targets, besides class ids). `text_pairs`: whether
  the model takes (a, b) pairs; None until `fit` has seen its inputs (the
  serving export needs it).
  """

  def __init__(self, vocabulary, lower_case=None, seq_length=128,
               length_buckets=None, labels: Optional[Sequence[str]] = None,
               text_pairs: Optional[bool] = None, **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets, **kwargs)
    self.labels = check_labels(type(self).__name__, labels) or None
    self.text_pairs = text_pairs

  def call(self, inputs):
    """In-graph: string [batch] (or a pair of them) -> the encoder inputs,
    int32 [batch, seq_length]."""
    segments = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    return self.tokenizer.packer([self.tokenizer.layer(s) for s in segments],
                                 seq_length=self.seq_length)

  def check(self, x, y=None, num_classes=None):
    """x: a list of texts, or an (a, b) pair of lists; y: class ids, or
    names in `labels` (regression, num_classes=1: finite numbers)."""
    columns = inputs.text_columns(x)
    if y is None:
      return columns, None
    if num_classes is None and self.labels:
      num_classes = len(self.labels)
    if num_classes == 1:
      y = inputs.regression_targets(y, "y")
    elif (num_classes is None and inputs.label_array(y, "y").dtype.kind
          == "f"):
      # The head is unknown (a direct `encode`): fractions are targets.
      y = inputs.regression_targets(y, "y")
    else:
      y = inputs.class_ids(y, "y", num_classes, self.labels)
    inputs.same_count(len(y), "y: {} labels", len(columns[0]), "texts in x")
    return columns, y

  def _encode(self, x, y):
    pairs = len(x) == 2
    if self.text_pairs is None and y is not None:
      self.text_pairs = pairs           # what the model is trained on
    elif self.text_pairs is not None and pairs != self.text_pairs:
      wanted = "(a, b) pairs of texts" if self.text_pairs else "single texts"
      raise DataError(f"x: the model takes {wanted}; got "
                      + ("pairs" if pairs else "single texts"))
    features = self.tokenizer.encode(*x, seq_length=self.seq_length)
    if y is not None:
      features["label"] = y
    return features

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

  def __init__(self, vocabulary, lower_case=None, seq_length=128,
               length_buckets=None, labels: Sequence[str] = (), **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets, **kwargs)
    if not labels:
      raise ConfigError("TokenClassifierPreprocessor needs the tag names: "
                        "from_pretrained(..., labels=[...])")
    self.labels = check_labels(type(self).__name__, labels)

  def check(self, x, y=None, num_classes=None):
    """x: a list of sentences, each a list of words; y: per sentence, one
    tag name per word."""
    del num_classes
    return inputs.tagged_sentences(x, y, self.labels)

  @staticmethod
  def _sentences(words, tags=None):
    return [ner_data.Sentence(list(w), None if tags is None else list(tags[i]),
                              i + 1) for i, w in enumerate(words)]

  def _encode(self, x, y):
    """`y`: the tags, one list of tag names per sentence."""
    sentences = self._sentences(x, y)
    features = ner_data.encode_sentences(sentences, self.tokenizer,
                                         self.seq_length,
                                         self.labels if y is not None else None)
    # The sentences for `decode` (not model inputs).
    return dict(features, sentences=sentences)

  def targets(self, features):
    return features["label_ids"]     # [rows, seq], -1 where no tag

  def decode(self, outputs, features, x):
    """{"tags": one list of tag names per sentence, one per word}."""
    predicted = outputs["logits"].argmax(-1)
    return dict(tags=ner_data.word_predictions(
        features["sentences"], features, predicted, self.labels))

  def get_config(self):
    return dict(super().get_config(), labels=self.labels)


@tf_keras.utils.register_keras_serializable(package="bert")
class SpanLabelerPreprocessor(BertPreprocessor):
  """(questions, contexts) -> windows, answers cut from the contexts.

  `squad` (a `bert.data.squad_config.SquadConfig`; its fields may also be
  given one by one, e.g. `doc_stride=64`, and `seq_length` overrides its
  own) says how: each (question, context) becomes windows of `seq_length`
  pieces every `doc_stride` context pieces, the question (at most
  `max_query_length` pieces) first, as `bert.data.squad_examples` encodes
  SQuAD. Targets for `fit`: one answer per question, `(text,
  answer_start)` with the start in characters of the context (or `None`
  for no answer: SQuAD 2.0). `predict` runs the task's post-processing
  (`bert.data.squad_eval.postprocess`): n-best spans inside the context,
  each piece scored only in its max-context window, at most
  `max_answer_length` pieces, the answer cut from the original context with
  its character offsets; with `version_2`, "" when the null score wins by
  more than `null_score_diff_threshold`.
  """

  sequence_outputs = ("start_logits", "end_logits")

  def __init__(self, vocabulary, lower_case=None, seq_length=None,
               length_buckets=None, squad: Optional[SquadConfig] = None,
               **kwargs):
    settings = {k: kwargs.pop(k) for k in squad_config.FIELDS if k in kwargs}
    if seq_length is not None:
      settings["seq_length"] = seq_length
    squad = (squad or SquadConfig()).replace(**settings)
    super().__init__(vocabulary, lower_case, squad.seq_length,
                     length_buckets, **kwargs)
    self.squad = squad

  def check(self, x, y=None, num_classes=None):
    """x: (questions, contexts); y: per question (text, answer_start), a
    dict of them, or None (no answer)."""
    del num_classes
    return inputs.questions_and_answers(x, y)

  def examples(self, x, y=None):
    """SQuAD examples of checked `x` and answers `y`."""
    return [squad_examples.SquadExample(
        str(i), question, context,
        [] if y is None or y[i] is None else [y[i]],
        y is not None and y[i] is None)
            for i, (question, context) in enumerate(zip(*x))]

  def _encode(self, x, y):
    examples = self.examples(x, y)
    arrays, meta = squad_examples.encode_examples(
        examples, self.tokenizer, self.squad, training=y is not None)
    # The windows' bookkeeping for `decode` (not model inputs).
    return dict(arrays, examples=examples, meta=meta)

  def targets(self, features):
    return {k: features[k] for k in ("start_positions", "end_positions")}

  def decode(self, outputs, features, x):
    """{"answers": text per question (`postprocess`' predictions), "start",
    "end": its character offsets in the context (None for no answer),
    "nbest": the n-best lists}."""
    examples = features["examples"]
    predictions, nbest, _ = squad_eval.postprocess(
        examples, features["meta"], outputs["start_logits"],
        outputs["end_logits"], self.squad)
    answers = [predictions[e.qas_id] for e in examples]
    # The answer's entry of its n-best list (texts there are distinct).
    chosen = [next((b for b in nbest[e.qas_id] if a and b["text"] == a),
                   dict(start=None, end=None))
              for e, a in zip(examples, answers)]
    return dict(answers=answers, start=[b["start"] for b in chosen],
                end=[b["end"] for b in chosen],
                nbest=[nbest[e.qas_id] for e in examples])

  def get_config(self):
    # The fields one by one (seq_length is the base's), as models saved
    # before `squad` existed hold them.
    settings = dataclasses.asdict(self.squad)
    del settings["seq_length"]
    return dict(super().get_config(), **settings)


@tf_keras.utils.register_keras_serializable(package="bert")
class MultipleChoicePreprocessor(BertPreprocessor):
  """(contexts, endings) -> one [CLS] context [SEP] ending [SEP] row per
  choice: int32 [n, choices, seq_length], as the SWAG task encodes them.
  `endings`: per context, a list of the same number of strings. Targets:
  the index of the right ending. `predict`: {"choices", "probabilities"}."""

  def check(self, x, y=None, num_classes=None):
    """x: (contexts, endings); y: the index of each context's right ending."""
    del num_classes
    return inputs.contexts_and_endings(x, y)

  def _encode(self, x, y):
    contexts, endings = x
    c = len(endings[0])
    flat = self.tokenizer.encode([t for t in contexts for _ in range(c)],
                                 [e for ends in endings for e in ends],
                                 seq_length=self.seq_length)
    features = {k: v.reshape(len(contexts), c, self.seq_length)
                for k, v in flat.items()}
    if y is not None:
      features["label"] = y
    return features

  def decode(self, outputs, features, x):
    probabilities = tf.nn.softmax(outputs["logits"], -1).numpy()
    return dict(choices=probabilities.argmax(-1), probabilities=probabilities)


@tf_keras.utils.register_keras_serializable(package="bert")
class FillMaskPreprocessor(BertPreprocessor):
  """Texts holding the vocabulary's mask token ("[MASK]", RoBERTa's
  "<mask>") -> the encoder inputs and `masked_lm_positions` (every mask of
  the row; 0 past the row's masks); `decode` gives, per text and per mask,
  the `top_k` tokens: {"token" (id), "token_str", "score" (probability),
  "sequence" (the text with that token in the mask's place)}, as
  transformers' fill-mask pipeline gives them.
  """

  def __init__(self, vocabulary, lower_case=None, seq_length=128,
               length_buckets=None, top_k: int = 5,
               clean_up_spaces: Optional[bool] = None, **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets,
                     **kwargs)
    self.top_k = check_int(type(self).__name__, "top_k", top_k, 1)
    # WordPiece sequences' spaces before punctuation: as the checkpoint's
    # tokenizer.json decoder says (`Vocabulary.clean_up_spaces`).
    self.clean_up_spaces = bool(self.vocabulary.clean_up_spaces
                                if clean_up_spaces is None else clean_up_spaces)
    self.mask_token = self.vocabulary.mask_token
    self.mask_id = self.tokenizer.get_special_tokens_dict().get("mask_id")
    if self.mask_id is None:
      raise DataError(f"{self.vocabulary.source} has no {self.mask_token} "
                      "token, which fill-mask needs")

  def _tokenizer_options(self, vocabulary):
    # The mask token is matched whole in the text (BytePairTokenizer and
    # SentencePieceTokenizer match theirs always; WordPiece's reference
    # tokenizer would split "[MASK]").
    if vocabulary.kind == "wordpiece":
      return dict(special_tokens=(vocabulary.mask_token,))
    return {}

  def model_inputs(self, features):
    return dict(super().model_inputs(features),
                masked_lm_positions=features["masked_lm_positions"])

  def check(self, x, y=None, num_classes=None):
    """x: a list of texts, each with at least one mask token."""
    del num_classes
    if y is not None:
      raise DataError("fill-mask takes texts alone (no labels)")
    texts = inputs.texts(x, "x")
    inputs.not_empty(texts, "x", "text")
    for i, text in enumerate(texts):
      text = text.decode("utf-8") if isinstance(text, bytes) else text
      if self.mask_token not in text:
        raise DataError(f"x[{i}] has no {self.mask_token} token: {text[:60]!r}")
    return texts, None

  def _encode(self, x, y):
    del y
    features = self.tokenizer.encode(x, seq_length=self.seq_length)
    is_mask = features["input_word_ids"] == self.mask_id         # [n, seq]
    counts = is_mask.sum(-1)
    for i, text in enumerate(x):
      text = text.decode("utf-8") if isinstance(text, bytes) else text
      if counts[i] < text.count(self.mask_token):
        raise DataError(f"x[{i}]: a {self.mask_token} token falls past "
                        f"seq_length={self.seq_length}")
    positions = np.zeros([len(x), max(1, int(counts.max()))], np.int32)
    for i, row in enumerate(is_mask):
      found = np.nonzero(row)[0]
      positions[i, :len(found)] = found
    features.update(masked_lm_positions=positions,
                    mask_count=counts.astype(np.int32))
    return features

  def decode(self, outputs, features, x):
    """Per text, per mask: the top_k [{"token", "token_str", "score",
    "sequence"}] best first."""
    logits = np.asarray(outputs["masked_lm_logits"], np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    pad = self.tokenizer.get_special_tokens_dict()["padding_id"]
    vocabulary = self.vocabulary
    out = []
    for i in range(len(probs)):
      count = int(features["mask_count"][i])
      ids = features["input_word_ids"][i][features["input_mask"][i] > 0]
      ids = ids[ids != pad]
      masks = []
      for m in range(count):
        p = probs[i, m]
        best = np.argsort(-p, kind="stable")[:self.top_k]
        where = features["masked_lm_positions"][i, m]
        row = []
        for token in best:
          filled = ids.copy()
          filled[where] = token
          row.append(dict(
              token=int(token), token_str=vocabulary.decode(
                  [token], clean_up_spaces=self.clean_up_spaces),
              score=float(p[token]),
              # One mask: special tokens left out; several: kept, so the
              # other masks show (as transformers' pipeline).
              sequence=vocabulary.decode(
                  filled, skip_special_tokens=count == 1,
                  clean_up_spaces=self.clean_up_spaces)))
        masks.append(row)
      out.append(masks)
    return out

  def get_config(self):
    return dict(super().get_config(), top_k=self.top_k,
                clean_up_spaces=self.clean_up_spaces)
