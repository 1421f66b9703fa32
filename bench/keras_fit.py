"""The Keras path against `bert-train`: dev metrics and training throughput,
the two runs from the same checkpoint, seed and recipe.

  python -m bench.keras_fit --model=MINILM_DIR --data_dir=glue/MRPC \\
      --out=runs/keras_fit [--repeats=2] [--seed=1]
  python -m bench.keras_fit --task=wnut17 --model=MINILM_DIR \\
      --data_dir=ner/wnut17 --out=runs/keras_fit_ner --repeats=1

MRPC: accuracy and F1 on dev. WNUT-17 (`--task=wnut17`): entity F1 on the
test file, as `configs/ner_wnut17.gin` evaluates it; the tagger's
predictions come from `model.predict` on the test sentences' words.

Per repeat, in turn (A B A B ...; never two at once):
  A  `python -m bench.keras_fit --worker=fit`: `BertClassifier.from_pretrained`,
     `compile()`, `fit(x=(a, b), y=labels, epochs=3, batch_size=32)`,
     `evaluate` on dev;
  B  `bert-train --task=glue_mrpc --init_checkpoint=... --mode=train_and_eval`
     with `RuntimeConfig.seed` = --seed (the global seed, as A's
     `tf_keras.utils.set_random_seed`; both shuffle with the default op seed)
     and one loop per epoch.
Throughput: training examples per second over epochs 2 and 3 (epoch 1
includes tracing), from a Keras callback (A) and from the loop's log lines
(B). Prints one JSON line per run and a summary with the CPU model and flags.
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time


def cpu() -> str:
  model, flags = platform.processor(), ""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      info = f.read()
    model = re.search(r"model name\s*:\s*(.*)", info).group(1)
    present = set(re.search(r"flags\s*:\s*(.*)", info).group(1).split())
    flags = " ".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16",
                                 "avx512_vnni", "amx_bf16") if f in present)
  except (OSError, AttributeError):
    pass
  return f"{model} [{flags}] x{os.cpu_count()}"


def fit_worker_ner(args):
  import tf_keras  # pylint: disable=g-import-not-at-top
  from bert.data import ner_data  # pylint: disable=g-import-not-at-top
  from bert.models import BertTokenClassifier  # pylint: disable=g-import-not-at-top
  from bert.tasks.token_classification import entity_metrics  # pylint: disable=g-import-not-at-top

  train = ner_data.read_conll(os.path.join(args.data_dir, "wnut17train.conll"))
  test = ner_data.read_conll(os.path.join(args.data_dir,
                                          "emerging.test.annotated"))
  tf_keras.utils.set_random_seed(args.seed)
  model = BertTokenClassifier.from_pretrained(
      args.model, labels=ner_data.label_list(train), seq_length=128,
      precision="fp32")   # as the Hugging Face runs it is compared with
  model.compile()
  timer = _epoch_timer()
  model.fit(x=[s.words for s in train], y=[s.tags for s in train], epochs=3,
            batch_size=32, callbacks=[timer], verbose=2)
  predicted = model.predict([s.words for s in test])["tags"]
  metrics = entity_metrics([s.tags for s in test], predicted)
  print(json.dumps(dict(impl="fit", **metrics, epoch_seconds=timer.times,
                        examples_per_second=2 * len(train) / sum(timer.times[1:]),
                        steps=int(model.optimizer.iterations.numpy()))))


def _epoch_timer():
  """A Keras callback recording the seconds of each epoch in `.times`."""
  import tf_keras  # pylint: disable=g-import-not-at-top

  class EpochTimer(tf_keras.callbacks.Callback):

    def __init__(self):
      super().__init__()
      self.times = []

    def on_epoch_begin(self, epoch, logs=None):
      self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
      self.times.append(time.perf_counter() - self.start)

  return EpochTimer()


def fit_worker(args):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from bert.data import classification_data as cd  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top

  def read(split):
    examples = cd.read_glue("mrpc", os.path.join(args.data_dir, f"{split}.tsv"),
                            split)
    return ([e.text_a for e in examples], [e.text_b for e in examples],
            [int(e.label) for e in examples])

  a, b, y = read("train")
  dev_a, dev_b, dev_y = read("dev")
  tf_keras.utils.set_random_seed(args.seed)
  model = BertClassifier.from_pretrained(args.model, num_classes=2,
                                         precision="fp32")   # as Hugging Face's
  model.compile()
  timer = _epoch_timer()
  model.fit(x=(a, b), y=y, epochs=3, batch_size=32, callbacks=[timer], verbose=2)
  metrics = model.evaluate((dev_a, dev_b), dev_y, return_dict=True, verbose=0)
  print(json.dumps(dict(impl="fit", accuracy=metrics["accuracy"],
                        f1=metrics["f1"], epoch_seconds=timer.times,
                        examples_per_second=2 * len(y) / sum(timer.times[1:]),
                        steps=int(model.optimizer.iterations.numpy()))))
  del tf


def run_fit(args):
  out = subprocess.run(
      [sys.executable, "-m", "bench.keras_fit", "--worker=fit",
       f"--task={args.task}", f"--model={args.model}",
       f"--data_dir={args.data_dir}", f"--seed={args.seed}"],
      check=True, capture_output=True, text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def run_train(args, model_dir):
  # One loop per epoch: ceil(3668 / 32) MRPC batches, ceil(3394 / 32) WNUT.
  task, steps_per_epoch = {
      "mrpc": ("glue_mrpc", 115),
      "wnut17": ("ner_wnut17", 107)}[args.task]
  command = [
      "bert-train", f"--task={task}", f"--init_checkpoint={args.model}",
      f"--data_dir={args.data_dir}", f"--model_dir={model_dir}",
      "--mode=train_and_eval", "--mixed_precision=fp32",
      f"--gin_param=RuntimeConfig.seed={args.seed}",
      f"--gin_param=RuntimeConfig.steps_per_loop={steps_per_epoch}",
      "--gin_param=RuntimeConfig.eval_interval=100000"]
  out = subprocess.run(command, check=True, capture_output=True, text=True)
  text = out.stdout + out.stderr
  rates = [float(r) for r in re.findall(r"\| ([0-9.]+) ex/s", text)]
  final = re.search(r"final: (.*)", text).group(1)
  values = dict(re.findall(r"(\w+) ([0-9.]+)", final))
  return dict(impl="bert-train",
              **{k: float(v) for k, v in values.items() if k != "loss"},
              loop_examples_per_second=rates,
              examples_per_second=statistics.mean(rates[1:3]),
              command=" ".join(command))


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--worker", choices=["fit"])
  parser.add_argument("--task", choices=["mrpc", "wnut17"], default="mrpc")
  parser.add_argument("--model", required=True)
  parser.add_argument("--data_dir", required=True)
  parser.add_argument("--out", default="runs/keras_fit")
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--seed", type=int, default=1)
  args = parser.parse_args()
  if args.worker == "fit":
    (fit_worker if args.task == "mrpc" else fit_worker_ner)(args)
    return
  print(json.dumps(dict(cpu=cpu())), flush=True)
  runs = {"fit": [], "bert-train": []}
  for repeat in range(args.repeats):
    for impl in ("fit", "bert-train"):
      result = (run_fit(args) if impl == "fit" else
                run_train(args, os.path.join(args.out, f"train{repeat}")))
      runs[impl].append(result)
      print(json.dumps(result), flush=True)
  rate = {k: statistics.median(r["examples_per_second"] for r in v)
          for k, v in runs.items()}
  print(json.dumps(dict(
      cpu=cpu(), fit_examples_per_second=rate["fit"],
      train_examples_per_second=rate["bert-train"],
      ratio_fit_over_train=rate["fit"] / rate["bert-train"],
      ratios_by_repeat=[f["examples_per_second"] / t["examples_per_second"]
                        for f, t in zip(runs["fit"], runs["bert-train"])],
      fit_metrics=[{k: r.get(k) for k in ("accuracy", "precision", "recall",
                                          "f1")} for r in runs["fit"]],
      train_metrics=[{k: r.get(k) for k in ("accuracy", "precision", "recall",
                                            "f1")} for r in runs["bert-train"]])))


if __name__ == "__main__":
  main()
