"""bert-train-vocab: raw text -> a BERT, RoBERTa or ALBERT vocabulary.

  bert-train-vocab --kind=wordpiece --input_file=corpus/*.txt \\
      --output_dir=vocab/bert --vocab_size=8000 [--nolower_case: cased]
  bert-train-vocab --kind=byte_pair --input_file=corpus/*.txt \\
      --output_dir=vocab/roberta --vocab_size=8000
  bert-train-vocab --kind=sentencepiece --input_file=corpus/*.txt \\
      --output_dir=vocab/albert --vocab_size=8000

wordpiece: BERT's WordPiece (vocab.txt; [PAD] [UNK] [CLS] [SEP] [MASK] are
ids 0-4), also DistilBERT's and ELECTRA's; uncased by default.
byte_pair: RoBERTa's byte-level BPE (vocab.json + merges.txt; <s> <pad> </s>
<unk> <mask> are ids 0-4). sentencepiece: ALBERT's unigram SentencePiece
(spiece.model; <pad> 0, <unk> 1, [CLS], [SEP], [MASK]). Input: text files,
one line per sentence or paragraph (globs, commas). The folder is written
whole; an earlier vocabulary there is replaced only with --overwrite. The
result is what --vocab_file of bert-create-pretraining-data and
EncoderSource.vocab_file take.
"""

from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_enum("kind", None, ["wordpiece", "byte_pair", "sentencepiece"],
                  "wordpiece (BERT, DistilBERT, ELECTRA), byte_pair "
                  "(RoBERTa) or sentencepiece (ALBERT).")
flags.DEFINE_string("input_file", None, "Input text files (globs, commas).")
flags.DEFINE_string("output_dir", None, "Folder for the vocabulary files.")
flags.DEFINE_integer("vocab_size", 8000, "Tokens in the vocabulary.",
                     lower_bound=300)
flags.DEFINE_bool("overwrite", False, "Replace an earlier vocabulary there.")
flags.DEFINE_bool("lower_case", None, "Train on lower-cased text (WordPiece "
                  "also strips accents). Default: the family's (wordpiece and "
                  "sentencepiece lower-cased, byte_pair cased).")
flags.mark_flags_as_required(["kind", "input_file", "output_dir"])


def main(argv):
  del argv
  from bert.data.pretraining_shards import expand_inputs  # pylint: disable=g-import-not-at-top
  from bert.data.vocab_training import train_vocab  # pylint: disable=g-import-not-at-top
  from bert.layers.vocabulary import Vocabulary  # pylint: disable=g-import-not-at-top
  path = train_vocab(FLAGS.kind, expand_inputs(FLAGS.input_file),
                     FLAGS.output_dir, FLAGS.vocab_size, FLAGS.overwrite,
                     lower_case=FLAGS.lower_case)
  vocabulary = Vocabulary.from_file(path)
  print(f"{path}: {len(vocabulary):,} tokens ({vocabulary.kind})")


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
