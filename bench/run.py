"""Encoder inference and fine-tuning train-step speed: ours vs Model Garden,
Hugging Face PyTorch and KerasHub, side by side in one process tree.

  python -m bench.run [--repeats 5] [--target_seconds 3] [--output bench/RESULTS.md]

OpenVINO (inference only) runs the Hugging Face model, converted from
PyTorch, at its default precision and at fp32 (`bench._openvino_worker`).
`--gelu tanh|erf` sets the feed-forward GELU every implementation computes
(the same function in every row; KerasHub's backbone has the tanh form only).

Each implementation runs in a worker process of its own (KerasHub in its
Keras 3 venv, made by `bash bench/make_keras_hub_venv.sh` if missing), all
with 2 intra-op threads. Every case is built and warmed up first (tracing,
XLA compilation); then rounds go over every case and implementation in turn,
only one worker computing at a time, each timing a block of about
`target_seconds`. The median over rounds is reported with its spread (min -
max), so machine noise hits all implementations alike.

Inputs are dense full-length rows (every token real). FLOPs count the
matrix multiplications: per sequence and layer 2*S*(4*H^2 + 2*H*I) for the
projections and feed-forward plus 4*S^2*H for attention scores and context,
plus 2*H^2 for the pooler; a train step counts 3x the forward pass. The
machine's matmul peak is an n x n fp32 matmul (2*n^3 FLOPs) in torch and TF;
when a row computes in bf16, the same matmul in bf16 is timed too, so the
run shows what the CPU's bf16 units give each library over fp32.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

from bench import _protocol as P
from bert.config import BertConfig
from bert import hardware as cpu
from bert.flops import TRAIN_FACTOR, encoder_flops, pooler_flops

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERAS_HUB_VENV = os.path.join(HERE, ".venv_keras_hub")

# name -> (worker, spec overrides). Workers named "...+onednn" run with
# TF_ENABLE_ONEDNN_OPTS=1, the others with 0 (TensorFlow's default depends on
# the CPU: on for recent Intel, off for AMD), so the table says which ran.
IMPLS = {
    "ours": ("tf_ours", dict(xla=False)),
    "ours+XLA": ("tf_ours", dict(xla=True)),
    "ours+oneDNN": ("tf_ours+onednn", dict(xla=False)),
    "ours+XLA+oneDNN": ("tf_ours+onednn", dict(xla=True)),
    "Model Garden": ("tf_model_garden", dict(xla=False)),
    "Model Garden+XLA": ("tf_model_garden", dict(xla=True)),
    "Model Garden+oneDNN": ("tf_model_garden+onednn", dict(xla=False)),
    "Model Garden+XLA+oneDNN": ("tf_model_garden+onednn", dict(xla=True)),
    "HF PyTorch": ("torch", {}),
    "KerasHub+XLA": ("keras_hub", {}),
    # bf16 (tf_keras / Keras `mixed_bfloat16`, torch.autocast): bf16 matmuls,
    # fp32 variables. TensorFlow's bf16 matmuls need oneDNN.
    "ours bf16": ("tf_ours+onednn", dict(xla=False, bf16=True)),
    "ours bf16+XLA": ("tf_ours+onednn", dict(xla=True, bf16=True)),
    # The network of a bf16 serving export (`bert.serving.frozen`): bf16
    # weights frozen into the graph, which oneDNN keeps in its own layout.
    "ours bf16 served": ("tf_ours+onednn", dict(xla=False, bf16=True, served=True)),
    "Model Garden bf16": ("tf_model_garden+onednn", dict(xla=False, bf16=True)),
    "Model Garden bf16+XLA": ("tf_model_garden+onednn", dict(xla=True, bf16=True)),
    "HF PyTorch bf16": ("torch", dict(bf16=True)),
    "KerasHub bf16+XLA": ("keras_hub", dict(bf16=True)),
    # OpenVINO on the Hugging Face model, inference only: its default
    # precision (bf16 where the CPU has AVX512_BF16 or AMX) and fp32.
    "OpenVINO": ("openvino", {}),
    "OpenVINO fp32": ("openvino", dict(precision="fp32")),
}
# Implementations that only infer (no train-step rows).
INFER_ONLY = {"OpenVINO", "OpenVINO fp32", "ours bf16 served"}
# model -> batch (seq 128 throughout)
CASES = {"bert_base": 8, "bert_small": 32, "minilm_l6": 32}
SEQ = 128
MATMUL_N = 2048


def flops_per_sequence(model, seq, mode):
  """Matmul FLOPs of one sequence of `seq` positions through MODEL's encoder
  and pooler (`bert.flops`), x3 for a training step."""
  s = P.SHAPES[model]
  config = BertConfig(num_hidden_layers=s["layers"], hidden_size=s["hidden"],
                      num_attention_heads=s["heads"],
                      intermediate_size=s["intermediate"])
  forward = encoder_flops(config, seq) + pooler_flops(config)
  return forward * (TRAIN_FACTOR if mode == "train" else 1)


def matmul_peaks(impls):
  """The matmuls timed beside the rows: name -> (worker, bf16). fp32 always;
  bf16 too when a row computes in bf16, so a run records what the machine's
  bf16 matmuls give over its fp32 ones beside what the models get."""
  peaks = {"torch matmul": ("torch", False), "TF matmul": ("tf_ours", False)}
  if any(IMPLS[i][1].get("bf16") or IMPLS[i][0] == "openvino" for i in impls):
    peaks.update({"torch bf16 matmul": ("torch", True),
                  "TF bf16 matmul": ("tf_ours+onednn", True)})
  return peaks


def keras_hub_python():
  python = os.path.join(KERAS_HUB_VENV, "bin", "python")
  if not os.path.exists(python):
    print("making the KerasHub venv (bench/make_keras_hub_venv.sh) ...", flush=True)
    subprocess.run(["bash", os.path.join(HERE, "make_keras_hub_venv.sh"),
                    KERAS_HUB_VENV], check=True)
  return python


def start_workers(names):
  argv = {
      "tf_ours": [sys.executable, "-m", "bench._tf_worker", "ours"],
      "tf_model_garden": [sys.executable, "-m", "bench._tf_worker", "model_garden"],
      "torch": [sys.executable, "-m", "bench._torch_worker"],
      "openvino": [sys.executable, "-m", "bench._openvino_worker"],
  }
  workers = {}
  for name in names:
    base, _, option = name.partition("+")
    cmd = argv.get(base) or [keras_hub_python(), "-m", "bench._keras_hub_worker"]
    env = None
    if base.startswith("tf_"):
      env = dict(TF_ENABLE_ONEDNN_OPTS="1" if option == "onednn" else "0")
    workers[name] = P.Worker(name, cmd, ROOT,
                             os.path.join(HERE, f".{name}.log"), env)
  return workers


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--target_seconds", type=float, default=3.0)
  parser.add_argument("--models", default=",".join(CASES))
  parser.add_argument("--modes", default="infer,train")
  parser.add_argument("--impls", default=",".join(IMPLS))
  parser.add_argument("--gelu", choices=P.GELU_FORMS, default=P.DEFAULT_GELU,
                      help="the feed-forward GELU every implementation computes: "
                           "tanh (BERT's release) or erf (Hugging Face's \"gelu\")")
  parser.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"))
  args = parser.parse_args()
  impls = [i for i in args.impls.split(",") if i]
  unknown = [i for i in impls if i not in IMPLS]
  if unknown:
    parser.error(f"--impls: unknown {unknown}; choose from {list(IMPLS)}")
  tanh_only = [i for i in impls if IMPLS[i][0] == "keras_hub"]
  if args.gelu != "tanh" and tanh_only:
    parser.error(f"--gelu {args.gelu}: {tanh_only} compute the tanh form only; "
                 "leave them out of --impls")
  cases = [(m, mode) for m in args.models.split(",") for mode in args.modes.split(",")]

  workers = start_workers(sorted({IMPLS[i][0] for i in impls} | {
      worker for worker, _ in matmul_peaks(impls).values()}))
  timings, iters = {}, {}
  started = time.time()
  try:
    # Build and warm up everything, then calibrate the block lengths.
    jobs = [(("matmul", "matmul"), name, worker,
             dict(model="matmul", mode="matmul", batch=1, seq=MATMUL_N, xla=False,
                  bf16=bf16))
            for name, (worker, bf16) in matmul_peaks(impls).items()]
    for model, mode in cases:
      for impl in impls:
        if mode != "infer" and impl in INFER_ONLY:
          continue
        worker, extra = IMPLS[impl]
        jobs.append(((model, mode), impl, worker,
                     dict(model=model, mode=mode, batch=CASES[model], seq=SEQ,
                          gelu=args.gelu, **extra)))
    for case, impl, worker, spec in jobs:
      key = f"{case[0]}/{case[1]}/{impl}"
      seconds = workers[worker].call(cmd="build", key=key, spec=spec)
      one = workers[worker].call(cmd="time", key=key, iters=1)
      iters[key] = max(1, round(args.target_seconds / one))
      print(f"built {key:40s} in {seconds:6.1f} s; {one:.3f} s/iter -> "
            f"{iters[key]} iters/block", flush=True)
    # Interleaved rounds; the implementation order rotates every round.
    for r in range(args.repeats):
      groups = {}
      for job in jobs:
        groups.setdefault(job[0], []).append(job)
      for group in groups.values():
        k = r % len(group)
        for case, impl, worker, spec in group[k:] + group[:k]:
          key = f"{case[0]}/{case[1]}/{impl}"
          seconds = workers[worker].call(cmd="time", key=key, iters=iters[key])
          timings.setdefault(key, []).append(seconds / iters[key])
      print(f"round {r + 1}/{args.repeats} done ({time.time() - started:.0f} s)",
            flush=True)
  finally:
    P.close_all(workers.values())

  P.publish(render(jobs, timings, args, impls), args.output)


def render(jobs, timings, args, impls):
  def per_iter(key):
    return statistics.median(timings[key]), min(timings[key]), max(timings[key])

  peak = {}
  for name in matmul_peaks(impls):
    med, lo, hi = per_iter(f"matmul/matmul/{name}")
    f = 2 * MATMUL_N ** 3 / 1e9
    peak[name] = (f / med, f / hi, f / lo)

  def rate(name):
    return f"{peak[name][0]:.0f} GFLOP/s ({peak[name][1]:.0f}-{peak[name][2]:.0f})"
  torch_peak = peak["torch matmul"][0]
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  lines = [
      "# Benchmark results (`python -m bench.run`)", "",
      f"Machine: {cpu.describe()}; 2 intra-op threads for "
      f"every implementation. TensorFlow {tf.__version__} "
      "(oneDNN: TF_ENABLE_ONEDNN_OPTS=1 for the +oneDNN and bf16 rows, 0 "
      f"otherwise), PyTorch {torch.__version__}. Seq {SEQ}, dense full-length "
      f"rows; every implementation computes the {args.gelu} form of GELU. "
      "fp32 unless the row says bf16: tf_keras/Keras `mixed_bfloat16` "
      "policy, torch.autocast(\"cpu\", bfloat16); bf16 matmuls, fp32 variables "
      "and optimizer state. OpenVINO rows: the Hugging Face model "
      "converted from PyTorch, at OpenVINO's default precision (bf16 where "
      "the CPU has AVX512_BF16 or AMX) or fp32. "
      f"Median of {args.repeats} interleaved rounds of ~{args.target_seconds:g} s "
      "blocks (spread: slowest - fastest round).", "",
      "FLOPs (matmuls only) per sequence: layers x (2 S (4 H^2 + 2 H I) + 4 S^2 H) "
      "+ 2 H^2; train step (forward, backward, AdamW update) = 3x forward. "
      "GFLOP/s are these FLOPs over the measured time for every implementation, "
      "although our classifier skips the last layer's work on all but the [CLS] "
      "rows (`EncoderScaffold.pooled`): for ours it is the rate of the same "
      "useful work.", "",
      f"Matmul peak ({MATMUL_N}x{MATMUL_N} fp32): torch {rate('torch matmul')}, "
      f"TF {rate('TF matmul')}.", ""]
  if "TF bf16 matmul" in peak:
    # The most a bf16 row can gain over fp32 in each library on this machine.
    lines += [
        f"Matmul in bf16 ({MATMUL_N}x{MATMUL_N}, operands bf16, TF through "
        f"oneDNN): torch {rate('torch bf16 matmul')}, TF {rate('TF bf16 matmul')}; "
        f"bf16 / fp32 peak: torch {peak['torch bf16 matmul'][0] / peak['torch matmul'][0]:.2f}x, "
        f"TF {peak['TF bf16 matmul'][0] / peak['TF matmul'][0]:.2f}x.", ""]
  lines += [
      "| model (batch) | mode | implementation | seq/s | spread | GFLOP/s | % of torch "
      "matmul peak | vs fastest peer |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
  cases = []
  for case, _, _, _ in jobs:
    if case[0] != "matmul" and case not in cases:
      cases.append(case)
  for model, mode in cases:
    batch = CASES[model]
    rates = {}
    for impl in impls:
      if mode != "infer" and impl in INFER_ONLY:
        continue
      med, lo, hi = per_iter(f"{model}/{mode}/{impl}")
      rates[impl] = (batch / med, batch / hi, batch / lo)
    peers = [v[0] for k, v in rates.items() if not k.startswith("ours")]
    best_peer = max(peers) if peers else None
    for impl, (rate, lo, hi) in rates.items():
      gflops = rate * flops_per_sequence(model, SEQ, mode) / 1e9
      versus = f"{rate / best_peer:.2f}x" if best_peer else "-"
      name = f"**{impl}**" if impl.startswith("ours") else impl
      lines.append(f"| {model} ({batch}) | {mode} | {name} | {rate:.2f} | "
                   f"{lo:.2f}-{hi:.2f} | {gflops:.0f} | {100 * gflops / torch_peak:.0f}% "
                   f"| {versus} |")
  return "\n".join(lines) + "\n"


if __name__ == "__main__":
  main()
