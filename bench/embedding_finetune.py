"""Contrastive fine-tuning of all-MiniLM-L6-v2 on SQuAD 1.1 dev, ours
against sentence-transformers' trainer (issue 44, acceptance 3).

  python -m bench.embedding_finetune [--seeds 0,1,2] [--impls fit,st,bert-train]
      [--epochs 1] [--batch_size 32] [--learning_rate 5e-5]
      [--warmup_ratio 0.0] [--max_steps 0] [--articles 0] [--resume]

The split: SQuAD dev's article titles (`bert.data.squad_json.
article_titles`) halved by `squad_examples.split_articles(titles, 0.5,
seed=--split_seed)` (42, as `bench.embedding_squad_data` and
configs/embedding_squad.gin): the train half's (question, paragraph) pairs
are the training data; the test half is the retrieval test, each of its
questions against every distinct paragraph of the test half, its own
paragraph relevant (recall@1, MRR@10, nDCG@10).

The recipe, the same on both sides: the in-batch ranking loss
(MultipleNegativesRankingLoss: cosine x 20, the other rows' paragraphs as
negatives), batches of 32 drawn at random, --epochs over the train pairs
(or --max_steps steps), AdamW lr 5e-5, eps 1e-8, no weight decay, linear
warmup over --warmup_ratio of the steps (default none) then linear decay to
0, gradient norm clipped to 1, dropout 0.1 (the checkpoint's), max 256 word
pieces; the run's seed sets the data order, dropout and any initialisation
(each library draws its own order from it).
  fit: `BertTextEmbedder.from_pretrained(minilm)`, `compile()` (the
    recipe above is its default; a warmup ratio is passed as an
    `OptimizerConfig`), `tf_keras.utils.set_random_seed(seed)`, and `fit`
    on the batches `fit((questions, paragraphs), batch_size=32)` draws,
    made by the preprocessor's `dataset(..., seed=seed)` so that the seed
    also sets the data order (on raw texts `fit` shuffles with a fixed
    seed, 42); tested with `evaluate((questions, paragraphs))`
    (bert.retrieval exact search, bert.metrics.retrieval_metrics).
  st: `SentenceTransformerTrainer` + `MultipleNegativesRankingLoss`, the
    same arguments (`bench._st_worker`), tested with its own
    `InformationRetrievalEvaluator`.
  bert-train: `bert-train --task=embedding_squad --mode=train_and_eval`
    (configs/embedding_squad.gin: the same recipe) on the same pairs,
    written as its JSON lines ({"question", "paragraph"}), with
    `RuntimeConfig.seed` = `FinetuningInputs.seed` = the seed; its eval
    split is the test half (the figures of its "final:" line).
Zero-shot (the checkpoint untrained) is measured once per side. Every run
is a process of its own with 2 intra-op threads (bert-train: TensorFlow's
default, all cores), one after the other; the
results are written to --output after each run (--resume skips the runs
already there). The summary: recall@1 (in points) per seed, mean and spread
(min-max, standard deviation), the check "ours >= sentence-transformers -
0.3 recall@1 and both above zero-shot".
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

from bench import embedding as E

IMPLS = ("fit", "st", "bert-train")
MARGIN = 0.3     # recall@1 points ours may trail sentence-transformers by


def split(args):
  """(train titles, test titles) of SQuAD dev."""
  from bert.data import squad_examples, squad_json  # pylint: disable=g-import-not-at-top
  from bert.testing import shared_data  # pylint: disable=g-import-not-at-top
  titles = squad_json.article_titles(shared_data("squad", "dev-v1.1.json"))
  if args.articles:
    titles = titles[:args.articles]
  return squad_examples.split_articles(titles, 0.5, args.split_seed)


def write_jsonl(work_dir, train, test):
  """The pairs as `bert-train --task=embedding_squad` reads them (the files
  of `bench.embedding_squad_data`); the folder."""
  folder = os.path.join(work_dir, "finetune_squad_data")
  os.makedirs(folder, exist_ok=True)
  for name, data in (("squad_train.jsonl", train), ("squad_test.jsonl", test)):
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
      for question, r in zip(data["questions"], data["relevant"]):
        f.write(json.dumps(dict(question=question, paragraph=data["corpus"][r]),
                           ensure_ascii=False) + "\n")
  return folder


def prepare(args):
  """Writes the train pairs and the test set under --work_dir; their paths."""
  train_titles, test_titles = split(args)
  train = E.squad_retrieval(titles=train_titles)
  test = E.squad_retrieval(titles=test_titles)
  pairs = dict(anchor=train["questions"],
               positive=[train["corpus"][r] for r in train["relevant"]])
  files = dict(
      train=E.write_json(args.work_dir, "finetune_train.json", pairs),
      jsonl=write_jsonl(args.work_dir, train, test),
      test=E.write_json(args.work_dir, "finetune_test_ir.json", E.ir_data(test)),
      test_pairs=E.write_json(args.work_dir, "finetune_test_pairs.json", dict(
          questions=test["questions"],
          paragraphs=[test["corpus"][r] for r in test["relevant"]])))
  info = dict(train_articles=len(train_titles), test_articles=len(test_titles),
              train_pairs=len(pairs["anchor"]),
              train_paragraphs=len(train["corpus"]),
              test_questions=len(test["questions"]),
              test_paragraphs=len(test["corpus"]), test_titles=test_titles)
  return files, info


# ------------------------------------------------------ ours, in a child
def run_fit(spec):
  """One run of ours (a child process): zero-shot or fine-tuned, then the
  test half's retrieval through `evaluate`."""
  E.setup_tensorflow()
  import dataclasses  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from bert.models.embedding_objective import default_recipe  # pylint: disable=g-import-not-at-top
  tf_keras.utils.set_random_seed(spec["seed"])
  model = E.load_ours()
  result = dict(impl="fit", seed=spec["seed"],
                versions={"tensorflow": tf.__version__})
  if not spec.get("zero_shot"):
    with open(spec["train"], encoding="utf-8") as f:
      train = json.load(f)
    recipe = dataclasses.replace(default_recipe(),
                                 learning_rate=spec["learning_rate"],
                                 warmup_fraction=spec["warmup_ratio"])
    model.compile(optimizer=recipe)
    # The batches `fit` draws from raw texts, shuffled with the run's seed
    # (on raw texts `fit` shuffles with length_buckets.SHUFFLE_SEED whatever
    # the global seed): the preprocessor's dataset, as `fit` makes it.
    pre = model.preprocessor
    features = pre.encode((train["anchor"], train["positive"]))
    batches = pre.dataset(features, None, spec["batch_size"], training=True,
                          seed=spec["seed"])
    steps = pre.num_batches(features, spec["batch_size"])
    epochs = spec["epochs"]
    if spec.get("max_steps"):
      steps, epochs = spec["max_steps"], 1
    start = time.perf_counter()
    history = model.fit(batches, steps_per_epoch=steps, epochs=epochs,
                        verbose=2)
    result.update(train_seconds=time.perf_counter() - start,
                  steps=int(model.optimizer.iterations.numpy()),
                  train_loss=float(history.history["loss"][-1]))
  with open(spec["test_pairs"], encoding="utf-8") as f:
    test = json.load(f)
  metrics = model.evaluate((test["questions"], test["paragraphs"]),
                           batch_size=spec["batch_size"])
  result["metrics"] = {k: float(v) for k, v in metrics.items()}
  return result


def bert_train_argv(spec, model_dir):
  """The `bert-train` command of one run (this Python's `bert.scripts`)."""
  seed = spec["seed"]
  params = [f"RuntimeConfig.seed={seed}", f"FinetuningInputs.seed={seed}",
            'RuntimeConfig.mixed_precision="fp32"',   # as sentence-transformers
            f"FinetuningInputs.global_batch_size={spec['batch_size']}",
            f"OptimizerConfig.learning_rate={spec['learning_rate']}",
            f"OptimizerConfig.warmup_fraction={spec['warmup_ratio']}",
            f"ScheduleConfig.num_train_epochs={float(spec['epochs'])}"]
  if spec.get("max_steps"):
    params.append(f"RuntimeConfig.train_steps={spec['max_steps']}")
  return ([sys.executable, "-m", "bert.scripts.train", "--task=embedding_squad",
           f"--init_checkpoint={spec['model']}", f"--data_dir={spec['jsonl']}",
           f"--model_dir={model_dir}", "--mode=train_and_eval"]
          + [f"--gin_param={p}" for p in params])


def final_metrics(log_text):
  """The figures of bert-train's last "final: name value | ..." line."""
  lines = [l for l in log_text.splitlines() if l.startswith("final: ")]
  if not lines:
    raise RuntimeError("bert-train printed no final: line")
  out = {}
  for item in lines[-1][len("final: "):].split(" | "):
    name, _, value = item.rpartition(" ")
    out[name] = float(value)
  return out


# ---------------------------------------------------------- orchestration
def child(impl, spec, work_dir):
  """Runs one spec in a fresh process; its result dict."""
  name = f"finetune_{impl}_{'zero' if spec.get('zero_shot') else spec['seed']}"
  spec_path = E.write_json(work_dir, name + "_spec.json", spec)
  out = os.path.join(work_dir, name + "_result.json")
  model_dir = os.path.join(work_dir, name + "_run")
  if impl == "st":
    argv = [sys.executable, "-m", "bench._st_worker", f"--finetune={spec_path}",
            f"--output={out}"]
  elif impl == "bert-train":
    shutil.rmtree(model_dir, ignore_errors=True)   # a fresh run, no resuming
    argv = bert_train_argv(spec, model_dir)
  else:
    argv = [sys.executable, "-m", "bench.embedding_finetune", f"--child={impl}",
            f"--spec={spec_path}", f"--output={out}"]
  log = os.path.join(work_dir, name + ".log")
  start = time.time()
  with open(log, "w", encoding="utf-8") as f:
    done = subprocess.run(argv, cwd=E.ROOT, stdout=f, stderr=subprocess.STDOUT,
                          check=False)
  if done.returncode:
    with open(log, encoding="utf-8") as f:
      tail = [l for l in f.read().splitlines() if l.strip()][-1:] or ["?"]
    raise RuntimeError(f"{name} failed: {tail[0]} (see {log})")
  if impl == "bert-train":
    with open(log, encoding="utf-8") as f:
      metrics = final_metrics(f.read())
    shutil.rmtree(model_dir, ignore_errors=True)
    steps = spec.get("max_steps") or spec["epochs"] * math.ceil(
        spec["train_pairs"] / spec["batch_size"])
    result = dict(seed=spec["seed"], metrics=metrics, steps=steps,
                  train_seconds=time.time() - start)   # with its evaluation
  else:
    with open(out, encoding="utf-8") as f:
      result = json.load(f)
  result["wall_seconds"] = time.time() - start
  return result


def summarize(results, info, args):
  """(report dict, Markdown lines)."""
  def r1(run):
    return 100 * run["metrics"]["recall@1"]

  sides = {}
  for run in results.values():
    side = sides.setdefault(run["impl"], dict(runs=[]))
    if run.get("zero_shot"):
      side["zero_shot"] = run
    else:
      side["runs"].append(run)
  rows = {}
  for impl, side in sides.items():
    runs = sorted(side["runs"], key=lambda r: r["seed"])
    values = [r1(r) for r in runs]
    row = dict(zero_shot=r1(side["zero_shot"]) if "zero_shot" in side else None,
               recall_at_1=values, seeds=[r["seed"] for r in runs])
    if values:
      row.update(mean=statistics.mean(values), min=min(values), max=max(values),
                 std=statistics.stdev(values) if len(values) > 1 else 0.0,
                 mrr_at_10=statistics.mean(100 * r["metrics"]["mrr@10"]
                                           for r in runs),
                 ndcg_at_10=statistics.mean(100 * r["metrics"]["ndcg@10"]
                                            for r in runs),
                 steps=sorted({r.get("steps") for r in runs}),
                 train_minutes=statistics.mean(r.get("train_seconds", 0)
                                               for r in runs) / 60)
    rows[impl] = row
  if "bert-train" in rows and rows.get("fit", {}).get("zero_shot") is not None:
    # The same checkpoint and encoder as fit's, untrained.
    rows["bert-train"]["zero_shot"] = rows["fit"]["zero_shot"]
  checks = {}
  ours = [i for i in ("fit", "bert-train") if rows.get(i, {}).get("mean") is not None]
  if "st" in rows and rows["st"].get("mean") is not None:
    for impl in ours:
      checks[f"{impl} >= st - {MARGIN}"] = (
          rows[impl]["mean"] >= rows["st"]["mean"] - MARGIN)
  for impl, row in rows.items():
    if row.get("mean") is not None and row["zero_shot"] is not None:
      checks[f"{impl} above zero-shot"] = row["mean"] > row["zero_shot"]
  rec = E.record(" ".join(["python -m bench.embedding_finetune"] + sys.argv[1:]))
  report = dict(rec, info=info, recipe=dict(
      epochs=args.epochs, max_steps=args.max_steps, batch_size=args.batch_size,
      learning_rate=args.learning_rate, warmup_ratio=args.warmup_ratio,
      split_seed=args.split_seed), rows=rows, checks=checks,
                runs=list(results.values()))
  lines = E.header(rec, "Fine-tuning: SQuAD dev, half the articles each side")
  lines += [
      f"Train: {info['train_pairs']} (question, paragraph) pairs of "
      f"{info['train_articles']} articles; test: {info['test_questions']} "
      f"questions x {info['test_paragraphs']} paragraphs of "
      f"{info['test_articles']} other articles. Recipe: "
      + (f"{args.max_steps} steps" if args.max_steps else f"{args.epochs} epoch(s)")
      + f", batch {args.batch_size}, lr {args.learning_rate:g}, warmup "
      f"{args.warmup_ratio:g}, seeds {args.seeds}. Recall@1 in points.", "",
      "| implementation | zero-shot recall@1 | fine-tuned recall@1: mean "
      "(min-max), std | per seed | MRR@10 | nDCG@10 | steps | train min |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
  names = {"fit": "**ours** (`fit`)", "bert-train": "**ours** (`bert-train`)",
           "st": "sentence-transformers trainer"}
  for impl, row in rows.items():
    zero = "-" if row["zero_shot"] is None else f"{row['zero_shot']:.2f}"
    if row.get("mean") is None:
      lines.append(f"| {names[impl]} | {zero} | - | - | - | - | - | - |")
      continue
    lines.append(
        f"| {names[impl]} | {zero} | {row['mean']:.2f} ({row['min']:.2f}-"
        f"{row['max']:.2f}), {row['std']:.2f} | "
        + ", ".join(f"{v:.2f}" for v in row["recall_at_1"])
        + f" | {row['mrr_at_10']:.2f} | {row['ndcg_at_10']:.2f} | "
        f"{'/'.join(str(s) for s in row['steps'])} | {row['train_minutes']:.1f} |")
  lines += ["", "Checks: " + ("; ".join(
      f"{k}: {'yes' if v else 'NO'}" for k, v in checks.items()) or "none")
            + "."]
  return report, lines


def main(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--impls", default="fit,st,bert-train",
                      help=f"from {','.join(IMPLS)}")
  parser.add_argument("--epochs", type=int, default=1)
  parser.add_argument("--max_steps", type=int, default=0,
                      help="steps instead of epochs (0: --epochs)")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--warmup_ratio", type=float, default=0.0)
  parser.add_argument("--split_seed", type=int, default=42)
  parser.add_argument("--articles", type=int, default=0,
                      help="the first N articles only, split in half (0: all)")
  parser.add_argument("--no_zero_shot", action="store_true")
  parser.add_argument("--resume", action="store_true",
                      help="keep the runs already in --output")
  parser.add_argument("--work_dir",
                      default=os.path.join(E.HERE, ".serving", "embedding"))
  parser.add_argument("--output", default=None,
                      help="default: WORK_DIR/finetune.json")
  parser.add_argument("--child", choices=("fit",), help=argparse.SUPPRESS)
  parser.add_argument("--spec", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    with open(args.spec, encoding="utf-8") as f:
      spec = json.load(f)
    result = run_fit(spec)
    with open(args.output, "w", encoding="utf-8") as f:
      json.dump(result, f)
    return
  impls = [i for i in args.impls.split(",") if i]
  unknown = [i for i in impls if i not in IMPLS]
  if unknown:
    parser.error(f"--impls: unknown {unknown}; choose from {list(IMPLS)}")
  seeds = [int(s) for s in args.seeds.split(",") if s]
  os.makedirs(args.work_dir, exist_ok=True)
  output = args.output or os.path.join(args.work_dir, "finetune.json")
  E.setup_tensorflow()
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  files, info = prepare(args)
  print(f"split: {json.dumps({k: v for k, v in info.items() if k != 'test_titles'})}",
        flush=True)
  results = {}
  if args.resume and os.path.exists(output):
    with open(output, encoding="utf-8") as f:
      results = {f"{r['impl']}/{'zero' if r.get('zero_shot') else r['seed']}": r
                 for r in json.load(f)["runs"]}
  base = dict(model=minilm_dir(), train=files["train"], test=files["test"],
              jsonl=files["jsonl"], train_pairs=info["train_pairs"],
              test_pairs=files["test_pairs"], batch_size=args.batch_size,
              epochs=args.epochs, max_steps=args.max_steps,
              learning_rate=args.learning_rate, warmup_ratio=args.warmup_ratio)
  jobs = []
  if not args.no_zero_shot:
    jobs += [(impl, dict(base, seed=0, zero_shot=True))
             for impl in impls if impl != "bert-train"]
  jobs += [(impl, dict(base, seed=s)) for s in seeds for impl in impls]
  for impl, spec in jobs:
    key = f"{impl}/{'zero' if spec.get('zero_shot') else spec['seed']}"
    if key in results:
      continue
    print(f"running {key} ...", flush=True)
    result = child(impl, spec, args.work_dir)
    result["impl"] = impl
    result["zero_shot"] = bool(spec.get("zero_shot"))
    results[key] = result
    print(f"  {key}: recall@1 {100 * result['metrics']['recall@1']:.2f} "
          f"({result['wall_seconds']:.0f} s)", flush=True)
    report, lines = summarize(results, info, args)
    with open(output, "w", encoding="utf-8") as f:
      json.dump(report, f, indent=1)
  report, lines = summarize(results, info, args)
  print("\n".join(lines))
  print(f"\nwrote {output}")


if __name__ == "__main__":
  main()
