"""Fine-tuning from TFRecords vs in memory as the training set grows: peak
memory and training examples/s of `bert-train` on SST-2.

  python -m bench.finetuning_records_scale [--init_checkpoint=MINILM]
      [--cells memory:1,records:1,records:20] [--train_steps 120]
      [--steps_per_loop 20] [--repeats 2] [--num_shards 4] [--out r.json]

The training set at scale k is SST-2's train.tsv (`../shared/data/glue/SST-2`
or $BERT_SHARED_DATA) with its rows written k times (k = 20: 1,346,980 rows).
Records are written once per scale by `bert-create-finetuning-data` (its
time is reported). Every round runs each cell once, in a rotating order, as
its own `bert-train --task=glue_sst2 --mode=train` process (seq_length 64,
batch 32, the same steps): its peak resident memory is the child's
`ru_maxrss` (os.wait4); its speed the median of the examples/s the loop logs
after its first logging interval (tracing). Reported: medians with min-max
per cell, each cell's peak memory and speed against the first cell's, and
the CPU model and flags.
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
import time

from bert.testing import shared_data as _shared_data


def _data_dir(work, scale):
  """SST-2 with its training rows `scale` times, and its dev set."""
  folder = os.path.join(work, f"sst2_x{scale}")
  os.makedirs(folder, exist_ok=True)
  with open(_shared_data("glue", "SST-2", "train.tsv"), encoding="utf-8") as f:
    header, *rows = f.read().splitlines(keepends=True)
  with open(os.path.join(folder, "train.tsv"), "w", encoding="utf-8") as out:
    out.write(header)
    for _ in range(scale):
      out.writelines(rows)
  shutil.copy(_shared_data("glue", "SST-2", "dev.tsv"), folder)
  return folder, len(rows) * scale


def _run(cmd):
  with tempfile.TemporaryFile() as log:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
  if os.waitstatus_to_exitcode(status) != 0:
    raise SystemExit(f"{' '.join(cmd)} failed:\n{text[-3000:]}")
  return text, usage.ru_maxrss / 1024, seconds


def _summary(values):
  return dict(median=statistics.median(values), min=min(values), max=max(values))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawTextHelpFormatter)
  parser.add_argument("--init_checkpoint", default=None,
                      help="default: the all-MiniLM-L6-v2 of the test extra")
  parser.add_argument("--cells", default="memory:1,records:1,records:20")
  parser.add_argument("--train_steps", type=int, default=120)
  parser.add_argument("--steps_per_loop", type=int, default=20)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--num_shards", type=int, default=4)
  parser.add_argument("--out")
  args = parser.parse_args(argv)
  if args.init_checkpoint is None:
    from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
    args.init_checkpoint = minilm_dir()
  cells = [(kind, int(scale)) for kind, scale in
           (c.split(":") for c in args.cells.split(","))]
  bin_dir = os.path.dirname(sys.executable)
  common = [f"--init_checkpoint={args.init_checkpoint}", "--task=glue_sst2",
            "--gin_param=FinetuningInputs.seq_length=64"]
  work = tempfile.mkdtemp()
  report = dict(train_steps=args.train_steps, repeats=args.repeats,
                num_shards=args.num_shards, writing={}, cells={})
  try:
    data, rows = {}, {}
    for scale in sorted({s for _, s in cells}):
      data[scale], rows[scale] = _data_dir(work, scale)
    for scale in sorted({s for k, s in cells if k == "records"}):
      out = os.path.join(work, f"records_x{scale}")
      _, rss, seconds = _run([os.path.join(bin_dir, "bert-create-finetuning-data"),
                              *common, f"--data_dir={data[scale]}",
                              f"--output_dir={out}", "--splits=train",
                              f"--num_shards={args.num_shards}"])
      report["writing"][f"x{scale}"] = dict(
          rows=rows[scale], seconds=round(seconds, 1),
          rows_per_s=round(rows[scale] / seconds), peak_rss_mb=round(rss, 1))
      print(f"records x{scale}: {report['writing'][f'x{scale}']}", flush=True)
    results = {c: [] for c in cells}
    for r in range(args.repeats):
      for kind, scale in cells[r % len(cells):] + cells[:r % len(cells)]:
        model_dir = os.path.join(work, "model")
        shutil.rmtree(model_dir, ignore_errors=True)
        cmd = [os.path.join(bin_dir, "bert-train"), *common,
               f"--data_dir={data[scale]}", f"--model_dir={model_dir}",
               "--mode=train", f"--train_steps={args.train_steps}",
               f"--gin_param=RuntimeConfig.steps_per_loop={args.steps_per_loop}",
               f"--gin_param=RuntimeConfig.checkpoint_interval={args.train_steps}"]
        if kind == "records":
          records = os.path.join(work, f"records_x{scale}")
          cmd.append(f"--gin_param=FinetuningInputs.records={records!r}")
        text, rss, seconds = _run(cmd)
        speeds = [float(x) for x in re.findall(r"\| ([\d.]+) ex/s", text)]
        if len(speeds) < 2:
          raise SystemExit(f"too few ex/s lines in the log of {' '.join(cmd)}")
        result = dict(peak_rss_mb=rss, examples_per_s=statistics.median(speeds[1:]),
                      seconds=seconds)
        results[(kind, scale)].append(result)
        print(f"round {r} {kind} x{scale}: {result}", flush=True)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  from bert.hardware import describe  # pylint: disable=g-import-not-at-top
  report["cpu"] = describe()
  for (kind, scale), rs in results.items():
    report["cells"][f"{kind} x{scale}"] = dict(
        rows=rows[scale],
        peak_rss_mb=_summary([x["peak_rss_mb"] for x in rs]),
        examples_per_s=_summary([x["examples_per_s"] for x in rs]),
        seconds=_summary([x["seconds"] for x in rs]))
  first = f"{cells[0][0]} x{cells[0][1]}"
  base = report["cells"][first]
  for name, cell in report["cells"].items():
    report[f"{name} / {first}: peak RSS"] = round(
        cell["peak_rss_mb"]["median"] / base["peak_rss_mb"]["median"], 3)
    report[f"{name} / {first}: examples/s"] = round(
        cell["examples_per_s"]["median"] / base["examples_per_s"]["median"], 3)
  print(json.dumps(report, indent=1))
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(report, f, indent=1)


if __name__ == "__main__":
  main()
