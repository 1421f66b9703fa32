"""bert-convert: convert a BERT checkpoint folder between formats.

  bert-convert --input=PATH --output=PATH --to=tf2|tf1|hf|model_garden [--with_heads]

The input format is detected (google-research TF1 BERT, ALBERT and ELECTRA,
Model Garden TF2 BertEncoder, AlbertEncoder and ElectraPretrainer, Hugging
Face safetensors, TF Hub SavedModels (BERT and ALBERT), KerasHub presets, this
library's TF2, or a bert-train run's model_dir). Written as tf1, ALBERT and
ELECTRA keep their repositories' own names. Every weight is matched strictly;
a mismatch stops with an error naming the variable, shapes and file. The
output folder is written atomically (replaced only once complete).
"""

from absl import app
from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Checkpoint folder to read.")
flags.DEFINE_string("output", None, "Folder to write (replaced if it exists).")
flags.DEFINE_enum("to", "tf2", ["tf2", "tf1", "hf", "model_garden"],
                  "Output format: tf2 (this library), tf1 (google-research "
                  "names), hf (Hugging Face safetensors + config.json), "
                  "model_garden (tf.train.Checkpoint(encoder=...) that "
                  "tfm.nlp.networks.BertEncoder restores).")
flags.DEFINE_enum("from_format", None,
                  ["tf2", "tf1", "model_garden", "hf", "tfhub", "keras_hub",
                   "run"],
                  "Input format; detected when not given (run: a bert-train "
                  "model_dir).")
flags.DEFINE_bool("with_heads", True,
                  "Carry the pre-training heads (masked LM, next sentence) "
                  "over when the input has them.")
flags.DEFINE_bool("do_lower_case", None,
                  "Record the tokenizer casing in the output when the input "
                  "does not say it.")
flags.mark_flags_as_required(["input", "output"])


def main(argv):
  del argv
  from bert import checkpoints  # pylint: disable=g-import-not-at-top
  from bert import io as _io  # pylint: disable=g-import-not-at-top
  # Converting a folder into itself would replace what it converts.
  _io.check_not_an_input(FLAGS.output, {"--input": FLAGS.input})
  ckpt = checkpoints.load(FLAGS.input, with_heads=FLAGS.with_heads,
                          format=FLAGS.from_format)
  c = ckpt.config
  print(f"Read {FLAGS.input} ({ckpt.format}): {c.num_hidden_layers} layers, "
        f"hidden {c.hidden_size}, vocab {c.vocab_size}, "
        f"heads {'yes' if ckpt.has_heads else 'no'}, "
        f"lower_case {ckpt.lower_case}")
  if ckpt.ignored_variables:
    print(f"Ignored {len(ckpt.ignored_variables)} non-model variable(s): "
          f"{', '.join(ckpt.ignored_variables[:8])}"
          f"{' ...' if len(ckpt.ignored_variables) > 8 else ''}")
  # --do_lower_case: the flag of google-research's scripts (and the key the
  # checkpoint files hold); the library's name is lower_case.
  lower_case = ckpt.lower_case
  if FLAGS.do_lower_case is not None:
    if lower_case is not None and lower_case != FLAGS.do_lower_case:
      raise app.UsageError(
          f"--do_lower_case={FLAGS.do_lower_case} contradicts the input, "
          f"which says do_lower_case={lower_case}")
    lower_case = FLAGS.do_lower_case
  if (ckpt.masked_lm is not None and ckpt.next_sentence is None
      and c.family == "bert"):
    # TF Hub's `mlm` sub-model: the formats written here store both BERT
    # heads or neither (the other families' masked-LM head goes alone: an
    # ELECTRA generator's, an ALBERT without its sentence-order head).
    print("The input has a masked-LM head but no next-sentence head; the "
          "output holds the encoder only")
    ckpt.masked_lm = None
  checkpoints.save(ckpt, FLAGS.output, format=FLAGS.to,
                   lower_case=lower_case)
  print(f"Wrote {FLAGS.output} ({FLAGS.to})")


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
