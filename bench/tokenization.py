"""Tokenizer throughput: ours vs Hugging Face `tokenizers`, same texts, one run.

  python -m bench.tokenization [--repeats 5] [--batch_size 4096]

Texts: every sentence, context and question in ../shared/data (about 100k).
Hugging Face: BertWordPieceTokenizer(lowercase=True).encode_batch (Rust, all
threads). Ours: BertTokenizer in a tf.function over batches, ids as ragged
tensors ("tensor"), and additionally converted to per-text NumPy arrays
("numpy", what data preparation uses). Runs are interleaved and repeated;
the median and spread are printed.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--batch_size", type=int, default=4096)
  args = parser.parse_args()

  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tokenizers import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  from bert.testing import minilm_dir, shared_texts  # pylint: disable=g-import-not-at-top

  vocab = os.path.join(minilm_dir(), "vocab.txt")
  texts = shared_texts()
  hf = BertWordPieceTokenizer(vocab, lowercase=True)
  ours = Tokenizer(vocab, lower_case=True, batch_size=args.batch_size)
  batches = [tf.constant(texts[i:i + args.batch_size])
             for i in range(0, len(texts), args.batch_size)]

  def run_hf():
    hf.encode_batch(texts)

  def run_tensor():
    for b in batches:
      ours._tokenize(b)  # pylint: disable=protected-access

  def run_numpy():
    ours.tokenize(texts)

  runners = dict(hf_tokenizers=run_hf, ours_tensor=run_tensor,
                 ours_numpy=run_numpy)
  for fn in runners.values():  # warm-up (tracing, thread pools)
    fn()
  times = {k: [] for k in runners}
  for _ in range(args.repeats):
    for name, fn in runners.items():
      start = time.perf_counter()
      fn()
      times[name].append(time.perf_counter() - start)
  base = len(texts) / statistics.median(times["hf_tokenizers"])
  print(f"{len(texts)} texts, {args.repeats} interleaved repeats, "
        f"{os.cpu_count()} cores")
  print("| tokenizer | sentences/s (median) | spread (min-max s) | vs HF |")
  print("| --- | --- | --- | --- |")
  for name, ts in times.items():
    rate = len(texts) / statistics.median(ts)
    print(f"| {name} | {rate:,.0f} | {min(ts):.2f}-{max(ts):.2f} | "
          f"{rate / base:.2f}x |")


if __name__ == "__main__":
  main()
