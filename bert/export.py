"""Serving SavedModels of in-memory models, loadable without this library.

Every export loads with `tf.saved_model.load` in a process that imports only
tensorflow and (for models that tokenize) tensorflow_text, whose ops the
tokenizer uses. A `bert-train` run's model_dir is exported through these by
`bert.tasks.trained_run.export_trained`.

- `export_encoder`: the TF Hub BERT encoder interface (dict inputs
  `input_word_ids`/`input_mask`/`input_type_ids`, dict outputs
  `sequence_output`/`pooled_output`/`encoder_outputs`; `trainable_variables`,
  `regularization_losses`; `hub.KerasLayer(path, trainable=True)` fine-tunes
  it), with an `.mlm` sub-object (adds `masked_lm_positions` -> `mlm_logits`)
  when masked-LM head weights are given.
- `export_preprocessing_model`: raw strings -> encoder inputs, TF Hub's
  preprocessing interface (`bert_*_preprocess`), with `.tokenize` and
  `.bert_pack_inputs` (seq_length changeable at call time).
- `export_classifier`: strings `text` (and `text_b` for pairs) ->
  `probabilities`, `label`; `score` for regression.
- `export_span_labeler`: `question`, `context` -> `answer` (cut from the
  context), `score`, `start`/`end` (UTF-8 byte offsets in the context); the
  best span over every `doc_stride` window, as `predict` finds it.
- `export_tagger`: `text` -> `words` (whitespace-split) and `tags`, both
  [batch, max words] padded with ""; a sentence longer than the sequence is
  cut into several rows at word boundaries, as `predict` cuts it.
- `export_embedder`: `text` -> `embeddings` (float32 [batch, dim]), and
  TF Hub's text-embedding call `obj(texts)` (`bert.serving.embedder`).

The serving exports (`bert.serving`) have a `serving_default`
signature on raw strings and one per stage (`preprocess`, `network`,
`postprocess`). Each batch runs at the smallest length bucket that holds its
longest row. `precision="int8"` adds the network as a dynamic-range int8
TFLite model, `"bf16"` computes it in bf16; `load_serving(path)` runs any of
them with the same inputs and outputs, and `write_serving`'s accuracy gate
refuses a reduced precision that scores too far below fp32.
"""

import os
import tempfile
from typing import Any, Dict, Optional, Sequence, Union

import tensorflow as tf
import tf_keras

from bert.data import length_buckets as lb
from bert.data.squad_config import SquadConfig
from bert.features import ENCODER_INPUTS
from bert.io import tracing_for_savedmodel
from bert.networks.preprocessing_model import make_preprocessing_model
from bert.serving.classifier import ClassifierServing
from bert.serving.embedder import EmbedderServing
from bert.serving.fill_mask import FillMaskServing
from bert.serving.gate import AccuracyGate, embedding_gate
from bert.serving import loader, writer
from bert.serving.tagger import TaggerServing
from bert.serving.writer import output_folder
from bert.validation import ConfigError, renamed_keywords

# A vocabulary: a vocab.txt path or its tokens in id order.
Vocab = Union[str, os.PathLike, Sequence[str]]


# The one loader and the one writer of every serving export (and the
# writer's checks), here beside the per-task writers.
load_serving = loader.load_serving
write_serving = writer.write_serving
check_precision = writer.check_precision
check_runtime = writer.check_runtime


@renamed_keywords(do_lower_case="lower_case")
def export_encoder(encoder, path: str, masked_lm=None,
                   vocab_file: Optional[str] = None,
                   lower_case: Optional[bool] = None) -> None:
  """Writes `encoder` (a BertEncoder) as a TF Hub reusable SavedModel.

  As Model Garden's `export_tfhub` does, the vocab is an asset
  (`.vocab_file`) and the casing a variable (`.do_lower_case`, TF Hub's
  name); the config is an asset too (`bert_config.json`), so
  `bert.checkpoints.load` reads the export back exactly.

  Args:
    masked_lm: optional MaskedLMHead tied to this encoder's embeddings; it
      becomes the `.mlm` sub-object.
    vocab_file, lower_case: the tokenizer's, when known.
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
  with tempfile.TemporaryDirectory() as config_dir, output_folder(path) as tmp, \
      tracing_for_savedmodel():
    config_file = os.path.join(config_dir, "bert_config.json")
    encoder.config.to_json_file(config_file)
    hub_encoder.bert_config_file = tf.saved_model.Asset(config_file)
    if vocab_file is not None:
      hub_encoder.vocab_file = tf.saved_model.Asset(vocab_file)
    if lower_case is not None:
      hub_encoder.do_lower_case = tf.Variable(lower_case, trainable=False)
    hub_encoder.save(tmp, include_optimizer=False, save_format="tf")


def export_preprocessing_model(vocab_file: str, path: str,
                               lower_case: bool = True, seq_length: int = 128,
                               num_text_inputs: int = 1) -> None:
  """Writes a TF Hub-style BERT preprocessing SavedModel
  (`bert.networks.make_preprocessing_model`)."""
  model = make_preprocessing_model(vocab_file, lower_case=lower_case,
                                   seq_length=seq_length,
                                   num_text_inputs=num_text_inputs)
  with output_folder(path) as tmp, tracing_for_savedmodel():
    tf.saved_model.save(model, tmp)


# The former name, still read.
export_preprocessor = export_preprocessing_model


def _buckets(buckets, seq_length):
  return lb.check_length_buckets(
      lb.default_length_buckets(seq_length) if buckets is None else buckets,
      seq_length, "serving length_buckets")


@renamed_keywords(vocab_file="vocab")
def export_classifier(model, path: str, vocab: Vocab, lower_case: bool,
                      seq_length: int, labels: Optional[Sequence[str]],
                      pairs: bool, precision: Optional[str] = None,
                      length_buckets: Optional[Sequence[int]] = None,
                      gate: Optional[AccuracyGate] = None,
                      runtime: Optional[str] = None) -> Dict[str, Any]:
  """Writes a serving SavedModel of a fine-tuned BertClassifier.

  Args:
    vocab: the model's vocabulary (a vocab.txt path or its tokens).
    labels: class names in logit order; None for regression.
    pairs: whether the model takes a second text (`text_b`).
    precision, gate, runtime: see `write_serving`.
    length_buckets: the lengths a batch is cut to (default: the library's).
  """
  buckets = _buckets(length_buckets, seq_length)
  return write_serving(
      lambda m: ClassifierServing(m, vocab, lower_case, seq_length,
                                  labels, pairs, buckets),
      model, path, "classifier", precision, gate, runtime=runtime)


def export_fill_mask(model, path: str, vocab: Vocab, lower_case: bool,
                     seq_length: int, top_k: int = 5,
                     clean_up_spaces: bool = True, precision: Optional[str] = None,
                     length_buckets: Optional[Sequence[int]] = None,
                     runtime: Optional[str] = None) -> Dict[str, Any]:
  """Writes a serving SavedModel of a `BertMaskedLM`: `text` (with the
  vocabulary's mask token) -> per mask the `top_k` `token`, `token_str` and
  `score` (`bert.serving.fill_mask`). `precision`, `runtime`: see
  `write_serving`."""
  buckets = _buckets(length_buckets, seq_length)
  return write_serving(
      lambda m: FillMaskServing(m, vocab, lower_case, seq_length, top_k,
                                clean_up_spaces, buckets),
      model, path, "fill_mask", precision, runtime=runtime)


@renamed_keywords(vocab_file="vocab")
def export_span_labeler(model, path: str, vocab: Vocab, lower_case: bool,
                        squad: SquadConfig, precision: Optional[str] = None,
                        length_buckets: Optional[Sequence[int]] = None,
                        gate: Optional[AccuracyGate] = None,
                        runtime: Optional[str] = None,
                        **settings) -> Dict[str, Any]:
  """Writes a serving SavedModel of a fine-tuned BertSpanLabeler.

  Args:
    vocab: the model's vocabulary (a vocab.txt path or its tokens).
    squad: the windows and answer search (the model's preprocessor's
      `squad`, what training and `predict` used).
    precision, gate, runtime: see `write_serving`.
    length_buckets: the lengths a batch is cut to (default: the library's).
  """
  if settings or not isinstance(squad, SquadConfig):
    given = ", ".join(sorted(settings)) or f"squad={squad!r}"
    raise TypeError(f"export_span_labeler: {given}: the settings are one "
                    "squad=SquadConfig(...) (bert.data.squad_config)")
  from bert.serving.span_labeler import SpanServing  # pylint: disable=g-import-not-at-top
  buckets = _buckets(length_buckets, squad.seq_length)
  return write_serving(
      lambda m: SpanServing(m, vocab, lower_case, squad, buckets),
      model, path, "span_labeler", precision, gate, runtime=runtime)


@renamed_keywords(vocab_file="vocab")
def export_tagger(model, path: str, vocab: Vocab, lower_case: bool,
                  seq_length: int, labels: Sequence[str],
                  precision: Optional[str] = None,
                  length_buckets: Optional[Sequence[int]] = None,
                  gate: Optional[AccuracyGate] = None,
                  runtime: Optional[str] = None) -> Dict[str, Any]:
  """Writes a serving SavedModel of a fine-tuned BertTokenClassifier;
  `vocab`: the model's vocabulary (a vocab.txt path or its tokens);
  `precision`, `gate`, `runtime`: see `write_serving`."""
  buckets = _buckets(length_buckets, seq_length)
  return write_serving(
      lambda m: TaggerServing(m, vocab, lower_case, seq_length, labels,
                              buckets),
      model, path, "tagger", precision, gate, runtime=runtime)


@renamed_keywords(vocab_file="vocab")
def export_embedder(model, path: str, vocab: Vocab, lower_case: bool,
                    seq_length: int, precision: Optional[str] = None,
                    length_buckets: Optional[Sequence[int]] = None,
                    gate: Union[AccuracyGate, str, os.PathLike, None] = None,
                    prompt: str = "",
                    runtime: Optional[str] = None) -> Dict[str, Any]:
  """Writes a serving SavedModel of a BertTextEmbedder: raw strings ->
  embeddings, as `encode` computes them (`bert.serving.embedder`).

  Args:
    vocab: the model's vocabulary (a vocab.txt path or its tokens).
    gate: required for bf16 and int8: an AccuracyGate, or a dev file for
      `bert.serving.gate.embedding_gate` (SQuAD json: recall@1; STS tsv:
      Spearman), within 0.5 points of fp32 by default.
    prompt: put before every text (the model's default prompt).
    precision, runtime: see `write_serving`; length_buckets: as the
      classifier's.
  """
  buckets = _buckets(length_buckets, seq_length)
  if isinstance(gate, (str, os.PathLike)):
    gate = embedding_gate(os.fspath(gate))
  elif gate is not None and not isinstance(gate, AccuracyGate):
    raise ConfigError(f"gate must be an AccuracyGate or a dev file path, got "
                      f"{type(gate).__name__}")
  return write_serving(
      lambda m: EmbedderServing(m, vocab, lower_case, seq_length, buckets,
                                prompt),
      model, path, "embedder", precision, gate, require_gate=True,
      runtime=runtime,
      info=dict(dim=int(model.dim), normalize=bool(model.normalize),
                prompt=prompt))
