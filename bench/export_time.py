"""How long a serving export takes: this tree against another checkout.

  git worktree add /tmp/before <commit>
  python -m bench.export_time --before /tmp/before [--precisions fp32,int8]
      [--rounds 5] --output x.md

Each measurement is a new process (as a user's `model.export` or
`bert-export` is: nothing traced or converted yet) that loads the MiniLM
classifier (`BertClassifier.from_pretrained`, the real weights) and times
`model.export(path, precision=...)` alone. The trees alternate within each
round and their order alternates between rounds; the ratio is taken per
round (after / before) and given as median (min-max), so a drift of the
machine's speed cancels out.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench import _protocol as P
from bert import hardware as cpu

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PRECISIONS = ("fp32", "bf16", "int8")

# One export, timed in a fresh process of the tree on PYTHONPATH.
_ONE = """
import json, sys, time
from bert.models import BertClassifier
from bert.testing import minilm_dir
model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2)
model.preprocessor.text_pairs = False
start = time.perf_counter()
model.export(sys.argv[1], precision=sys.argv[2])
print(json.dumps(dict(seconds=time.perf_counter() - start)))
"""


def export_seconds(root: str, precision: str) -> float:
  """One export's seconds in a new process of the tree at `root`."""
  with tempfile.TemporaryDirectory() as folder:
    env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, "-c", _ONE, os.path.join(folder, "export"), precision],
        cwd=root, env=env, capture_output=True, text=True, check=False)
  if done.returncode:
    tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
    raise RuntimeError(f"{root}: export at {precision} failed: {tail[0]}")
  return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  P.add_before(parser)
  parser.add_argument("--precisions", default="fp32,int8")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--output", required=True)
  args = parser.parse_args()
  before = P.checked_before(parser, args.before, "bert/serving/writer.py")
  precisions = [p for p in args.precisions.split(",") if p]
  if not precisions or set(precisions) - set(PRECISIONS):
    parser.error(f"--precisions: {args.precisions!r}; choose from "
                 f"{','.join(PRECISIONS)}")
  if args.rounds < 1:
    parser.error(f"--rounds: {args.rounds}; at least 1")
  trees = {"before": before, "after": ROOT}
  seconds = {}
  for r in range(args.rounds):
    for precision in precisions:
      for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
        seconds.setdefault((precision, name), []).append(
            export_seconds(trees[name], precision))
    print(f"round {r + 1}/{args.rounds} done", flush=True)
  P.publish(render(precisions, seconds, args, before), args.output)


def render(precisions, seconds, args, before):
  lines = [
      "# Serving export time, this tree against another "
      "(`python -m bench.export_time`)", "",
      f"Machine: {cpu.describe()}. MiniLM classifier (6 layers, 384 wide, "
      f"seq 128), `model.export(path, precision=...)` in a new process each "
      f"time. Before: {before}; after: {ROOT}. {args.rounds} rounds, the "
      "tree order alternating; seconds and per-round ratios as median "
      "(min-max).", "",
      "| precision | before s | after s | after / before |",
      "| --- | --- | --- | --- |"]
  for p in precisions:
    b, a = seconds[(p, "before")], seconds[(p, "after")]
    lines.append(f"| {p} | {P.spread(b, 1)} | {P.spread(a, 1)} | "
                 f"{P.spread([x / y for x, y in zip(a, b)], 3)} |")
  return "\n".join(lines) + "\n"


if __name__ == "__main__":
  main()
