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

import json
import os
import tempfile
from typing import Any, Callable, Dict, Optional, Sequence, Union

from absl import logging
import tensorflow as tf
import tf_keras

from bert import precision as precision_lib
from bert.data import length_buckets as lb
from bert.io import atomic_folder
from bert.data.squad_config import SquadConfig
from bert.features import ENCODER_INPUTS
from bert.networks.preprocessing_model import make_preprocessing_model
from bert import hardware as cpu
from bert.serving import tflite
from bert.serving.classifier import ClassifierServing
from bert.serving.embedder import EmbedderServing
from bert.serving.fill_mask import FillMaskServing
from bert.serving.gate import AccuracyGate, embedding_gate
from bert.serving import host, loader, openvino_runtime
from bert.serving.loader import (MANIFEST, MANIFEST_FORMAT, RUNTIME_PRECISIONS,
                                 StagedServing)
from bert.serving.precision import bf16_copy
from bert.serving.stages import ServingModule
from bert.serving.tagger import TaggerServing
from bert.serving.tflite import PRECISIONS
from bert.validation import ConfigError, renamed_keywords

# A vocabulary: a vocab.txt path or its tokens in id order.
Vocab = Union[str, os.PathLike, Sequence[str]]


# The one loader of every serving export, here beside the writers.
load_serving = loader.load_serving


def _output_folder(path: str):
  """The SavedModel folder `path`, written atomically: it replaces an empty
  folder or an earlier SavedModel, and a failed export leaves nothing."""
  return atomic_folder(
      path, lambda p: os.path.isdir(p) and (
          not os.listdir(p) or os.path.exists(os.path.join(p, "saved_model.pb"))),
      "a SavedModel folder", FileExistsError)


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
  with tempfile.TemporaryDirectory() as config_dir, _output_folder(path) as tmp:
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
  with _output_folder(path) as tmp:
    tf.saved_model.save(model, tmp)


# The former name, still read.
export_preprocessor = export_preprocessing_model


def check_precision(precision: str) -> str:
  """`precision` as an export precision (auto, fp32, bf16, int8; earlier
  names read as theirs); a ConfigError otherwise."""
  return precision_lib.canonical(precision, "precision",
                                 ("auto",) + PRECISIONS)


def _in_memory(module: ServingModule, network=None) -> StagedServing:
  """The serving callable of an unsaved module (what `load_serving` gives
  for its export), with `network` replacing the module's own."""
  return StagedServing(lambda **s: module.preprocess(s),
                       network or (lambda **x: module.network(x)),
                       lambda **f: module.postprocess(f), module.string_inputs,
                       empty_network=lambda **x: module.network(x))


def check_runtime(runtime: Optional[str], precision: str) -> str:
  """The runtime of the network stage for `precision` (fp32, bf16, int8):
  `runtime` None picks the one that has always run it (int8: tflite,
  else saved_model); a ConfigError for a runtime that cannot run it."""
  if runtime is None:
    return "tflite" if precision == "int8" else "saved_model"
  if runtime not in RUNTIME_PRECISIONS:
    raise ConfigError(f"runtime must be one of "
                      f"{', '.join(RUNTIME_PRECISIONS)}; got {runtime!r}")
  if precision not in RUNTIME_PRECISIONS[runtime]:
    raise ConfigError(f"runtime={runtime} runs precision "
                      f"{' or '.join(RUNTIME_PRECISIONS[runtime])}, not "
                      f"{precision}")
  return runtime


def write_serving(make_module: Callable[[Any], ServingModule], model, path: str,
                  kind: str, precision: str = "fp32",
                  gate: Optional[AccuracyGate] = None,
                  bf16_cpu: Optional[bool] = None, require_gate: bool = False,
                  info: Optional[Dict[str, Any]] = None,
                  runtime: Optional[str] = None) -> Dict[str, Any]:
  """Writes the serving SavedModel `make_module(model)` at `precision`.

  fp32: the module as is. bf16: the network under Keras' `mixed_bfloat16`
  policy (fp32 where the CPU has neither AVX512_BF16 nor AMX, with a log
  line saying so). auto: bf16 where this CPU runs it fast (AVX512_BF16 or
  AMX, and oneDNN on: `bert.precision.choose`), else fp32. int8: the
  SavedModel as for fp32 (its `serving_default` stays the fp32 reference)
  plus the network as a dynamic-range int8 TFLite model in `assets.extra/`,
  which `load_serving` runs.

  `runtime` (None: saved_model, or tflite for int8): what runs the network
  stage; "openvino" converts it to OpenVINO (fp32 or bf16,
  `bert.serving.openvino_runtime`), written beside the fp32 SavedModel.

  A reduced precision, or a network converted to another runtime, is checked
  by `gate` first: evaluated against the fp32 SavedModel and refused
  (AccuracyGateError, nothing written) when it drops more than the gate
  allows; with `require_gate`, a reduced precision without a gate is a
  ConfigError. `info`: more fields for the manifest. Returns the manifest
  written (with the gate's figures).
  """
  precision = check_precision(precision)
  requested = precision
  if precision == "auto":
    choice = precision_lib.choose("auto", gpu=None, cpu_flags=(
        None if bf16_cpu is None else
        frozenset({"avx512_bf16"} if bf16_cpu else ())))
    logging.info("export %s", choice.describe())
    precision = "bf16" if choice.bf16 else "fp32"
  if precision == "bf16":
    has_bf16 = cpu.has_bf16() if bf16_cpu is None else bf16_cpu
    if not has_bf16:
      logging.warning("precision=bf16: this CPU has neither AVX512_BF16 nor AMX; "
                      "writing fp32 instead")
      precision = "fp32"
  runtime = check_runtime(runtime, precision)
  if runtime == "openvino":
    openvino_runtime.require()
  if require_gate and gate is None and precision != "fp32":
    raise ConfigError(f"{kind} export at {precision} needs an accuracy gate "
                      "(gate=, or --gate_data: a dev set to compare with fp32)")
  fp32 = make_module(model)
  module, blob, converted = fp32, None, None
  candidate = None            # builds the reduced-precision serving callable
  manifest = dict(format=MANIFEST_FORMAT, kind=kind,
                  requested_precision=requested,
                  string_inputs=list(fp32.string_inputs),
                  buckets=list(fp32.buckets), **(info or {}))
  if runtime == "saved_model" and precision == "bf16":
    module = make_module(bf16_copy(model))
    candidate = lambda: _in_memory(module)
  if runtime == "tflite":
    blob = tflite.convert(fp32.network.get_concrete_function(), fp32)
    candidate = lambda: _in_memory(fp32, tflite.TFLiteNetwork(blob))
    manifest["network"] = "network_int8.tflite"
  if runtime == "openvino":
    converted = openvino_runtime.convert(fp32.network.get_concrete_function())
    candidate = lambda: _in_memory(fp32, openvino_runtime.OpenVINONetwork(
        converted, precision))
    manifest["network"] = openvino_runtime.NETWORK_FILE
  manifest.update(precision=precision, runtime=runtime)
  # Small batches skip the graphs where the network runs outside them.
  hosted = fp32.host() if runtime in ("tflite", "openvino") else None
  if hosted is not None:
    manifest["host"] = hosted[0]
  if gate is not None and candidate is not None:
    # The gate's name for the candidate: its precision, and the runtime
    # where that is not the precision's own (an OpenVINO fp32 network is
    # checked against the SavedModel's fp32 too).
    label = (precision if runtime in ("saved_model", "tflite")
             else f"{runtime}_{precision}")
    manifest["gate"] = dict(gate.check(_in_memory(fp32), candidate(), label),
                            candidate=label)
  with _output_folder(path) as tmp:
    tf.saved_model.save(module, tmp, signatures=module.signatures())
    extra = os.path.join(tmp, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    if blob is not None:
      with open(os.path.join(extra, manifest["network"]), "wb") as f:
        f.write(blob)
    if converted is not None:
      openvino_runtime.save(converted, os.path.join(extra, manifest["network"]))
    if hosted is not None:
      host.write_vocab(hosted[1], extra)
    with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
      json.dump(manifest, f, indent=2)
  return manifest


def _buckets(buckets, seq_length):
  return lb.check_length_buckets(
      lb.default_length_buckets(seq_length) if buckets is None else buckets,
      seq_length, "serving length_buckets")


@renamed_keywords(vocab_file="vocab")
def export_classifier(model, path: str, vocab: Vocab, lower_case: bool,
                      seq_length: int, labels: Optional[Sequence[str]],
                      pairs: bool, precision: str = "fp32",
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
                     clean_up_spaces: bool = True, precision: str = "fp32",
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
                        squad: SquadConfig, precision: str = "fp32",
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
                  precision: str = "fp32",
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
                    seq_length: int, precision: str = "fp32",
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
