"""bert-create-pretraining-data: text files -> masked-LM/NSP TFRecords.

  bert-create-pretraining-data --input_file=corpus/*.txt \\
      --output_dir=data/pretrain --vocab_file=vocab.txt \\
      --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5 \\
      --num_shards=4 --num_processes=2

  bert-create-pretraining-data --input_file=a.txt,b.txt \
      --output_file=out/a.tfrecord,out/b.tfrecord --vocab_file=vocab.txt ...
      (google-research's flags: one shard per named file, no manifest)

Input: one sentence per line, a blank line between documents (globs and
comma lists), streamed: memory holds one block of --block_sentences lines
per process, whatever the corpus size (random next sentences come from the
same block). Output: num_shards TFRecord files and a manifest.json listing
them (readers refuse TFRecords in the folder that it does not list). The
folder is written whole (beside it, then renamed into place): the folder of
an earlier run is refused unless --overwrite, then replaced once the new run
is complete; a folder holding anything else (a file of yours) is refused,
never emptied. Named --output_file files are replaced, each once all are
written. Records are
tf.train.Example with the google-research feature names (input_ids, input_mask, segment_ids,
masked_lm_positions, masked_lm_ids, masked_lm_weights, next_sentence_labels).
The same flags, seed and shard count give the same files.
"""

from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input text files (globs, commas).")
flags.DEFINE_string("output_dir", None, "Folder for the TFRecord shards.")
flags.DEFINE_string("output_file", None,
                    "Instead of --output_dir: the TFRecord files to write "
                    "(comma list, one shard each), as google-research's "
                    "script takes them.")
flags.DEFINE_string("vocab_file", None, "The vocabulary: a WordPiece vocab.txt, "
                    "a byte-level BPE vocab.json (merges.txt beside it), a "
                    "SentencePiece spiece.model or a tokenizer.json.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Mask all pieces of a word together.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per instance.")
flags.DEFINE_enum("sentence_task", "nsp", ["nsp", "sop", "none"],
                  "The sentence-pair task of the instances: nsp (BERT's next "
                  "sentence), sop (ALBERT's sentence order) or none "
                  "(RoBERTa's full sentences, one segment).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked tokens at most.")
flags.DEFINE_integer("random_seed", 12345, "Random seed.")
flags.DEFINE_integer("dupe_factor", 10, "Passes over the input, each with "
                     "different masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens to predict.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of a shorter-than-maximum instance.")
flags.DEFINE_integer("num_shards", 1, "Output files (documents are dealt "
                     "round-robin into shards).", lower_bound=1)
flags.DEFINE_integer("num_processes", 1, "Worker processes.", lower_bound=1)
flags.DEFINE_bool("overwrite", False, "Replace the folder of an earlier run "
                  "(--output_dir) once the new run is written (otherwise "
                  "refused); a folder with other files is always refused.")
flags.DEFINE_integer("block_sentences", 20_000,
                     "Lines read, tokenized and turned into instances at a "
                     "time; bounds memory.", lower_bound=1)
flags.mark_flags_as_required(["input_file", "vocab_file"])
flags.mark_flags_as_mutual_exclusive(["output_dir", "output_file"],
                                     required=True)


def _output_files():
  """--output_file's files, each checked before any work: a corpus or vocab
  named as an output would be replaced by TFRecords, and a device
  (/dev/null) by a file (each shard is written beside it and renamed)."""
  if not FLAGS.output_file:
    return None
  from bert import io as _io  # pylint: disable=g-import-not-at-top
  from bert.data.pretraining_shards import expand_inputs  # pylint: disable=g-import-not-at-top
  outputs = FLAGS.output_file.split(",")
  inputs = [("--input_file", source)
            for source in expand_inputs(FLAGS.input_file)]
  for path in [p.strip() for p in outputs if p.strip()]:
    _io.check_not_an_input(path, inputs + [("--vocab_file", FLAGS.vocab_file)])
    _io.check_output_file(path, in_place=False)
  return outputs


def main(argv):
  del argv
  from bert.data.pretraining_data import PretrainingDataConfig  # pylint: disable=g-import-not-at-top
  from bert.data.pretraining_shards import create_pretraining_data, total  # pylint: disable=g-import-not-at-top
  output_files = _output_files()
  # The flags are google-research create_pretraining_data.py's;
  # --do_lower_case and --max_seq_length are lower_case and seq_length here.
  config = _cli.config_of_flags(
      PretrainingDataConfig, seq_length="max_seq_length",
      max_predictions_per_seq="max_predictions_per_seq",
      masked_lm_prob="masked_lm_prob", short_seq_prob="short_seq_prob",
      dupe_factor="dupe_factor", random_seed="random_seed",
      do_whole_word_mask="do_whole_word_mask", lower_case="do_lower_case",
      block_sentences="block_sentences", sentence_task="sentence_task")
  summaries = create_pretraining_data(
      FLAGS.input_file, FLAGS.output_dir, FLAGS.vocab_file, config,
      num_shards=FLAGS.num_shards, num_processes=FLAGS.num_processes,
      overwrite=FLAGS.overwrite,
      output_files=output_files)
  s = total(summaries)
  slots = s.instances * config.seq_length
  print(f"documents {s.documents:,}, instances {s.instances:,}, tokens "
        f"{s.tokens:,} ({s.tokens / max(s.seconds, 1e-9):,.0f}/s in the "
        f"slowest shard), padding {s.padding / max(slots, 1):.1%}, masked "
        f"{s.masked / max(s.tokens - 3 * s.instances, 1):.2%} of non-special "
        f"tokens, " + {"nsp": "random next", "sop": "swapped or random",
                       "none": "sentence label"}[config.sentence_task]
        + f" {s.random_next / max(s.instances, 1):.1%}")
  print("length histogram (tokens <= bucket: instances): " + ", ".join(
      f"{k}: {v}" for k, v in sorted(s.length_histogram.items())))


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
