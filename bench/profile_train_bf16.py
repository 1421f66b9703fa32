"""Where a bf16 train step's time goes: the TF profiler's self time per op
type for this library's train step (`bert-train`'s loop, `mixed_bfloat16`
through oneDNN), the step `bench.run` times, 2 threads.

  python -m bench.profile_train_bf16 [bert_small|bert_base|minilm_l6] [batch]
"""
import glob
import json
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
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as pp  # noqa: E402

from bench import _protocol as P  # noqa: E402
from bench import _tf_worker  # noqa: E402

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
logdir = "/tmp/profile_train_bf16"
os.system(f"rm -rf {logdir}")
tf.profiler.experimental.start(logdir)
for _ in range(n):
  step()
tf.profiler.experimental.stop()
path = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0]
data, _ = pp.xspace_to_tools_data([path], "framework_op_stats", {})
table = json.loads(data)
rows = table[0] if isinstance(table, list) else table
cols = [c["id"] for c in rows["cols"]]
by_type = {}
for r in rows["rows"]:
  v = dict(zip(cols, [c.get("v") for c in r["c"]]))
  if v.get("host_or_device") not in (None, "Host") or v["type"] == "IDLE":
    continue
  by_type[v["type"]] = by_type.get(v["type"], 0.0) + float(v.get("total_self_time") or 0)
busy = sum(by_type.values())
print(f"{model} bf16 train step b{batch} s128: {wall * 1000:.1f} ms per step "
      f"({batch / wall:.1f} seq/s); op self time {busy / n / 1000:.1f} ms per step")
for k, v in sorted(by_type.items(), key=lambda kv: -kv[1])[:18]:
  print(f"  {k:32s} {100 * v / busy:5.1f}%  {v / n / 1000:8.2f} ms")
