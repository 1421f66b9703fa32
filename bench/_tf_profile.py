"""The TF profiler's self time per op type, for the `profile_*` scripts."""

import glob
import json
import os
import shutil

import tensorflow as tf
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as pp  # pylint: disable=g-direct-tensorflow-import


def op_self_times(fn, runs: int, logdir: str):
  """Runs `fn` `runs` times under the profiler; returns {op type: self time
  in microseconds, summed over the runs and both threads}, "IDLE" included
  (a thread waiting)."""
  shutil.rmtree(logdir, ignore_errors=True)
  tf.profiler.experimental.start(logdir)
  for _ in range(runs):
    fn()
  tf.profiler.experimental.stop()
  path = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0]
  data, _ = pp.xspace_to_tools_data([path], "framework_op_stats", {})
  table = json.loads(data)
  rows = table[0] if isinstance(table, list) else table
  cols = [c["id"] for c in rows["cols"]]
  by_type = {}
  for r in rows["rows"]:
    v = dict(zip(cols, [c.get("v") for c in r["c"]]))
    if v.get("host_or_device") not in (None, "Host"):
      continue
    by_type[v["type"]] = (by_type.get(v["type"], 0.0)
                          + float(v.get("total_self_time") or 0))
  return by_type
