"""Held-out probes of a pre-training run beyond its eval metrics.

  python -m bench.pretraining_probes sentence_order --run=runs/albert \\
      --documents=../shared/data/corpus/wikitext-2/wiki.test.sentences.txt
  python -m bench.pretraining_probes replaced_tokens --run=runs/electra \\
      --eval_files='data/electra_eval/*.tfrecord'

sentence_order: real pairs only (consecutive two-sentence segments of each
document, one sentence per line, documents between blank lines; in order and
swapped, 50% each) asked through `BertClassifier.next_sentence(run)`: an order
signal shows as accuracy above 50%, which the instance mix's majority class
(random second parts count as "not in order") hides.
replaced_tokens: an ELECTRA run's discriminator on the eval records with the
run's own masking and generator samples: accuracy against calling every
token original, ROC AUC of its logits, log-loss against the base rate's.
"""

import numpy as np
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("run", None, "A bert-train model_dir.")
flags.DEFINE_string("documents", None, "sentence_order: the held-out text.")
flags.DEFINE_string("eval_files", None, "replaced_tokens: the eval records "
                    "(a loaded run keeps no data paths).")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.mark_flag_as_required("run")


def documents(path):
  docs, current = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        current.append(line.strip())
      elif current:
        docs.append(current)
        current = []
  return docs + ([current] if current else [])


def sentence_order():
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  first, second, labels = [], [], []
  for doc in documents(FLAGS.documents):
    for i in range(0, len(doc) - 3, 4):
      a, b = " ".join(doc[i:i + 2]), " ".join(doc[i + 2:i + 4])
      first += [a, b]
      second += [b, a]
      labels += ["in_order", "swapped"]
  model = BertClassifier.next_sentence(FLAGS.run, seq_length=FLAGS.seq_length)
  predicted = np.asarray(model.predict((first, second))["labels"]).astype(str)
  print(f"{FLAGS.run}: {len(labels)} real pairs (50% in order): accuracy "
        f"{np.mean(predicted == np.asarray(labels)):.4f}, predicted in order "
        f"{np.mean(predicted == 'in_order'):.3f}")


def replaced_tokens():
  import dataclasses  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from sklearn.metrics import roc_auc_score  # pylint: disable=g-import-not-at-top
  from bert.tasks.trained_run import load_trained_task  # pylint: disable=g-import-not-at-top
  if not FLAGS.eval_files:
    raise app.UsageError("replaced_tokens needs --eval_files")
  task, model = load_trained_task(FLAGS.run)
  task.inputs = dataclasses.replace(task.inputs, eval_files=FLAGS.eval_files)
  logits, labels = [], []
  step = tf.function(lambda x: model(x, training=False))
  for batch in task.build_inputs(None, training=False):
    out = step(batch)
    real = batch["input_mask"].numpy() > 0
    logits.append(out["discriminator_logits"].numpy()[real])
    labels.append(out["discriminator_labels"].numpy()[real])
  logits, labels = np.concatenate(logits), np.concatenate(labels)
  rate = labels.mean()
  p = 1 / (1 + np.exp(-logits))
  loss = -np.mean(labels * np.log(p + 1e-9) + (1 - labels) * np.log(1 - p + 1e-9))
  base = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))
  print(f"{FLAGS.run}: {len(labels)} tokens: accuracy "
        f"{np.mean((logits > 0) == (labels == 1)):.4f} vs all original "
        f"{1 - rate:.4f}; ROC AUC {roc_auc_score(labels, logits):.4f}; "
        f"log-loss {loss:.4f} vs base rate {base:.4f}; called replaced "
        f"{np.mean(logits > 0):.4f}")


def main(argv):
  probes = {"sentence_order": sentence_order, "replaced_tokens": replaced_tokens}
  if len(argv) != 2 or argv[1] not in probes:
    raise app.UsageError(f"one probe: {', '.join(probes)}")
  probes[argv[1]]()


if __name__ == "__main__":
  app.run(main)
