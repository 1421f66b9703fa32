"""The benchmark's worker protocol: plain Python, no framework imports, so the
KerasHub worker can use it from its own Keras 3 venv.

A worker is one process for one implementation. The driver (`bench.run`)
writes one JSON command per line to its stdin and reads one JSON reply per
line from the worker's original stdout (framework logs go to stderr):

  {"cmd": "build", "key": K, "spec": {...}}  -> {"ok": true, "seconds": s}
      build case K (model, mode, batch, seq) and warm it up (traces, XLA
      compilation, first allocations): none of that is timed later.
  {"cmd": "time", "key": K, "iters": n}       -> {"ok": true, "seconds": s,
                                                   "work": w}
      run case K n times back to back; wall seconds of the whole block, and
      the sum of what the steps returned where they return a Python int (a
      count, e.g. real tokens processed), else 0.
  {"cmd": "quit"}

Errors come back as {"ok": false, "error": "..."}; the driver reports them.
"""

import json
import os
import statistics
import subprocess
import sys
import time
import traceback

# Model shapes used by every worker (vocab of bert-base-uncased).
SHAPES = {
    "bert_base": dict(layers=12, hidden=768, heads=12, intermediate=3072),
    "bert_small": dict(layers=4, hidden=512, heads=8, intermediate=2048),
    "minilm_l6": dict(layers=6, hidden=384, heads=12, intermediate=1536),
}
VOCAB, MAX_POSITIONS, TYPE_VOCAB, NUM_CLASSES = 30522, 512, 2, 2
THREADS = 2
# The feed-forward GELU every implementation of a run computes (spec key
# "gelu"), so all run the same function. "tanh": the approximation BERT was
# released with (google-research `modeling.py`; our "gelu", Model Garden's and
# KerasHub's default); "erf": the exact form, Hugging Face's "gelu" (what its
# BERT checkpoints' config.json files name). The two cost differently in some
# runtimes' fused kernels, so a table that mixed them would not compare
# implementations of one model.
GELU_FORMS = ("tanh", "erf")
DEFAULT_GELU = "tanh"


def gelu_form(spec):
  """The GELU form a worker builds for SPEC ("tanh" or "erf")."""
  form = spec.get("gelu", DEFAULT_GELU)
  if form not in GELU_FORMS:
    raise ValueError(f"spec gelu={form!r}: choose from {GELU_FORMS}")
  return form


def synthetic_batch(batch, seq, seed=0):
  """Token ids, an all-ones mask (dense full-length rows), two segments and
  labels, as nested lists (each worker converts them to its tensors)."""
  import random  # pylint: disable=g-import-not-at-top
  rng = random.Random(seed)
  ids = [[rng.randrange(1000, VOCAB) for _ in range(seq)] for _ in range(batch)]
  types = [[0] * (seq // 2) + [1] * (seq - seq // 2) for _ in range(batch)]
  mask = [[1] * seq for _ in range(batch)]
  labels = [rng.randrange(NUM_CLASSES) for _ in range(batch)]
  return ids, mask, types, labels


def reply_channel():
  """The worker's reply stream: its original stdout. Whatever else prints
  to stdout (frameworks, stray prints) goes to stderr from now on."""
  out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
  os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
  return out


def serve(build):
  """Runs the command loop. `build(spec)` returns a function that runs one
  iteration of the case to completion (results materialised)."""
  out = reply_channel()
  cases = {}
  for line in sys.stdin:
    msg = json.loads(line)
    try:
      if msg["cmd"] == "quit":
        break
      start, work = time.perf_counter(), 0
      if msg["cmd"] == "build":
        step = build(msg["spec"])
        for _ in range(msg["spec"].get("warmup", 2)):
          step()
        cases[msg["key"]] = step
      elif msg["cmd"] == "time":
        step = cases[msg["key"]]
        for _ in range(msg["iters"]):
          done = step()
          if type(done) is int:   # pylint: disable=unidiomatic-typecheck
            work += done
      else:
        raise ValueError(f"unknown command {msg['cmd']!r}")
      reply = {"ok": True, "seconds": time.perf_counter() - start, "work": work}
    except Exception as e:  # pylint: disable=broad-except
      traceback.print_exc()
      reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    out.write(json.dumps(reply) + "\n")


def add_before(parser):
  """The `--before` argument of a driver that compares this tree with
  another checkout."""
  parser.add_argument("--before", required=True,
                      help="the other checkout's root folder")


def checked_before(parser, path, needs):
  """`--before` as an absolute path; a one-line error unless it holds the
  file `needs` (a path relative to a checkout's root)."""
  before = os.path.abspath(path)
  if not os.path.isfile(os.path.join(before, needs)):
    parser.error(f"--before: {before} has no {needs} "
                 "(not a checkout of this project)")
  return before


def spread(values, digits=2):
  """median (min-max) of `values`."""
  return (f"{statistics.median(values):.{digits}f} "
          f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def publish(report, path):
  """Prints a run's Markdown report and writes it to `path` (if given)."""
  print(report)
  if path:
    with open(path, "w", encoding="utf-8") as f:
      f.write(report)


def close_all(workers):
  """Asks every worker to quit (kills those that do not)."""
  for worker in workers:
    worker.close()


class Worker:
  """The orchestrator's end of one worker process: JSON commands on its
  stdin, one JSON reply per command on its stdout, its stderr in `log`."""

  def __init__(self, name, argv, cwd, log, env=None):
    self.name = name
    self.log = log
    self.proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(log, "w"), text=True, env=dict(os.environ, **(env or {})))

  def call_full(self, **msg):
    """Sends one command; returns the whole reply."""
    self.proc.stdin.write(json.dumps(msg) + "\n")
    self.proc.stdin.flush()
    line = self.proc.stdout.readline()
    if not line:
      raise RuntimeError(f"worker {self.name} died; see {self.log}")
    reply = json.loads(line)
    if not reply["ok"]:
      raise RuntimeError(f"worker {self.name}: {reply['error']} (see {self.log})")
    return reply

  def call(self, **msg):
    """Sends one command; returns its wall seconds."""
    return self.call_full(**msg)["seconds"]

  def close(self):
    try:
      self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
      self.proc.stdin.flush()
      self.proc.wait(timeout=60)
    except (OSError, subprocess.TimeoutExpired):
      self.proc.kill()
