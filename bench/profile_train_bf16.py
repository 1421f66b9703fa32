"""Where a bf16 train step's time goes: the TF profiler's self time per op
type for this library's train step (`bert-train`'s loop, `mixed_bfloat16`
through oneDNN), the step `bench.run` times, 2 threads.

  python -m bench.profile_train_bf16 [bert_small|bert_base|minilm_l6] [batch]
"""
import os
import sys
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"
sys.argv[1:1] = [] if len(sys.argv) > 1 else ["bert_small"]
model = sys.argv[1]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
sys.argv = [sys.argv[0], "ours"]          # the worker's implementation name

import tensorflow as tf  # noqa: E402

from bench import _protocol as P  # noqa: E402
from bench import _tf_worker  # noqa: E402
from bench._tf_profile import op_self_times  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(P.THREADS)
tf.config.threading.set_inter_op_parallelism_threads(P.THREADS)
step = _tf_worker.build(dict(model=model, mode="train", batch=batch, seq=128,
                             xla=False, bf16=True))
for _ in range(3):
  step()
n = 5
start = time.perf_counter()
for _ in range(n):
  step()
wall = (time.perf_counter() - start) / n
by_type = op_self_times(step, n, "/tmp/profile_train_bf16")
by_type.pop("IDLE", None)
busy = sum(by_type.values())
print(f"{model} bf16 train step b{batch} s128: {wall * 1000:.1f} ms per step "
      f"({batch / wall:.1f} seq/s); op self time {busy / n / 1000:.1f} ms per step")
for k, v in sorted(by_type.items(), key=lambda kv: -kv[1])[:18]:
  print(f"  {k:32s} {100 * v / busy:5.1f}%  {v / n / 1000:8.2f} ms")
