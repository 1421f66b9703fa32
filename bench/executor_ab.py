"""The bf16 serving network under TensorFlow's two function executors, in
one process: the default (a thread pool schedules each ready node) and
SINGLE_THREADED_EXECUTOR (nodes run in order on the calling thread).

  python -m bench.executor_ab [--model bert_base] [--inter_op 2] \
      [--rounds 7] [--calls 10]

Issue 46's profile (RESULTS_AMX.md) found our served BERT-Base spending
about 7 ms per forward between kernels; this measures whether the
executor's scheduling is that time. Each round times `--calls` forwards
(batch 8, seq 128) on each executor, the order alternating between rounds;
the ratio is taken per round (single-threaded / default).
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from bench import _protocol as P  # noqa: E402
from bench import _tf_worker as W  # noqa: E402
from bert import hardware as cpu  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--model", default="bert_base", choices=list(P.SHAPES))
  parser.add_argument("--inter_op", type=int, default=P.THREADS)
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--calls", type=int, default=10)
  args = parser.parse_args()
  if min(args.inter_op, args.rounds, args.calls) < 1:
    parser.error("--inter_op, --rounds and --calls: at least 1 each")
  tf.config.threading.set_intra_op_parallelism_threads(P.THREADS)
  tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  spec = dict(model=args.model, mode="infer", batch=8, seq=128, xla=False,
              bf16=True, served=True)
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  forward = W._served(W._ours_encoder(spec)[0], spec)  # pylint: disable=protected-access
  tf_keras.mixed_precision.set_global_policy("float32")

  def single():
    with tf.experimental.function_executor_type("SINGLE_THREADED_EXECUTOR"):
      return forward()

  runs = {"default": forward, "single-threaded": single}
  for f in runs.values():
    f()
    f()
  ms = {name: [] for name in runs}
  for r in range(args.rounds):
    for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
      start = time.perf_counter()
      for _ in range(args.calls):
        runs[name]()
      ms[name].append((time.perf_counter() - start) / args.calls * 1000)
  ratios = [s / d for s, d in zip(ms["single-threaded"], ms["default"])]
  print(f"Machine: {cpu.describe()}. TensorFlow {tf.__version__}, "
        f"{args.model} b8 s128 bf16 served, {P.THREADS} intra-op threads, "
        f"{args.inter_op} inter-op; {args.rounds} rounds of {args.calls} calls.")
  for name, values in ms.items():
    print(f"{name}: {P.spread(values, 1)} ms per forward")
  print(f"single-threaded / default, per round: {P.spread(ratios, 3)}")


if __name__ == "__main__":
  sys.exit(main())
