"""The README's real run (slow, ~13 min on 2 cores): BERT-Tiny pre-trained from
scratch on WikiText-2 valid sentences for 3,000 steps with the bundled config,
evaluated on the held-out test sentences."""

import collections
import os
import subprocess
import sys

import pytest

from bert.data.pretraining_dataset import pretraining_dataset
from _runs import summaries
from conftest import REPO_ROOT, minilm_dir, shared_data


def create(input_file, output_dir, dupe_factor, seed, shards):
  subprocess.run(
      [sys.executable, "-m", "bert.scripts.create_pretraining_data",
       f"--input_file={input_file}", f"--output_dir={output_dir}",
       f"--vocab_file={os.path.join(minilm_dir(), 'vocab.txt')}",
       "--max_seq_length=128", "--max_predictions_per_seq=20",
       f"--dupe_factor={dupe_factor}", f"--num_shards={shards}",
       f"--num_processes={min(shards, 2)}", f"--random_seed={seed}"],
      check=True, cwd=REPO_ROOT, capture_output=True, timeout=1200)
  return os.path.join(output_dir, "*.tfrecord")


def most_frequent_token_accuracy(pattern):
  counts, total = collections.Counter(), 0
  for batch in pretraining_dataset(pattern, 128, 20, 1000, is_training=False):
    w = batch["masked_lm_weights"].numpy() > 0
    ids = batch["masked_lm_ids"].numpy()[w]
    counts.update(ids.tolist())
    total += len(ids)
  return counts.most_common(1)[0][1] / total


@pytest.mark.slow
def test_bert_tiny_pretraining_on_wikitext2(tmp_path):
  corpus = shared_data("corpus", "wikitext-2")
  train = create(os.path.join(corpus, "wiki.valid.sentences.txt"),
                 str(tmp_path / "train"), 10, 1, 4)
  held_out = create(os.path.join(corpus, "wiki.test.sentences.txt"),
                    str(tmp_path / "eval"), 1, 2, 1)
  subprocess.run(
      [sys.executable, "-m", "bert.scripts.train",
       "--gin_file=pretrain_tiny_wikitext2.gin", "--mode=train_and_eval",
       f"--model_dir={tmp_path / 'model'}",
       f"--gin_param=PretrainingInputs.train_files='{train}'",
       f"--gin_param=PretrainingInputs.eval_files='{held_out}'",
       f"--gin_param=EncoderSource.vocab_file="
       f"'{os.path.join(minilm_dir(), 'vocab.txt')}'"],
      check=True, cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600)
  # The evaluations, from the run's TensorBoard summaries (not its console).
  eval_dir = str(tmp_path / "model" / "eval")
  mlm = summaries(eval_dir, "masked_lm_accuracy")
  nsp = summaries(eval_dir, "next_sentence_accuracy")
  print("\n".join(f"step {s}: masked_lm_accuracy {mlm[s]:.4f}, "
                  f"next_sentence_accuracy {nsp[s]:.4f}" for s in sorted(mlm)))
  assert sorted(mlm) == sorted(nsp) and max(mlm) == 3000
  final_mlm = mlm[3000]
  baseline = most_frequent_token_accuracy(held_out)
  print(f"final masked_lm_accuracy {final_mlm:.4f}; most frequent token {baseline:.4f}")
  assert final_mlm > 4 * baseline
  assert nsp[3000] > 0.5
