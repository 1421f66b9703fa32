"""bert-export: write SavedModels for TF Hub and serving.

  bert-export --kind=encoder --checkpoint=CKPT --output=DIR
  bert-export --kind=preprocessor --checkpoint=CKPT --output=DIR [--seq_length=128]
  bert-export --kind=classifier|span_labeler|tagger --checkpoint=MODEL_DIR --output=DIR

encoder: the TF Hub BERT encoder interface, with `.mlm` when the checkpoint
has pre-training heads (any format the loader reads). preprocessor: raw
strings -> encoder inputs, with `.tokenize` and `.bert_pack_inputs`; vocab and
casing from the checkpoint (or --vocab_file/--do_lower_case). classifier,
span_labeler, tagger: a `bert-train` model_dir of a classification, SQuAD or
NER run -> `serving_default` on raw strings (classifier: `text` [+ `text_b`]
-> `probabilities`, `label`; span_labeler: `question`, `context` -> `answer`,
`score`, `start`, `end`; tagger: `text` -> `words`, `tags`). Loading needs
tensorflow and, for models that tokenize, `import tensorflow_text`.
"""

from absl import app
from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_enum("kind", None, ["encoder", "preprocessor", "classifier",
                                 "span_labeler", "tagger"], "What to export.")
flags.DEFINE_string("checkpoint", None, "Checkpoint folder (encoder, "
                    "preprocessor) or bert-train model_dir (classifier).")
flags.DEFINE_string("output", None, "SavedModel folder to write.")
flags.DEFINE_integer("seq_length", 128, "Preprocessor output length.",
                     lower_bound=3)
flags.DEFINE_integer("num_text_inputs", 1, "Preprocessor: 1 or 2 strings.",
                     lower_bound=1, upper_bound=2)
flags.DEFINE_string("vocab_file", None, "Preprocessor vocab (default: the "
                    "checkpoint's).")
flags.DEFINE_bool("do_lower_case", None, "Preprocessor casing (default: the "
                  "checkpoint's).")
flags.mark_flags_as_required(["kind", "output"])


def main(argv):
  del argv
  from bert import checkpoints, export  # pylint: disable=g-import-not-at-top
  if FLAGS.kind != "preprocessor" and not FLAGS.checkpoint:
    raise app.UsageError(f"--kind={FLAGS.kind} needs --checkpoint")
  if FLAGS.kind in ("classifier", "span_labeler", "tagger"):
    from bert.training import trained_run  # pylint: disable=g-import-not-at-top
    trained_run.export_trained(FLAGS.checkpoint, FLAGS.output, kind=FLAGS.kind)
  elif FLAGS.kind == "encoder":
    ckpt = checkpoints.load(FLAGS.checkpoint, with_heads=True)
    export.export_encoder(ckpt.encoder, FLAGS.output, masked_lm=ckpt.masked_lm)
  else:
    vocab, lower = FLAGS.vocab_file, FLAGS.do_lower_case
    if FLAGS.checkpoint and (vocab is None or lower is None):
      ckpt = checkpoints.load(FLAGS.checkpoint)
      vocab = vocab or ckpt.vocab_file
      lower = ckpt.do_lower_case if lower is None else lower
    if vocab is None or lower is None:
      raise app.UsageError("preprocessor needs a vocab and casing: give "
                           "--checkpoint or --vocab_file and --do_lower_case")
    export.export_preprocessor(vocab, FLAGS.output, lower_case=lower,
                               seq_length=FLAGS.seq_length,
                               num_text_inputs=FLAGS.num_text_inputs)
  print(f"wrote {FLAGS.kind} SavedModel to {FLAGS.output}")


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
