"""Memory a process keeps after each `fit` of a new model: MiniLM
(all-MiniLM-L6-v2, fp32) built, compiled and fitted on 16 pairs, then
deleted and garbage-collected, `--fits` times in one process; one fresh
process per variant. The custom loop's variant trains the same classifier
from a TSV file of those pairs (`run_experiment`, the path `bert-train`
runs) for 2 steps, into a new folder each time.

  python -m bench.fit_memory [--fits 4] [--variant V ...] [--output F]

Variants: the library's recipe (`compile()`: AdamW, XLA at fp32), the
recipe without XLA, a legacy SGD optimizer, the recipe run eagerly
(`run_eagerly=True`: no traced train step), and the custom loop. The two
load variants save the same classifier once (`model.save`, or the TF Hub
export of its encoder), then load it (`tf_keras.models.load_model`, or
`tf.saved_model.load`), run it on the pairs and drop it, `--fits` times:
what a server that reloads its model keeps per load. "kept per fit" (or per
load) is the resident set's growth from the second fit to the last, over
the fits between (the first fits also fill caches and the allocator's
pools): what a notebook or a sweep that fits one model after another loses
each time.
"""

import argparse
import json
import os
import subprocess
import sys

from bench import _protocol as P

VARIANTS = {
    "recipe (AdamW, XLA)": {},
    "recipe without XLA": {"jit_compile": False},
    "legacy SGD, no XLA": {"jit_compile": False, "sgd": True},
    "recipe, run eagerly": {"run_eagerly": True},
    "custom loop (run_experiment)": {"custom_loop": True},
    "load_model (a model.save SavedModel)": {"load": "keras"},
    "tf.saved_model.load (the TF Hub export)": {"load": "hub"},
}


def _rss_mb() -> float:
  with open("/proc/self/status", encoding="ascii") as f:
    for line in f:
      if line.startswith("VmRSS"):
        return int(line.split()[1]) / 1024
  raise RuntimeError("no VmRSS in /proc/self/status")


def _worker(variant: str, fits: int) -> None:
  """Prints one JSON line: the resident set (MB) after each fit."""
  import gc  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  options = dict(VARIANTS[variant])
  sgd = options.pop("sgd", False)
  a = ["a good film about a man and his dog", "the cat sat on the mat"] * 8
  b = ["a fine film", "a dog barked at the moon all night"] * 8
  y = np.array([1, 0] * 8)
  after = []
  if options.pop("custom_loop", False):
    return _custom_loop_worker(a, b, y, fits)
  if "load" in options:
    return _load_worker(options["load"], a, b, fits)
  for _ in range(fits):
    model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2,
                                           precision="fp32")
    if sgd:
      options["optimizer"] = tf_keras.optimizers.legacy.SGD()
    model.compile(**options)
    model.fit((a, b), y, batch_size=8, epochs=1, verbose=0)
    del model
    gc.collect()
    after.append(_rss_mb())
  print(json.dumps(after))


def _custom_loop_worker(a, b, y, fits: int) -> None:
  """The `_worker` of the custom loop: `run_experiment` of a classification
  task on the same pairs, written to a TSV file."""
  import gc  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  from bert.tasks import ClassificationTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import (ClassificationData, EncoderSource,  # pylint: disable=g-import-not-at-top
                                  FinetuningInputs)
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  from bert.training import RuntimeConfig, run_experiment  # pylint: disable=g-import-not-at-top
  after = []
  with tempfile.TemporaryDirectory() as folder:
    data = os.path.join(folder, "train.tsv")
    with open(data, "w", encoding="utf-8") as f:
      f.write("a\tb\tlabel\n")
      f.writelines(f"{s}\t{t}\t{label}\n" for s, t, label in zip(a, b, y))
    for i in range(fits):
      task = ClassificationTask(
          data=ClassificationData(train_file=data, text_a_column="a",
                                  text_b_column="b", label_column="label",
                                  labels=("0", "1")),
          encoder=EncoderSource(init_checkpoint=minilm_dir()),
          inputs=FinetuningInputs(seq_length=32, global_batch_size=8))
      run_experiment(task, os.path.join(folder, f"run{i}"), "train",
                     RuntimeConfig(train_steps=2, steps_per_loop=2,
                                   mixed_precision="fp32"), log_fn=None)
      del task
      gc.collect()
      after.append(_rss_mb())
  print(json.dumps(after))


def _load_worker(kind: str, a, b, fits: int) -> None:
  """The `_worker` of the load variants: one save, then `fits` loads."""
  import gc  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from bert import export  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  model = BertClassifier.from_pretrained(minilm_dir(), num_classes=2,
                                         precision="fp32", seq_length=32)
  inputs = model.preprocessor.model_inputs(model.preprocessor.encode((a, b)))
  after = []
  with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "saved")
    if kind == "keras":
      model.save(path)
    else:
      export.export_encoder(model.encoder, path)
    del model
    gc.collect()
    for _ in range(fits):
      if kind == "keras":
        loaded = tf_keras.models.load_model(path, compile=False)
        loaded.predict((a, b), verbose=0)
      else:
        loaded = tf.saved_model.load(path)
        loaded(inputs, training=False)
      del loaded
      tf_keras.backend.clear_session()
      gc.collect()
      after.append(_rss_mb())
  print(json.dumps(after))


def main():
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--fits", type=int, default=5)
  parser.add_argument("--output", default=None)
  parser.add_argument("--variant", action="append", default=None,
                      help="a variant to run, repeatable (default: all)")
  parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.fits < 3:
    parser.error("--fits: at least 3 (the growth is taken from the second)")
  if args.worker is not None:
    if args.worker not in VARIANTS:
      parser.error(f"--worker: one of {sorted(VARIANTS)}")
    return _worker(args.worker, args.fits)
  from bert import hardware as cpu  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  chosen = args.variant or list(VARIANTS)
  unknown = [v for v in chosen if v not in VARIANTS]
  if unknown:
    parser.error(f"--variant: unknown {unknown}; one of {sorted(VARIANTS)}")
  rows = []
  for variant in chosen:
    out = subprocess.run(
        [sys.executable, "-m", "bench.fit_memory", "--worker", variant,
         "--fits", str(args.fits)],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    after = json.loads(out.stdout.strip().splitlines()[-1])
    kept = (after[-1] - after[1]) / (len(after) - 2)
    rows.append(f"| {variant} | {' / '.join(f'{m:.0f}' for m in after)} "
                f"| {kept:.0f} |")
  report = "\n".join([
      f"Machine: {cpu.describe()}. TensorFlow {tf.__version__}; MiniLM "
      f"(22.7M parameters, 91 MB in fp32), {args.fits} fits per process.",
      "",
      "| variant | resident set after each fit (or load), MB | kept per fit "
      "(or load), MB |",
      "| --- | --- | --- |",
      *rows, ""])
  P.publish(report, args.output)


if __name__ == "__main__":
  sys.exit(main())
