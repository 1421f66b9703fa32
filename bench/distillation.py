"""Teacher against students: real-length inference speed and dev accuracy of
`bert-train` runs of one task (a teacher and the students distilled from it
or fine-tuned directly), on the task's eval split.

  python -m bench.distillation --runs teacher=DIR,L3=DIR,... [--repeats 5]
      [--threads 2] [--batch_size 32] [--out results.json]

Each run is loaded as it is served (`trained_run.load_trained_task`: a
distillation run as its student) and run in-process over the whole eval
split as `bert-train` evaluates: rows in length order, batches of
--batch_size cut to their length bucket, one compiled `tf.function` per
bucket. Every round times one full pass of each run, the order rotating
each round (after an untimed warm-up pass each); reported are the medians of
real (non-padding) tokens per second and of examples per second with their
spread (min-max), the ratio of each run's median tokens/s to the first
run's, and the task's metrics of each (accuracy; F1 for pairs). All runs of
one bench share one tokenization of the split (their vocabularies must be
the teacher's), so the figures compare the networks alone.
"""

import argparse
import json
import os
import statistics
import sys
import time


def _parse_runs(text):
  runs = []
  for part in text.split(","):
    name, sep, path = part.partition("=")
    if not sep or not name or not path:
      raise SystemExit(f"--runs: expected NAME=DIR[,NAME=DIR...], got {part!r}")
    runs.append((name, path))
  return runs


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--runs", required=True)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--out", default=None)
  args = parser.parse_args(argv)
  runs = _parse_runs(args.runs)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  from bert.data import length_buckets as lb  # pylint: disable=g-import-not-at-top
  from bert import hardware as cpu  # pylint: disable=g-import-not-at-top
  from bert.tasks import trained_run  # pylint: disable=g-import-not-at-top

  loaded = []
  for name, path in runs:
    task, model = trained_run.load_trained_task(path)
    loaded.append((name, path, task, model))
  first = loaded[0][2]
  for name, path, task, _ in loaded[1:]:
    if (type(task) is not type(first) or task.tokenizer.vocab != first.tokenizer.vocab
        or task.source_file("eval") != first.source_file("eval")):
      raise SystemExit(f"--runs: {name} ({path}) is not a run of the first "
                       "run's task on its eval file and vocabulary")
  features = first.features("eval")
  inputs = first.model_inputs(features)
  real_tokens = int((np.asarray(features["input_mask"]) > 0).sum())
  rows = len(features["input_word_ids"])

  def make_pass(model):
    call = tf.function(lambda batch: model(batch, training=False),
                       reduce_retracing=True)
    return lambda: lb.predict_by_length(call, inputs, args.batch_size,
                                        first.length_buckets,
                                        first.sequence_outputs)

  passes, metrics = {}, {}
  for name, _, task, model in loaded:
    passes[name] = make_pass(model)
    out = passes[name]()          # warm-up: traces every bucket
    collected = dict(logits=out["logits"], label=features["label"])
    metrics[name] = {k: round(100 * v, 2)
                     for k, v in task.eval_metrics(collected).items()}
  seconds = {name: [] for name, _ in runs}
  order = [name for name, _ in runs]
  for r in range(args.repeats):
    for name in order[r % len(order):] + order[:r % len(order)]:
      start = time.perf_counter()
      passes[name]()
      seconds[name].append(time.perf_counter() - start)

  def stats(values):
    return dict(median=statistics.median(values), min=min(values), max=max(values))

  report = dict(cpu=cpu.describe(), threads=args.threads, repeats=args.repeats,
                batch_size=args.batch_size, eval_file=first.source_file("eval"),
                rows=rows, real_tokens=real_tokens, runs={})
  base = None
  for name, path, task, model in loaded:
    tps = stats([real_tokens / s for s in seconds[name]])
    eps = stats([rows / s for s in seconds[name]])
    base = base or tps["median"]
    config = task.config
    report["runs"][name] = dict(
        path=path, layers=config.num_hidden_layers, hidden=config.hidden_size,
        params=int(sum(np.prod(v.shape) for v in model.weights)),
        tokens_per_second=tps, examples_per_second=eps,
        speedup=tps["median"] / base, metrics=metrics[name])
  lines = [f"{report['cpu']}, {args.threads} threads; {rows} rows, "
           f"{real_tokens} real tokens of {report['eval_file']}; median of "
           f"{args.repeats} interleaved passes (min-max)",
           "| run | layers x width | real tokens/s | examples/s | speed-up | metrics |",
           "|---|---|---|---|---|---|"]
  for name, r in report["runs"].items():
    t, e = r["tokens_per_second"], r["examples_per_second"]
    lines.append(
        f"| {name} | {r['layers']} x {r['hidden']} | {t['median']:.0f} "
        f"({t['min']:.0f}-{t['max']:.0f}) | {e['median']:.1f} | "
        f"{r['speedup']:.2f}x | "
        + ", ".join(f"{k} {v}" for k, v in r["metrics"].items()) + " |")
  print("\n".join(lines))
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(report, f, indent=2)
  return report


if __name__ == "__main__":
  sys.exit(0 if main() else 1)
