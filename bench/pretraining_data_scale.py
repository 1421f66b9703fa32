"""Peak memory and speed of `bert-create-pretraining-data` as the corpus grows.

  python -m bench.pretraining_data_scale --vocab_file=VOCAB
      [--impls new=.,old=/path/to/older/checkout] [--scales 1,10]
      [--repeats 3] [--dupe_factor 5] [--out results.json]

The corpus at scale k is WikiText-2's valid + test sentence files
(`../shared/data/corpus/wikitext-2`, or $BERT_SHARED_DATA) written k times
into one file. Every round runs each (implementation, scale) once, in a
rotating order, as its own process (`python -m
bert.scripts.create_pretraining_data`, one shard, one process, with
PYTHONPATH set to the implementation's checkout); its peak resident memory
is the child's `ru_maxrss` (os.wait4), its speed the tokens per second the
tool prints. Reported: medians with min-max per (implementation, scale),
and the ratios that matter: each implementation's 10x/1x peak memory, and
each implementation's tokens/s against the first one's at the same scale.
The CPU model and flags are recorded beside the figures.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from bert.testing import shared_data as _shared_data


def _corpus(folder, scale):
  path = os.path.join(folder, f"corpus_x{scale}.txt")
  parts = [_shared_data("corpus", "wikitext-2", f"wiki.{s}.sentences.txt")
           for s in ("valid", "test")]
  with open(path, "w", encoding="utf-8") as out:
    for _ in range(scale):
      for part in parts:
        with open(part, encoding="utf-8") as f:
          text = f.read()
        out.write(text if text.endswith("\n\n") else text.rstrip("\n") + "\n\n")
  return path


def _run_once(checkout, corpus, vocab_file, dupe_factor, out_dir):
  shutil.rmtree(out_dir, ignore_errors=True)
  env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout),
             TF_CPP_MIN_LOG_LEVEL="2")
  cmd = [sys.executable, "-m", "bert.scripts.create_pretraining_data",
         f"--input_file={corpus}", f"--output_dir={out_dir}",
         f"--vocab_file={vocab_file}", f"--dupe_factor={dupe_factor}",
         "--num_shards=1", "--num_processes=1"]
  with tempfile.TemporaryFile() as log:
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
  if proc.returncode != 0:
    raise SystemExit(f"{' '.join(cmd)} failed:\n{text[-2000:]}")
  m = re.search(r"tokens ([\d,]+) \(([\d,]+)/s", text)
  if not m:
    raise SystemExit(f"no tokens/s line in the output of {' '.join(cmd)}")
  return dict(peak_rss_mb=usage.ru_maxrss / 1024,
              tokens=int(m.group(1).replace(",", "")),
              tokens_per_s=int(m.group(2).replace(",", "")))


def _summary(values):
  return dict(median=statistics.median(values), min=min(values), max=max(values))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawTextHelpFormatter)
  parser.add_argument("--vocab_file", required=True)
  parser.add_argument("--impls", default="new=.")
  parser.add_argument("--scales", default="1,10")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--dupe_factor", type=int, default=5)
  parser.add_argument("--out")
  args = parser.parse_args(argv)
  impls = [tuple(p.split("=", 1)) for p in args.impls.split(",")]
  scales = [int(s) for s in args.scales.split(",")]
  work = tempfile.mkdtemp()
  try:
    corpora = {s: _corpus(work, s) for s in scales}
    cells = [(name, path, s) for name, path in impls for s in scales]
    runs = {(name, s): [] for name, _, s in cells}
    for r in range(args.repeats):
      order = cells[r % len(cells):] + cells[:r % len(cells)]
      for name, path, s in order:
        result = _run_once(path, corpora[s], args.vocab_file, args.dupe_factor,
                           os.path.join(work, "out"))
        runs[(name, s)].append(result)
        print(f"round {r} {name} x{s}: {result}", flush=True)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  from bert.hardware import describe  # pylint: disable=g-import-not-at-top
  report = dict(cpu=describe(), dupe_factor=args.dupe_factor, repeats=args.repeats,
                cells={})
  for (name, s), results in runs.items():
    report["cells"][f"{name} x{s}"] = dict(
        peak_rss_mb=_summary([x["peak_rss_mb"] for x in results]),
        tokens_per_s=_summary([x["tokens_per_s"] for x in results]),
        tokens=results[0]["tokens"])
  cells = report["cells"]
  first = impls[0][0]
  for name, _ in impls:
    lo, hi = f"{name} x{min(scales)}", f"{name} x{max(scales)}"
    report[f"{name}: peak RSS x{max(scales)} / x{min(scales)}"] = round(
        cells[hi]["peak_rss_mb"]["median"] / cells[lo]["peak_rss_mb"]["median"], 3)
    for s in scales:
      report[f"{name} / {first} tokens/s x{s}"] = round(
          cells[f"{name} x{s}"]["tokens_per_s"]["median"] /
          cells[f"{first} x{s}"]["tokens_per_s"]["median"], 3)
  print(json.dumps(report, indent=1))
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(report, f, indent=1)


if __name__ == "__main__":
  main()
