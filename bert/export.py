"""Serving SavedModels of in-memory models, loadable without this library.

Every export loads with `tf.saved_model.load` in a process that imports only
tensorflow and (for models that tokenize) tensorflow_text, whose ops the
tokenizer uses. A `bert-train` run's model_dir is exported through these by
`bert.training.trained_run.export_trained`.

- `export_encoder`: the TF Hub BERT encoder interface (dict inputs
  `input_word_ids`/`input_mask`/`input_type_ids`, dict outputs
  `sequence_output`/`pooled_output`/`encoder_outputs`; `trainable_variables`,
  `regularization_losses`; `hub.KerasLayer(path, trainable=True)` fine-tunes
  it), with an `.mlm` sub-object (adds `masked_lm_positions` -> `mlm_logits`)
  when masked-LM head weights are given.
- `export_preprocessor`: raw strings -> encoder inputs, with `.tokenize` and
  `.bert_pack_inputs` (seq_length changeable at call time).
- `export_classifier`: one `serving_default` signature, strings `text`
  (and `text_b` for pairs) -> `probabilities`, `label`; `score` for
  regression.
- `export_span_labeler`: `question`, `context` -> `answer` (cut from the
  context), `score`, `start`/`end` (UTF-8 byte offsets in the context); one
  window: the context is truncated to what fits after the question.
- `export_tagger`: `text` -> `words` (whitespace-split) and `tags`, both
  [batch, max words] padded with ""; words past the sequence length get "".
"""

import os
from typing import Optional, Sequence

import tensorflow as tf
import tf_keras

from bert.data._io import atomic_folder
from bert.features import ENCODER_INPUTS
from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.networks.bert_preprocessor import make_preprocessor


def _output_folder(path: str):
  """The SavedModel folder `path`, written atomically: it replaces an empty
  folder or an earlier SavedModel, and a failed export leaves nothing."""
  return atomic_folder(
      path, lambda p: os.path.isdir(p) and (
          not os.listdir(p) or os.path.exists(os.path.join(p, "saved_model.pb"))),
      "a SavedModel folder", FileExistsError)


def _save_serving(module: tf.Module, path: str) -> None:
  """Writes a serving module with its `serve` function as `serving_default`."""
  with _output_folder(path) as tmp:
    tf.saved_model.save(module, tmp,
                        signatures={"serving_default": module.serve})


def export_encoder(encoder, path: str, masked_lm=None) -> None:
  """Writes `encoder` (a BertEncoder) as a TF Hub reusable SavedModel.

  Args:
    masked_lm: optional MaskedLMHead tied to this encoder's embeddings; it
      becomes the `.mlm` sub-object.
  """
  inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k)
            for k in ENCODER_INPUTS}
  outputs = encoder(inputs)
  hub_encoder = tf_keras.Model(inputs, dict(
      sequence_output=outputs["sequence_output"],
      pooled_output=outputs["pooled_output"],
      encoder_outputs=outputs["encoder_outputs"]), name="bert_encoder")
  if masked_lm is not None:
    mlm_inputs = dict(inputs, masked_lm_positions=tf_keras.Input(
        shape=(None,), dtype=tf.int32, name="masked_lm_positions"))
    mlm_outputs = encoder({k: mlm_inputs[k] for k in ENCODER_INPUTS})
    hub_encoder.mlm = tf_keras.Model(mlm_inputs, dict(
        sequence_output=mlm_outputs["sequence_output"],
        pooled_output=mlm_outputs["pooled_output"],
        encoder_outputs=mlm_outputs["encoder_outputs"],
        mlm_logits=masked_lm(mlm_outputs["sequence_output"],
                             mlm_inputs["masked_lm_positions"])), name="mlm")
  with _output_folder(path) as tmp:
    hub_encoder.save(tmp, include_optimizer=False, save_format="tf")


def export_preprocessor(vocab_file: str, path: str, lower_case: bool = True,
                        seq_length: int = 128, num_text_inputs: int = 1) -> None:
  """Writes a TF Hub-style BERT preprocessor SavedModel."""
  model = make_preprocessor(vocab_file, lower_case=lower_case,
                            seq_length=seq_length, num_text_inputs=num_text_inputs)
  with _output_folder(path) as tmp:
    tf.saved_model.save(model, tmp)


class _ClassifierServing(tf.Module):
  """Raw strings -> class probabilities and label names."""

  def __init__(self, model, vocab_file, lower_case, seq_length, labels, pairs):
    super().__init__(name="classifier_serving")
    self.model = model
    self.tokenizer, self.packer = tokenizer_and_packer(vocab_file, lower_case,
                                                       seq_length)
    self.labels = tf.constant(list(labels or []), tf.string)
    self.regression = not labels
    text = tf.TensorSpec([None], tf.string, name="text")
    if pairs:
      self.serve = tf.function(
          lambda text, text_b: self._serve([text, text_b]),
          input_signature=[text, tf.TensorSpec([None], tf.string, name="text_b")])
    else:
      self.serve = tf.function(lambda text: self._serve([text]),
                               input_signature=[text])

  def _serve(self, texts):
    inputs = self.packer([self.tokenizer(t) for t in texts])
    logits = self.model(inputs, training=False)["logits"]
    if self.regression:
      return dict(score=logits[:, 0])
    probabilities = tf.nn.softmax(logits, -1)
    return dict(probabilities=probabilities,
                label=tf.gather(self.labels, tf.argmax(probabilities, -1)))


def export_classifier(model, path: str, vocab_file: str, lower_case: bool,
                      seq_length: int, labels: Optional[Sequence[str]],
                      pairs: bool) -> None:
  """Writes a serving SavedModel of a fine-tuned BertClassifier.

  Args:
    labels: class names in logit order; None for regression.
    pairs: whether the model takes a second text (`text_b`).
  """
  module = _ClassifierServing(model, vocab_file, lower_case, seq_length,
                              labels, pairs)
  _save_serving(module, path)


class _SpanServing(tf.Module):
  """Question + context strings -> the best answer span of one window."""

  def __init__(self, model, vocab_file, lower_case, seq_length,
               max_query_length, max_answer_length):
    super().__init__(name="span_labeler_serving")
    self.model = model
    self.tokenizer, self.packer = tokenizer_and_packer(vocab_file, lower_case,
                                                       seq_length)
    self.seq_length = seq_length
    self.max_query_length = max_query_length
    self.max_answer_length = max_answer_length
    self.serve = tf.function(self._serve, input_signature=[
        tf.TensorSpec([None], tf.string, name="question"),
        tf.TensorSpec([None], tf.string, name="context")])

  def _serve(self, question, context):
    q = self.tokenizer(question)[:, :self.max_query_length]         # [b, (q)]
    c, c_start, c_end = self.tokenizer.tokenize(context, with_offsets=True)
    q_len = tf.cast(q.row_lengths(), tf.int32)
    keep = tf.minimum(tf.cast(c.row_lengths(), tf.int32),
                      self.seq_length - 3 - q_len)                   # [b]
    c = tf.ragged.boolean_mask(c, tf.ragged.range(c.row_lengths())
                               < tf.cast(keep, tf.int64)[:, None])
    out = self.model(self.packer([q, c]), training=False)
    start, end = out["start_logits"], out["end_logits"]              # [b, s]
    positions = tf.range(self.seq_length)[None, :]
    first = (q_len + 2)[:, None]
    in_context = (positions >= first) & (positions < first + keep[:, None])
    neg = tf.constant(-1e9, start.dtype)
    start = tf.where(in_context, start, neg)
    end = tf.where(in_context, end, neg)
    # score[b, i, j] = start_i + end_j, for i <= j < i + max_answer_length.
    scores = start[:, :, None] + end[:, None, :]
    length = positions[0][None, :] - positions[0][:, None]           # j - i
    allowed = (length >= 0) & (length < self.max_answer_length)
    scores = tf.where(allowed[None], scores, neg)
    flat = tf.argmax(tf.reshape(scores, [tf.shape(scores)[0], -1]), -1,
                     output_type=tf.int32)
    i, j = flat // self.seq_length, flat % self.seq_length
    piece_i = tf.stack([tf.range(tf.shape(i)[0]), i - first[:, 0]], 1)
    piece_j = tf.stack([tf.range(tf.shape(j)[0]), j - first[:, 0]], 1)
    byte_start = tf.gather_nd(c_start.to_tensor(), piece_i)
    byte_end = tf.gather_nd(c_end.to_tensor(), piece_j)
    return dict(answer=tf.strings.substr(context, byte_start,
                                         byte_end - byte_start, unit="BYTE"),
                score=tf.reduce_max(tf.reshape(scores, [tf.shape(scores)[0], -1]), -1),
                start=byte_start, end=byte_end)


def export_span_labeler(model, path: str, vocab_file: str, lower_case: bool,
                        seq_length: int = 384, max_query_length: int = 64,
                        max_answer_length: int = 30) -> None:
  """Writes a serving SavedModel of a fine-tuned BertSpanLabeler."""
  module = _SpanServing(model, vocab_file, lower_case, seq_length,
                        max_query_length, max_answer_length)
  _save_serving(module, path)


class _TaggerServing(tf.Module):
  """Text -> whitespace-split words and a tag per word (first piece)."""

  def __init__(self, model, vocab_file, lower_case, seq_length, labels):
    super().__init__(name="tagger_serving")
    self.model = model
    self.tokenizer, self.packer = tokenizer_and_packer(vocab_file, lower_case,
                                                       seq_length)
    self.unk = self.tokenizer.get_special_tokens_dict()["unknown_id"]
    self.seq_length = seq_length
    self.labels = tf.constant(list(labels), tf.string)
    self.serve = tf.function(self._serve, input_signature=[
        tf.TensorSpec([None], tf.string, name="text")])

  def _serve(self, text):
    words = tf.strings.split(text)                                   # [b, (w)]
    pieces = self.tokenizer(words.flat_values)                       # [n, (p)]
    # A word without pieces (e.g. only a zero-width character) is [UNK].
    n = tf.shape(pieces.row_lengths())[0]
    pieces = tf.concat([pieces, tf.RaggedTensor.from_tensor(
        tf.fill([n, 1], self.unk))], axis=1)
    keep = tf.maximum(pieces.row_lengths() - 1, 1)
    pieces = tf.ragged.boolean_mask(pieces, tf.ragged.range(pieces.row_lengths())
                                    < keep[:, None])
    per_word_pieces = tf.RaggedTensor.from_row_lengths(pieces, words.row_lengths())
    inputs = self.packer([per_word_pieces])
    predicted = tf.argmax(self.model(inputs, training=False)["logits"], -1,
                          output_type=tf.int32)                      # [b, s]
    # Position of each word's first piece: 1 + pieces of the words before it.
    lengths = tf.RaggedTensor.from_row_lengths(
        tf.cast(pieces.row_lengths(), tf.int32), words.row_lengths())
    first = 1 + tf.math.cumsum(lengths, axis=1, exclusive=True)
    fits = first <= self.seq_length - 2         # the first piece was packed
    tags = tf.gather(self.labels, tf.gather(predicted, tf.minimum(
        first, self.seq_length - 1), batch_dims=1))
    tags = tf.where(fits, tags, "")
    return dict(words=words.to_tensor(""), tags=tags.to_tensor(""))


def export_tagger(model, path: str, vocab_file: str, lower_case: bool,
                  seq_length: int, labels: Sequence[str]) -> None:
  """Writes a serving SavedModel of a fine-tuned BertTokenClassifier."""
  module = _TaggerServing(model, vocab_file, lower_case, seq_length, labels)
  _save_serving(module, path)
