"""bert-extract-features: per-token hidden states of chosen layers as JSON lines.

  bert-extract-features --input_file=sentences.txt --output_file=out.jsonl \\
      --init_checkpoint=CKPT [--layers=-1,-2,-3,-4] [--max_seq_length=128]

Input: one sentence per line, or two separated by " ||| ". Output: the format
of google-research extract_features.py, one JSON object per input line.
"""

from absl import app
from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one line per example.")
flags.DEFINE_string("output_file", None, "JSON-lines file to write.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint folder (any format).")
flags.DEFINE_list("layers", ["-1", "-2", "-3", "-4"], "Layer indices (negative "
                  "counts from the last).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per line, truncated.",
                     lower_bound=3)
flags.DEFINE_integer("batch_size", 32, "Lines per batch.", lower_bound=1)
flags.DEFINE_bool("do_lower_case", None, "Tokenizer casing; default: the "
                  "checkpoint's.")
flags.mark_flags_as_required(["input_file", "output_file", "init_checkpoint"])


def main(argv):
  del argv
  from bert import checkpoints  # pylint: disable=g-import-not-at-top
  from bert import io as _io  # pylint: disable=g-import-not-at-top
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  from bert.tasks import feature_extraction as fe  # pylint: disable=g-import-not-at-top
  try:
    layers = [int(x) for x in FLAGS.layers]
  except ValueError:
    raise app.UsageError(f"--layers={','.join(FLAGS.layers)}: give integer "
                         "layer indices, e.g. -1,-2") from None
  # The output is checked before the checkpoint is loaded and every line
  # encoded: it is written once they are.
  _io.check_not_an_input(FLAGS.output_file, {
      "--input_file": FLAGS.input_file,
      "--init_checkpoint": FLAGS.init_checkpoint})
  _io.check_output_file(FLAGS.output_file)
  ckpt = checkpoints.load(FLAGS.init_checkpoint)
  # --do_lower_case and --max_seq_length: google-research extract_features.py's
  # flags; the library's names are lower_case and seq_length.
  lower = (FLAGS.do_lower_case if FLAGS.do_lower_case is not None
           else ckpt.lower_case)
  if ckpt.vocab_file is None or lower is None:
    raise app.UsageError("the checkpoint lacks vocab.txt or its casing; "
                         "give --do_lower_case")
  tokenizer = Tokenizer(ckpt.vocab_file, lower_case=lower)
  lines = fe.read_lines(FLAGS.input_file)
  n = fe.write_features(FLAGS.output_file, fe.extract_features(
      ckpt.encoder, tokenizer, lines, layers,
      FLAGS.max_seq_length, FLAGS.batch_size))
  print(f"wrote features of {n} line(s) to {FLAGS.output_file}")


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
