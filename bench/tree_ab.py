"""This tree against another checkout of the project, in one run: the fp32
train-step and inference rows of `bench.run` ("ours+oneDNN" and
"ours+XLA+oneDNN"), one TensorFlow worker per tree.

  git worktree add /tmp/before <commit>
  python -m bench.tree_ab --before /tmp/before [--max_isa AVX2] \
      [--models bert_small,minilm_l6] [--rounds 7] [--output x.md]

Every case is built and warmed up in both workers first; then each round
times one block of about `target_seconds` per case and tree, the tree order
alternating between rounds. A ratio is taken per round (after / before, the
two blocks next to each other in time) and the table gives the median of
those ratios with their spread, so a drift of the machine's speed during the
run cancels out.

`--max_isa AVX2` caps the instruction sets the workers' kernels may use:
oneDNN (`ONEDNN_MAX_CPU_ISA`) and XLA's CPU code generation
(`--xla_cpu_max_isa`). On a CPU with AVX-512, BF16 or AMX that runs the fp32
rows as a CPU with AVX2 only would (Eigen's kernels in the TensorFlow wheel
are the same on both), which is how issue 46's "no regression without
BF16/AMX" is checked where no such CPU is at hand; `--max_isa AVX512`
stands for AVX-512 without VNNI or BF16 (Skylake-SP to Ice Lake Xeons). The cap is the
workers' only: the table's machine line gives the real CPU and the cap.
"""

import argparse
import os
import sys
import time

from bench import _protocol as P
from bench.run import CASES as BATCH, SEQ
from bert import hardware as cpu

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODES = ("infer", "train")
# --max_isa -> (oneDNN's ONEDNN_MAX_CPU_ISA, XLA's --xla_cpu_max_isa).
ISAS = {"AVX2": ("AVX2", "AVX2"), "AVX512": ("AVX512_CORE", "AVX512")}


def isa_env(max_isa):
  """The workers' environment variables for `max_isa` (None: no cap)."""
  if not max_isa:
    return {}
  onednn, xla = ISAS[max_isa]
  flags = os.environ.get("XLA_FLAGS", "")
  return dict(ONEDNN_MAX_CPU_ISA=onednn,
              XLA_FLAGS=f"{flags} --xla_cpu_max_isa={xla}".strip())


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  P.add_before(parser)
  parser.add_argument("--models", default="bert_small,minilm_l6")
  parser.add_argument("--modes", default="infer,train")
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--target_seconds", type=float, default=1.5)
  parser.add_argument("--max_isa", choices=list(ISAS), default=None)
  parser.add_argument("--output", required=True)
  args = parser.parse_args()
  before = P.checked_before(parser, args.before, "bench/_tf_worker.py")
  models = [m for m in args.models.split(",") if m]
  unknown = [m for m in models if m not in BATCH]
  if unknown:
    parser.error(f"--models: unknown {unknown}; choose from {list(BATCH)}")
  modes = [m for m in args.modes.split(",") if m]
  if not modes or set(modes) - set(MODES):
    parser.error(f"--modes: {args.modes!r}; choose from {','.join(MODES)}")
  trees = {"before": before, "after": ROOT}
  cases = [(m, mode, xla) for m in models for mode in modes
           for xla in (False, True)]

  workers = {}
  for name, root in trees.items():
    env = dict(TF_ENABLE_ONEDNN_OPTS="1", PYTHONPATH=root,
               **isa_env(args.max_isa))
    workers[name] = P.Worker(name, [sys.executable, "-m", "bench._tf_worker", "ours"],
                             root, os.path.join(HERE, f".tree_ab_{name}.log"), env)
  rates, iters = {}, {}
  started = time.time()
  try:
    for model, mode, xla in cases:
      key = _key(model, mode, xla)
      spec = dict(model=model, mode=mode, batch=BATCH[model], seq=SEQ, xla=xla)
      for name, worker in workers.items():
        worker.call(cmd="build", key=key, spec=spec)
        one = worker.call(cmd="time", key=key, iters=1)
        iters[key] = max(1, round(args.target_seconds / one))
      print(f"built {key}", flush=True)
    for r in range(args.rounds):
      for model, mode, xla in cases:
        key = _key(model, mode, xla)
        for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
          seconds = workers[name].call(cmd="time", key=key, iters=iters[key])
          rates.setdefault((key, name), []).append(
              BATCH[model] * iters[key] / seconds)
      print(f"round {r + 1}/{args.rounds} done ({time.time() - started:.0f} s)",
            flush=True)
  finally:
    P.close_all(workers.values())
  P.publish(render(cases, rates, args, before), args.output)


def _key(model, mode, xla):
  return f"{model}/{mode}/{'ours+XLA+oneDNN' if xla else 'ours+oneDNN'}"



def render(cases, rates, args, before):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cap = (f"; the workers' kernels capped at {args.max_isa} "
         f"({', '.join(f'{k}={v}' for k, v in isa_env(args.max_isa).items())})"
         if args.max_isa else "")
  lines = [
      "# This tree against another (`python -m bench.tree_ab`)", "",
      f"Machine: {cpu.describe()}{cap}. TensorFlow {tf.__version__}, oneDNN "
      f"on, 2 intra-op threads, fp32, seq {SEQ}, dense rows. Before: "
      f"{before}; after: {ROOT}. {args.rounds} rounds of ~"
      f"{args.target_seconds} s blocks, the tree order alternating; the "
      "ratio is taken per round and given as median (min-max).", "",
      "| model (batch) | mode | row | before seq/s | after seq/s | after / before |",
      "| --- | --- | --- | --- | --- | --- |"]
  lines += [_row(model, mode, xla, rates) for model, mode, xla in cases]
  return "\n".join(lines) + "\n"


def _row(model, mode, xla, rates):
  """One table row: both trees' rates and the per-round ratios."""
  key = _key(model, mode, xla)
  before, after = rates[(key, "before")], rates[(key, "after")]
  ratios = [a / b for a, b in zip(after, before)]
  return (f"| {model} ({BATCH[model]}) | {mode} | {key.split('/')[-1]} | "
          f"{P.spread(before)} | {P.spread(after)} | {P.spread(ratios, 3)} |")

if __name__ == "__main__":
  main()
