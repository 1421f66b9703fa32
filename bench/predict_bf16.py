"""Keras `predict` and `encode` of a bf16 model: the Keras forward against
the frozen bf16 network they switch to (`bert.serving.frozen.
InferenceForward`), on real text, in one process, interleaved.

  python -m bench.predict_bf16 [--models minilm,bert_base] [--repeats 5]
      [--texts 872] [--cold_calls 3] [--output bench/X.md]

Models, bf16 (`mixed_bfloat16`), head "classifier" (`predict` on SST-2 dev
sentences: labels and probabilities) and "embedder" (`encode` of SQuAD dev
paragraphs, longer rows):
  minilm: all-MiniLM-L6-v2's real weights (`from_pretrained`);
  bert_base: BERT-Base's shape with random weights (biases and LayerNorm
    offsets made non-zero, as trained ones are: zeros make oneDNN's kernels
    faster than they are on real weights) and MiniLM's preprocessor (the
    bert-base-uncased vocabulary).
Per model and head:
  cold: the first --cold_calls calls of a fresh model, each over all the
    texts, default rule (the Keras forward, timed, until a quarter of its
    time adds up to the estimated cost of freezing; then the frozen
    network), against a model that never freezes: seconds per call and in
    all, and how often the rule froze.
  warm: --repeats rounds, each one full pass of both, the order alternating:
    "keras" (never freezes) and "frozen" (the default, after its network is
    frozen); texts/s, median (min-max), and the ratio frozen / keras per
    round.
Two intra-op threads, as `bench.run`. Prints the CPU's model and flags.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from bench import _protocol as P  # pylint: disable=g-import-not-at-top,wrong-import-position
from bench.serving import cpu_info, read_examples  # pylint: disable=g-import-not-at-top,wrong-import-position

HEADS = ("classifier", "embedder")


def _texts(head, n):
  if head == "classifier":
    return [row["text"] for row in read_examples("sst2", n)]
  import json  # pylint: disable=g-import-not-at-top
  from bert.testing import shared_data  # pylint: disable=g-import-not-at-top
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    paragraphs = [p["context"] for a in json.load(f)["data"]
                  for p in a["paragraphs"]]
  return paragraphs[:n]


def _build(model_name, head):
  """A fresh bf16 model of `model_name` with `head`."""
  import bert  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier, BertTextEmbedder  # pylint: disable=g-import-not-at-top
  from bert.precision import policy_scope  # pylint: disable=g-import-not-at-top
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  cls = BertClassifier if head == "classifier" else BertTextEmbedder
  args = dict(num_classes=2) if head == "classifier" else {}
  minilm = cls.from_pretrained(minilm_dir(), precision="bf16", **args)
  if model_name == "minilm":
    return minilm
  s = P.SHAPES[model_name]
  config = bert.BertConfig(
      vocab_size=P.VOCAB, hidden_size=s["hidden"],
      num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
      intermediate_size=s["intermediate"],
      max_position_embeddings=P.MAX_POSITIONS, type_vocab_size=P.TYPE_VOCAB)
  with policy_scope("bf16"):
    encoder = bert.BertEncoder(config)
    model = cls(encoder, **args) if head == "classifier" else cls(encoder)
  rng = np.random.default_rng(0)
  model.set_weights([w + rng.normal(0, 0.02, w.shape).astype(w.dtype)
                     if w.ndim == 1 else w for w in model.get_weights()])
  model.attach_preprocessor(minilm.preprocessor)
  return model


def _method(head):
  return "inference_outputs" if head == "classifier" else "inference_embeddings"


def _run(model, head, texts):
  if head == "classifier":
    return model.predict(texts, batch_size=32)["probabilities"]
  return model.encode(texts, batch_size=32, show_progress=False)


def _forward(model, head):
  from bert.serving import frozen  # pylint: disable=g-import-not-at-top
  return frozen.InferenceForward.of(model, _method(head))


def _never_freezes(model, head):
  """`model`, its inference forward set never to freeze."""
  _forward(model, head).freeze_seconds = float("inf")
  return model


def bench_one(model_name, head, n, repeats, cold_calls):
  texts = _texts(head, n)
  lines = []
  # What a process pays once (TensorFlow's start, the tokenizer's traces),
  # on a throwaway model, so neither cold call below pays it.
  _run(_never_freezes(_build(model_name, head), head), head, texts[:8])
  # Cold: the first calls of fresh models of the same weights, interleaved
  # (the order alternating).
  models, weights = {}, None
  for name in ("keras", "default"):
    models[name] = _build(model_name, head)
    weights = weights or models[name].get_weights()
    models[name].set_weights(weights)
  _never_freezes(models["keras"], head)
  cold = {"keras": [], "default": []}
  for i in range(cold_calls):
    for name in (("keras", "default") if i % 2 == 0 else ("default", "keras")):
      start = time.perf_counter()
      _run(models[name], head, texts)
      cold[name].append(time.perf_counter() - start)
  forward = _forward(models["default"], head)
  per_call = lambda name: " + ".join(f"{t:.1f}" for t in cold[name])
  lines.append(
      f"| {model_name} | {head} | {len(texts)} | {cold_calls} first calls, s "
      f"| default {per_call('default')} = {sum(cold['default']):.1f} (froze "
      f"{forward.freezes}x; batches keras {forward.batches['keras']}, frozen "
      f"{forward.batches['frozen']}; estimated cost of freezing "
      f"{forward.freeze_seconds:.1f} s); never frozen {per_call('keras')} = "
      f"{sum(cold['keras']):.1f} | "
      f"{sum(cold['keras']) / sum(cold['default']):.2f}x |")
  del cold, forward, models
  # Warm: the default model frozen, against one that never freezes.
  frozen_model = _build(model_name, head)
  frozen_model.set_weights(weights)
  _run(frozen_model, head, texts[:1])
  fwd = _forward(frozen_model, head)
  fwd.freeze_seconds = 0.0
  _run(frozen_model, head, texts)
  keras_model = _never_freezes(_build(model_name, head), head)
  keras_model.set_weights(weights)
  reference = _run(keras_model, head, texts)
  got = _run(frozen_model, head, texts)
  assert fwd.freezes == 1, fwd.freezes
  diff = float(np.abs(got - reference).max())
  times = {"keras": [], "frozen": []}
  models = {"keras": keras_model, "frozen": frozen_model}
  for r in range(repeats):
    order = ("keras", "frozen") if r % 2 == 0 else ("frozen", "keras")
    for name in order:
      start = time.perf_counter()
      _run(models[name], head, texts)
      times[name].append(len(texts) / (time.perf_counter() - start))
  ratios = [f / k for f, k in zip(times["frozen"], times["keras"])]
  lines.append(
      f"| {model_name} | {head} | {len(texts)} | warm, texts/s | keras "
      f"{P.spread(times['keras'], 1)}, frozen {P.spread(times['frozen'], 1)}"
      f"; max abs diff {diff:.1e} | {P.spread(ratios)} "
      f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)}) |")
  assert fwd.freezes == 1, "the warm rounds froze again"
  return lines


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--models", default="minilm,bert_base")
  parser.add_argument("--heads", default="classifier,embedder")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--texts", type=int, default=872)
  parser.add_argument("--cold_calls", type=int, default=3)
  parser.add_argument("--output", default="")
  args = parser.parse_args()
  tf.config.threading.set_intra_op_parallelism_threads(P.THREADS)
  cpu = cpu_info()
  flags = ", ".join(f for f, on in sorted(cpu["flags"].items()) if on)
  lines = [f"CPU: {cpu['model']}, {cpu['cpus']} CPUs; flags: {flags}", "",
           "| model | head | texts | measure | figures | frozen / keras |",
           "|---|---|---|---|---|---|"]
  for model_name in args.models.split(","):
    for head in args.heads.split(","):
      lines += bench_one(model_name, head, args.texts, args.repeats,
                         args.cold_calls)
      print("\n".join(lines[-2:]), flush=True)
  P.publish("\n".join(lines) + "\n", args.output)


if __name__ == "__main__":
  main()
