"""bert-export: write SavedModels for TF Hub and serving.

  bert-export --kind=encoder --checkpoint=CKPT --output=DIR
  bert-export --kind=preprocessing --checkpoint=CKPT --output=DIR
      [--seq_length=128]
  bert-export --kind=classifier|span_labeler|tagger --checkpoint=MODEL_DIR --output=DIR
      [--precision=auto|fp32|bf16|int8] [--max_accuracy_drop=POINTS]
      [--runtime=saved_model|tflite|openvino|auto]
  bert-export --kind=embedder --checkpoint=CKPT_OR_MODEL_DIR --output=DIR
      [--pooling=mean] [--precision=auto|fp32|bf16|int8]
      [--gate_data=DEV_FILE] [--max_accuracy_drop=POINTS] [--runtime=...]

encoder: the TF Hub BERT encoder interface, with `.mlm` when the checkpoint
has pre-training heads (any format the loader reads). preprocessing (formerly
preprocessor, still read): TF Hub's preprocessing interface, raw strings ->
encoder inputs, with `.tokenize` and `.bert_pack_inputs`; vocab and casing
from the checkpoint (or --vocab_file/--do_lower_case). classifier,
span_labeler, tagger: a `bert-train` model_dir of a classification, SQuAD or
NER run -> `serving_default` on raw strings (classifier: `text` [+ `text_b`]
-> `probabilities`, `label`; span_labeler: `question`, `context` -> `answer`,
`score`, `start`, `end`; tagger: `text` -> `words`, `tags`). embedder: a
sentence-transformers folder (pooling, dense layers, normalisation from its
modules), any other checkpoint with --pooling, or a `bert-train` model_dir of
a BertTextEmbedder -> TF Hub's text-embedding interface (`obj(texts)`;
`serving_default`: `text` -> `embeddings`, float32 [batch, dim]); a reduced
precision is checked on --gate_data (a SQuAD json: recall@1 of questions
against paragraphs; a tsv with sentence1, sentence2, score columns: STS
Spearman), or a run's own eval split where its task has a gate. Loading needs
tensorflow and, for models that tokenize, `import tensorflow_text`;
`bert.export.load_serving(DIR)` runs any precision and runtime (int8: the
network on TFLite; --runtime=openvino: on OpenVINO) with the same inputs and
outputs.
"""

import os

from absl import app
from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_enum("kind", None, ["encoder", "preprocessing", "classifier",
                                 "span_labeler", "tagger", "embedder",
                                 "preprocessor"],
                  "What to export (preprocessor: the former name of "
                  "preprocessing).")
flags.DEFINE_string("checkpoint", None, "Checkpoint folder (encoder, "
                    "preprocessor) or bert-train model_dir (classifier).")
flags.DEFINE_string("output", None, "SavedModel folder to write.")
flags.DEFINE_integer("seq_length", 128, "Preprocessing output length; "
                     "embedder: the longest text in word pieces (default: "
                     "the folder's max_seq_length, else 128).", lower_bound=3)
flags.DEFINE_integer("num_text_inputs", 1, "Preprocessing: 1 or 2 strings.",
                     lower_bound=1, upper_bound=2)
flags.DEFINE_string("vocab_file", None, "Preprocessing vocab (default: the "
                    "checkpoint's).")
flags.DEFINE_bool("do_lower_case", None, "Preprocessing casing (default: the "
                  "checkpoint's).")
flags.DEFINE_enum("precision", None, ["auto", "fp32", "bf16", "int8"],
                  "classifier, span_labeler, tagger, embedder: the network's "
                  "precision. auto (the default, unless the environment "
                  "variable BERT_PRECISION names another): the fastest of "
                  "fp32, bf16 (where the CPU has it) and int8, on every "
                  "runtime installed, that passes the accuracy gate, measured "
                  "on this machine (without a gate: bf16 where the CPU has "
                  "it, else fp32; embedder: fp32). int8: dynamic-range int8 "
                  "on TFLite (XNNPACK); bf16: bf16 matmuls where the CPU has "
                  "AVX512_BF16 or AMX (else fp32). A reduced precision must "
                  "pass the accuracy gate on the run's eval split.")
flags.DEFINE_enum("runtime", None, ["saved_model", "tflite", "openvino", "auto"],
                  "classifier, span_labeler, tagger, embedder: what runs the "
                  "network (default: the SavedModel's TensorFlow graph; "
                  "TFLite for int8; every runtime for --precision=auto with "
                  "a gate). openvino: OpenVINO (fp32, bf16 or int8; pip "
                  "install \"bert-tf2[openvino]\"), checked by the accuracy "
                  "gate like a reduced precision. auto: the fastest on this "
                  "machine of every runtime (at every precision for "
                  "--precision=auto) that passes the gate; the manifest says "
                  "what was measured.")
flags.DEFINE_float("max_accuracy_drop", None, "The accuracy gate's limit, in "
                   "points below fp32 (default: 0.5 for accuracy, entity "
                   "F1 and the embedder's recall@1 or Spearman x100, 1.0 for "
                   "SQuAD F1).", lower_bound=0)
flags.DEFINE_list("pooling", None, "embedder: the pooling of a checkpoint "
                  "without sentence-transformers modules (mean, cls, max, "
                  "...; several: mean,max); overrides a folder's.")
flags.DEFINE_string("gate_data", None, "embedder: the accuracy gate's dev file "
                    "(SQuAD json: recall@1; tsv with sentence1, sentence2, "
                    "score: Spearman); needed for bf16/int8 unless the run's "
                    "task has a gate.")
flags.mark_flags_as_required(["kind", "output"])


def main(argv):
  del argv
  if FLAGS.kind == "preprocessor":
    FLAGS.kind = "preprocessing"
  from bert import checkpoints, export  # pylint: disable=g-import-not-at-top
  from bert import io as _io  # pylint: disable=g-import-not-at-top
  # Say, preprocessing exported over the encoder it takes its vocab from.
  _io.check_not_an_input(FLAGS.output, {"--checkpoint": FLAGS.checkpoint,
                                        "--vocab_file": FLAGS.vocab_file})
  for name in ("precision", "runtime"):
    if FLAGS[name].value is not None and FLAGS.kind in ("encoder",
                                                        "preprocessing"):
      raise app.UsageError(f"--{name}={FLAGS[name].value} is for classifier, "
                           "span_labeler, tagger and embedder exports")
  for name in ("pooling", "gate_data"):
    if FLAGS[name].present and FLAGS.kind != "embedder":
      raise app.UsageError(f"--{name} is for --kind=embedder")
  if FLAGS.kind != "preprocessing" and not FLAGS.checkpoint:
    raise app.UsageError(f"--kind={FLAGS.kind} needs --checkpoint")
  if FLAGS.kind in ("classifier", "span_labeler", "tagger", "embedder"):
    if FLAGS.kind == "embedder":
      manifest = _export_embedder()
    else:
      from bert.tasks import trained_run  # pylint: disable=g-import-not-at-top
      manifest = trained_run.export_trained(
          FLAGS.checkpoint, FLAGS.output, kind=FLAGS.kind,
          precision=FLAGS.precision, max_accuracy_drop=FLAGS.max_accuracy_drop,
          runtime=FLAGS.runtime)
    gate = manifest.get("gate")
    if gate:
      print(f"accuracy gate: {gate['metric']} on {gate['source']}: fp32 "
            f"{gate['fp32']:.2f}, {gate['candidate']} "
            f"{gate[gate['candidate']]:.2f} (limit: "
            f"{gate['max_drop']:g} points below fp32)")
    auto = manifest.get("auto")
    if auto:
      rates = ", ".join(f"{k} {v:.1f}" for k, v in
                        auto["rows_per_second"].items())
      print(f"measured rows/s on this CPU: {rates}; refused by the gate: "
            f"{', '.join(auto['refused']) or 'none'}")
    if auto or manifest.get("requested_precision") == "auto" or (
        FLAGS.runtime == "auto"):
      print(f"precision: {manifest['precision']}, runtime: "
            f"{manifest['runtime']} (auto)")
    elif manifest["precision"] != manifest.get("requested_precision"):
      print(f"precision: {manifest['precision']} (asked "
            f"{manifest.get('requested_precision')}; this CPU has no bf16 "
            "dot products)")
  elif FLAGS.kind == "encoder":
    ckpt = checkpoints.load(FLAGS.checkpoint, with_heads=True)
    # --do_lower_case: Model Garden export_tfhub.py's flag (and TF Hub's
    # asset); the library's name is lower_case.
    export.export_encoder(ckpt.encoder, FLAGS.output, masked_lm=ckpt.masked_lm,
                          vocab_file=FLAGS.vocab_file or ckpt.vocab_file,
                          lower_case=(ckpt.lower_case
                                      if FLAGS.do_lower_case is None
                                      else FLAGS.do_lower_case))
  else:
    vocab, lower = FLAGS.vocab_file, FLAGS.do_lower_case
    if FLAGS.checkpoint and (vocab is None or lower is None):
      ckpt = checkpoints.load(FLAGS.checkpoint)
      vocab = vocab or ckpt.vocab_file
      lower = ckpt.lower_case if lower is None else lower
    if vocab is None or lower is None:
      raise app.UsageError("preprocessing needs a vocab and casing: give "
                           "--checkpoint or --vocab_file and --do_lower_case")
    export.export_preprocessing_model(vocab, FLAGS.output, lower_case=lower,
                                      seq_length=FLAGS.seq_length,
                                      num_text_inputs=FLAGS.num_text_inputs)
  print(f"wrote {FLAGS.kind} SavedModel to {FLAGS.output}")


def _export_embedder() -> dict:
  """--kind=embedder: a bert-train model_dir of a BertTextEmbedder, or any
  checkpoint `BertTextEmbedder.from_pretrained` reads."""
  from bert.checkpoints import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top
  from bert.models import BertTextEmbedder  # pylint: disable=g-import-not-at-top
  from bert.serving import gate as gate_lib  # pylint: disable=g-import-not-at-top
  from bert import precision as precision_lib  # pylint: disable=g-import-not-at-top
  precision = precision_lib.default(FLAGS.precision)
  reduced = precision != "fp32" or FLAGS.runtime not in (None, "saved_model")
  gate = None
  if FLAGS.gate_data and reduced:
    gate = gate_lib.embedding_gate(FLAGS.gate_data, FLAGS.max_accuracy_drop)
  if os.path.exists(os.path.join(FLAGS.checkpoint, model_dir_lib.RUN_CONFIG)):
    from bert.tasks import trained_run  # pylint: disable=g-import-not-at-top
    for name in ("pooling", "seq_length"):
      if FLAGS[name].present:
        raise app.UsageError(f"--{name}: a bert-train run exports as it was "
                             "trained")
    return trained_run.export_trained(
        FLAGS.checkpoint, FLAGS.output, kind="embedder",
        precision=precision, max_accuracy_drop=FLAGS.max_accuracy_drop,
        gate=gate, runtime=FLAGS.runtime)
  if gate is None and precision in ("bf16", "int8"):
    # Said before the model loads (the export would refuse it later).
    raise app.UsageError(f"--precision={precision} needs --gate_data "
                         "(a SQuAD json or an STS tsv) for the accuracy gate")
  # Built at fp32: the export makes its reduced-precision copies itself.
  model = BertTextEmbedder.from_pretrained(
      FLAGS.checkpoint, pooling=FLAGS.pooling, precision="fp32",
      seq_length=FLAGS.seq_length if FLAGS["seq_length"].present else None)
  return model.export(FLAGS.output, precision=precision, gate=gate,
                      runtime=FLAGS.runtime)


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
