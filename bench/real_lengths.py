"""Throughput on real lengths: SST-2 dev, MRPC dev and SQuAD dev as tokenized
(file order), real all-MiniLM-L6-v2 weights, ours (length buckets) vs
Hugging Face PyTorch padding each batch to its longest row.

  python -m bench.real_lengths [--repeats 5] [--squad_questions 600]

Reports real (non-padding) tokens per second for inference (a full pass over
the set, batch 32) and fine-tuning (blocks of `--train_steps` steps of batch
32: forward, backward, AdamW update), and checks that both implementations
give the same pooled outputs on every row. Blocks are interleaved and
repeated like `bench.run`; both implementations run in worker processes with
2 intra-op threads.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from bert.config import BertConfig
from bert.data.length_buckets import default_length_buckets
from bert.data.packing import choose_row_length
from bert.flops import TRAIN_FACTOR, flops_per_real_token
from bert import hardware as cpu
from bert.testing import minilm_dir, shared_data_dir
from bench._real_worker import BATCH
from bench._protocol import Worker, close_all, publish
from bench.run import HERE, MATMUL_N, ROOT, start_workers

DATASETS = ("sst2", "mrpc", "squad")
MINILM = BertConfig.preset("all_minilm_l6_v2")


def prepare(folder, squad_questions):
  """Encodes the three dev sets with our tokenizer (the same rows for both
  implementations) into FOLDER/NAME.npz; returns {name: (path, rows, seq)}."""
  from bert.data import classification_data as cd  # pylint: disable=g-import-not-at-top
  from bert.data.squad_config import SquadConfig  # pylint: disable=g-import-not-at-top
  from bert.data.squad_examples import encode_examples, read_squad  # pylint: disable=g-import-not-at-top
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  data = shared_data_dir()
  tokenizer = Tokenizer(os.path.join(minilm_dir(), "vocab.txt"), lower_case=True)
  out = {}
  sst = cd.read_glue("sst-2", os.path.join(data, "glue", "SST-2", "dev.tsv"), "dev")
  mrpc = cd.read_glue("mrpc", os.path.join(data, "glue", "MRPC", "dev.tsv"), "dev")
  for name, examples, pairs in (("sst2", sst, False), ("mrpc", mrpc, True)):
    arrays = tokenizer.encode([e.text_a for e in examples],
                              [e.text_b for e in examples] if pairs else None, 128)
    arrays["label"] = np.array([int(e.label) for e in examples], np.int32)
    out[name] = arrays
  questions = read_squad(os.path.join(data, "squad", "dev-v1.1.json"))
  # SquadConfig's defaults: 384-piece windows, stride 128, questions of <= 64.
  arrays, _ = encode_examples(questions[:squad_questions], tokenizer,
                              SquadConfig(), training=False)
  arrays = {k: arrays[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
  arrays["label"] = np.zeros(len(arrays["input_mask"]), np.int32)
  out["squad"] = arrays
  paths = {}
  for name, arrays in out.items():
    path = os.path.join(folder, f"{name}.npz")
    np.savez(path, **arrays)
    mask = arrays["input_mask"]
    paths[name] = (path, len(mask), mask.shape[1], float(mask.sum(1).mean()))
  return paths


def _worker(workers, impl):
  return workers["ours" if impl == "packed" else impl]


def run(repeats=5, train_steps=8, squad_questions=600, log=print, bf16=False,
        datasets=DATASETS):
  """Runs the benchmark on `datasets` (a subset of DATASETS); returns the
  markdown section."""
  unknown = sorted(set(datasets) - set(DATASETS))
  if unknown or not datasets:
    raise ValueError(f"datasets must be some of {DATASETS}, got {datasets!r}")
  folder = tempfile.mkdtemp(prefix="bench_real_")
  sets = prepare(folder, squad_questions)
  model = minilm_dir()
  workers = {impl: Worker(f"real_{impl}", [sys.executable, "-m", "bench._real_worker",
                                           impl, model], ROOT,
                          os.path.join(HERE, f".real_{impl}.log"))
             for impl in ("ours", "hf")}
  # The machine's fp32 matmul peak in the same run, as bench.run measures it.
  peak_workers = start_workers(["torch", "tf_ours+onednn"])
  peak_spec = dict(model="matmul", mode="matmul", batch=1, seq=MATMUL_N, xla=False)
  peaks = {}
  # "packed" runs in the "ours" worker with packing switched on.
  jobs = [(name, mode, impl) for name in datasets for mode in ("infer", "train")
          for impl in ("ours", "packed", "hf")]
  rates = {}
  started = time.time()
  try:
    for name, mode, impl in jobs:
      spec = dict(data=sets[name][0], mode=mode, steps=train_steps, warmup=1,
                  pack=impl == "packed", pooled_only=name != "squad", bf16=bf16)
      seconds = _worker(workers, impl).call(
          cmd="build", key=f"{name}/{mode}/{impl}", spec=spec)
      log(f"built {name}/{mode}/{impl} in {seconds:.1f} s")
    for w in peak_workers.values():
      w.call(cmd="build", key="matmul", spec=peak_spec)
    for r in range(repeats):
      for worker, w in peak_workers.items():
        peaks.setdefault(worker, []).append(
            2 * MATMUL_N ** 3 / 1e9 / w.call(cmd="time", key="matmul", iters=5) * 5)
      for j in range(0, len(jobs), 3):
        group = jobs[j:j + 3] if r % 2 == 0 else jobs[j:j + 3][::-1]
        for name, mode, impl in group:
          reply = _worker(workers, impl).call_full(
              cmd="time", key=f"{name}/{mode}/{impl}", iters=1)
          rates.setdefault((name, mode, impl), []).append(
              reply["work"] / reply["seconds"])
      log(f"round {r + 1}/{repeats} done ({time.time() - started:.0f} s)")
  finally:
    close_all(list(workers.values()) + list(peak_workers.values()))
  tf_peak = statistics.median(peaks["tf_ours+onednn"])
  torch_peak = statistics.median(peaks["torch"])
  lines = [
      "## Real lengths: real (non-padding) tokens/s, all-MiniLM-L6-v2"
      + (", bf16 (`python -m bench.real_lengths --bf16`)" if bf16 else
         " (`python -m bench.real_lengths`)"), "",
      f"Machine: {cpu.describe()}. "
      + ("bf16: ours under tf_keras' `mixed_bfloat16` policy (oneDNN), HF "
         "under torch.autocast(\"cpu\", bfloat16); fp32 weights and optimizer "
         "state in both. " if bf16 else ""),
      f"Ours: length buckets (inference in length order, training batches grouped "
      f"by length, each cut to its bucket); ours packed: examples packed into "
      f"rows of the length the library picks (`choose_row_length`: the length "
      f"bucket of least estimated cost that holds the longest example; shown as "
      f"*rows of N* beside the mode; inference: 32 rows per batch; training: each "
      f"step's 32 examples in as few rows as they fill). Hugging Face PyTorch: file order "
      f"(inference) or random batches (training), each padded to its longest row. "
      f"SST-2 and MRPC run as sentence classification (ours computes the last "
      f"layer for the [CLS] rows only; HF BertForSequenceClassification), SQuAD "
      f"as a per-token task (every token's output; training with a loss on "
      f"every real token, BertForTokenClassification on the HF side). "
      f"Batch 32; training blocks of {train_steps} steps (forward, backward, AdamW). "
      f"Median of {repeats} interleaved rounds (spread: slowest - fastest).", "",
      f"Matmul peak ({MATMUL_N}x{MATMUL_N} fp32, same run): TF {tf_peak:.0f} GFLOP/s, "
      f"torch {torch_peak:.0f} GFLOP/s. *HF GFLOP/s*: the matmul FLOPs HF "
      "computes (every position of its padded batches; training 3x forward) "
      "per second. *Ceiling / HF*: the most real tokens/s any implementation "
      "could reach at the TF matmul peak computing nothing but the least "
      "FLOPs (each example at its own length, [CLS]-only last layer for the "
      "sentence tasks), over HF's real tokens/s: a ratio target above it "
      "cannot be met in fp32 on this machine.", "",
      "| data (rows, seq, mean real length) | mode | ours (buckets) tokens/s | "
      "ours packed tokens/s | HF PyTorch tokens/s | buckets / HF | packed / HF | "
      "HF GFLOP/s | ceiling / HF | "
      "max abs diff of pooled outputs vs HF (buckets, packed) |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
  for name in datasets:
    path, rows, seq, mean = sets[name]
    hf_pooled = np.load(path + ".hf_pooled.npy")
    diffs = ", ".join(
        f"{float(np.abs(np.load(f'{path}.{impl}_pooled.npy') - hf_pooled).max()):.1e}"
        for impl in ("ours", "packed"))
    with np.load(path) as f:
      lengths = f["input_mask"].sum(1)
    for mode in ("infer", "train"):
      hf_flops, least_flops = flops_per_real_token(
          MINILM, lengths, BATCH, pooled_only=name != "squad",
          random_batches=2000 if mode == "train" else 0)
      factor = TRAIN_FACTOR if mode == "train" else 1
      # The packed row length the worker's library code picks (the same call).
      row_length = choose_row_length(lengths, default_length_buckets(seq),
                                     MINILM.hidden_size,
                                     BATCH if mode == "train" else None)
      cell = lambda v: (f"{statistics.median(v):,.0f} "
                        f"({min(v):,.0f}-{max(v):,.0f})")
      ours, packed, hf = (rates[(name, mode, impl)]
                          for impl in ("ours", "packed", "hf"))
      lines.append(
          f"| {name} ({rows}, {seq}, {mean:.0f}) | {mode} (rows of {row_length}) | "
          f"{cell(ours)} | "
          f"{cell(packed)} | {cell(hf)} | "
          f"{statistics.median(ours) / statistics.median(hf):.2f}x | "
          f"{statistics.median(packed) / statistics.median(hf):.2f}x | "
          f"{statistics.median(hf) * hf_flops * factor / 1e9:.0f} | "
          f"{tf_peak * 1e9 / (least_flops * factor) / statistics.median(hf):.2f}x | "
          f"{diffs if mode == 'infer' else '-'} |")
  return "\n".join(lines) + "\n"


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--train_steps", type=int, default=8)
  parser.add_argument("--squad_questions", type=int, default=600)
  parser.add_argument("--output", default=None)
  parser.add_argument("--datasets", default=",".join(DATASETS),
                      help="comma-separated subset of " + ",".join(DATASETS))
  parser.add_argument("--bf16", action="store_true",
                      help="every implementation in bf16 (see bench._real_worker)")
  args = parser.parse_args()
  datasets = tuple(args.datasets.split(","))
  if not set(datasets) <= set(DATASETS):
    parser.error(f"--datasets must be some of {','.join(DATASETS)}, got "
                 f"{args.datasets!r}")
  report = run(args.repeats, args.train_steps, args.squad_questions,
               bf16=args.bf16, datasets=datasets)
  publish(report, args.output)


if __name__ == "__main__":
  main()
