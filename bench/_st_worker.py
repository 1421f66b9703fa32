"""sentence-transformers' side of `bench.embedding` and
`bench.embedding_finetune`: PyTorch (and ONNX Runtime) only, never
TensorFlow, in a process of its own so its thread pools are its own.

  python -m bench._st_worker --impl=IMPL      (commands on stdin, below)
  python -m bench._st_worker --finetune=SPEC.json --output=RESULT.json

Implementations (`--impl`), each `SentenceTransformer(folder, device="cpu")`
as its documentation runs it, `encode(normalize_embeddings=True)`:
  torch_fp32   the default backend
  torch_bf16   the same with bfloat16 weights (model_kwargs={"dtype":
               torch.bfloat16}), the vectors returned as float32
  torch_bf16_autocast  fp32 weights under torch.autocast("cpu", bfloat16)
  onnx_fp32    backend="onnx": Optimum's ONNX export, ONNX Runtime
  onnx_int8    the ONNX export through `export_dynamic_quantized_onnx_model`
               with the configuration the CPU calls for (avx512_vnni,
               avx512, avx2, arm64), loaded with backend="onnx"
torch runs `THREADS` intra-op threads (torch.set_num_threads), ONNX Runtime
sessions `THREADS` intra-op threads and one inter-op thread. The ONNX files
are written once under --work_dir (a copy of the model folder: the package's
own folder is never written to).

Commands (one JSON object per line; replies on the original stdout, logs on
stderr), texts and vectors passing through files:
  {"cmd": "load", "model": DIR, "work_dir": DIR}  -> {"info": {...}}
  {"cmd": "encode", "texts": JSON_FILE, "out": NPY_FILE or null,
   "batch_size": 32}  -> {"seconds": s, "n": n}   (normalised float32 [n, dim])
  {"cmd": "lengths", "texts": JSON_FILE}  -> {"lengths": [int, ...]}
      word pieces of each text with [CLS] and [SEP], untruncated
  {"cmd": "ir", "data": JSON_FILE, "batch_size": 32}  -> {"metrics": {...}}
      InformationRetrievalEvaluator on {"queries": {qid: text}, "corpus":
      {cid: text}, "relevant": {qid: [cid, ...]}}, its own scoring
  {"cmd": "train", "pairs": JSON_FILE, "batch_size": 32, "epochs": 2,
   "seed": 0}  -> {"epoch_seconds": [s, ...], "seconds": s, "rows": n}
      SentenceTransformerTrainer + MultipleNegativesRankingLoss on
      {"anchor": [...], "positive": [...]}, the trainer's defaults otherwise
  {"cmd": "quit"}
Errors: {"ok": false, "error": "..."}.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

from bench import _protocol

THREADS = 2
IMPLS = ("torch_fp32", "torch_bf16", "torch_bf16_autocast", "onnx_fp32",
         "onnx_int8")


def _read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def quantization_config():
  """The `export_dynamic_quantized_onnx_model` configuration for this CPU."""
  if platform.machine().lower() in ("aarch64", "arm64"):
    return "arm64"
  flags = set()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("flags"):
          flags = set(line.partition(":")[2].split())
          break
  except OSError:
    pass
  if "avx512_vnni" in flags:
    return "avx512_vnni"
  return "avx512" if "avx512f" in flags else "avx2"


def _session_options():
  import onnxruntime as ort  # pylint: disable=g-import-not-at-top
  options = ort.SessionOptions()
  options.intra_op_num_threads = THREADS
  options.inter_op_num_threads = 1
  return options


def _onnx_folder(model_dir, work_dir, impl):
  """A copy of the model folder with onnx/model.onnx (and, for int8, the
  quantized file); (folder, file name of the ONNX model to load)."""
  # pylint: disable=g-import-not-at-top
  from sentence_transformers import (SentenceTransformer,
                                     export_dynamic_quantized_onnx_model)
  folder = os.path.join(work_dir, "st_onnx")
  if not os.path.exists(os.path.join(folder, "onnx", "model.onnx")):
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(model_dir, folder)
    exported = SentenceTransformer(folder, device="cpu", backend="onnx")
    exported.save_pretrained(folder)
  if impl == "onnx_fp32":
    return folder, "onnx/model.onnx"
  config = quantization_config()
  name = f"onnx/model_qint8_{config}.onnx"
  if not os.path.exists(os.path.join(folder, name)):
    model = SentenceTransformer(folder, device="cpu", backend="onnx",
                                model_kwargs={"file_name": "onnx/model.onnx"})
    export_dynamic_quantized_onnx_model(model, config, folder)
  return folder, name


class Model:
  """One implementation's model and its `encode`."""

  def __init__(self, impl, model_dir, work_dir):
    from sentence_transformers import SentenceTransformer  # pylint: disable=g-import-not-at-top
    import sentence_transformers  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
    self.impl = impl
    self.info = dict(impl=impl, threads=THREADS, versions={
        "sentence-transformers": sentence_transformers.__version__,
        "torch": torch.__version__, "transformers": transformers.__version__})
    if impl.startswith("onnx"):
      import onnxruntime  # pylint: disable=g-import-not-at-top
      folder, name = _onnx_folder(model_dir, work_dir, impl)
      self.model = SentenceTransformer(
          folder, device="cpu", backend="onnx",
          model_kwargs={"file_name": name, "provider": "CPUExecutionProvider",
                        "session_options": _session_options()})
      self.info.update(onnx_file=name, bytes=os.path.getsize(
          os.path.join(folder, name)))
      self.info["versions"]["onnxruntime"] = onnxruntime.__version__
      if impl == "onnx_int8":
        self.info["quantization_config"] = quantization_config()
    else:
      # bf16 weights as its documentation loads them (model_kwargs dtype).
      kwargs = ({"model_kwargs": {"dtype": torch.bfloat16}}
                if impl == "torch_bf16" else {})
      self.model = SentenceTransformer(model_dir, device="cpu", **kwargs)
    self.model.eval()
    self.info["max_seq_length"] = self.model.max_seq_length

  def encode(self, texts, batch_size=32):
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16)
                if self.impl == "torch_bf16_autocast" else _nothing())
    with autocast:
      out = self.model.encode(texts, batch_size=batch_size,
                              normalize_embeddings=True,
                              show_progress_bar=False)
    return np.asarray(out, np.float32)


class _nothing:
  def __enter__(self):
    return self

  def __exit__(self, *args):
    return False


def untruncated_lengths(model, texts):
  """Word pieces of each text with its special tokens, not truncated."""
  tokenizer = model.model.tokenizer
  ids = tokenizer(list(texts), add_special_tokens=True, truncation=False,
                  verbose=False)["input_ids"]
  return [len(row) for row in ids]


def information_retrieval(model, data, batch_size=32):
  """sentence-transformers' InformationRetrievalEvaluator, its own scoring
  (the model's similarity, cosine), on the data's queries and corpus."""
  # pylint: disable=g-import-not-at-top
  from sentence_transformers.sentence_transformer.evaluation import (
      InformationRetrievalEvaluator)
  evaluator = InformationRetrievalEvaluator(
      queries=data["queries"], corpus=data["corpus"],
      relevant_docs={q: set(c) for q, c in data["relevant"].items()},
      accuracy_at_k=[1, 5, 10], precision_recall_at_k=[1, 5, 10],
      mrr_at_k=[10], ndcg_at_k=[10], map_at_k=[100], batch_size=batch_size,
      write_csv=False, show_progress_bar=False)
  start = time.perf_counter()
  metrics = evaluator(model.model)
  return dict(metrics={k: float(v) for k, v in metrics.items()},
              seconds=time.perf_counter() - start)


def _trainer(model, anchors, positives, batch_size, epochs, seed, output_dir,
             callbacks=(), learning_rate=5e-5, warmup_ratio=0.0,
             max_steps=-1):
  """SentenceTransformerTrainer with MultipleNegativesRankingLoss (scale 20,
  cosine) on (anchor, positive) pairs; the trainer's defaults (AdamW, lr
  5e-5, no weight decay, linear decay, clipping 1.0, random batches)
  except what the arguments set; no checkpoints, logs or evaluation."""
  # pylint: disable=g-import-not-at-top
  import datasets
  from sentence_transformers import (SentenceTransformerTrainer,
                                     SentenceTransformerTrainingArguments)
  from sentence_transformers.sentence_transformer.losses import (
      MultipleNegativesRankingLoss)
  args = SentenceTransformerTrainingArguments(
      output_dir=output_dir, num_train_epochs=epochs, max_steps=max_steps,
      per_device_train_batch_size=batch_size, learning_rate=learning_rate,
      warmup_steps=warmup_ratio, seed=seed, data_seed=seed,
      save_strategy="no", report_to="none", logging_strategy="no",
      eval_strategy="no", disable_tqdm=True, use_cpu=True,
      dataloader_num_workers=0)
  train = datasets.Dataset.from_dict(
      {"anchor": list(anchors), "positive": list(positives)})
  return SentenceTransformerTrainer(
      model=model, args=args, train_dataset=train,
      loss=MultipleNegativesRankingLoss(model), callbacks=list(callbacks))


def train_speed(model, pairs, batch_size=32, epochs=2, seed=0):
  """Wall seconds of each epoch of the trainer on `pairs` (the first one
  warms up), and of the whole `train()` call."""
  import transformers  # pylint: disable=g-import-not-at-top

  class EpochTimer(transformers.TrainerCallback):

    def __init__(self):
      self.seconds, self._start = [], None

    def on_epoch_begin(self, args, state, control, **kwargs):
      self._start = time.perf_counter()

    def on_epoch_end(self, args, state, control, **kwargs):
      self.seconds.append(time.perf_counter() - self._start)

  timer = EpochTimer()
  with tempfile.TemporaryDirectory() as tmp:
    trainer = _trainer(model.model, pairs["anchor"], pairs["positive"],
                       batch_size, epochs, seed, tmp, [timer])
    start = time.perf_counter()
    out = trainer.train()
    seconds = time.perf_counter() - start
  model.model.eval()
  return dict(epoch_seconds=timer.seconds, seconds=seconds,
              rows=len(pairs["anchor"]), steps=int(out.global_step))


def serve(impl):
  out = _protocol.reply_channel()
  model = None
  for line in sys.stdin:
    msg = json.loads(line)
    try:
      cmd = msg["cmd"]
      if cmd == "quit":
        break
      start = time.perf_counter()
      if cmd == "load":
        model = Model(impl, msg["model"], msg["work_dir"])
        reply = dict(info=model.info)
      elif cmd == "encode":
        texts = _read_json(msg["texts"])
        start = time.perf_counter()
        vectors = model.encode(texts, msg.get("batch_size", 32))
        reply = dict(n=len(vectors))
        if msg.get("out"):
          np.save(msg["out"], vectors.astype(np.float32), allow_pickle=False)
      elif cmd == "lengths":
        reply = dict(lengths=untruncated_lengths(model, _read_json(msg["texts"])))
      elif cmd == "ir":
        reply = information_retrieval(model, _read_json(msg["data"]),
                                      msg.get("batch_size", 32))
      elif cmd == "train":
        reply = train_speed(model, _read_json(msg["pairs"]),
                            msg.get("batch_size", 32), msg.get("epochs", 2),
                            msg.get("seed", 0))
      else:
        raise ValueError(f"unknown command {cmd!r}")
      reply.setdefault("seconds", time.perf_counter() - start)
      reply["ok"] = True
    except Exception as e:  # pylint: disable=broad-except
      traceback.print_exc()
      reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    out.write(json.dumps(reply) + "\n")


def finetune(spec):
  """One fine-tuning run of `bench.embedding_finetune` (spec: model,
  train/test data files, batch_size, epochs, max_steps, learning_rate,
  warmup_ratio, seed): the test half's retrieval before (zero_shot) or
  after training."""
  import transformers  # pylint: disable=g-import-not-at-top
  transformers.set_seed(spec["seed"])
  model = Model("torch_fp32", spec["model"], None)
  result = dict(impl="sentence-transformers", seed=spec["seed"],
                versions=model.info["versions"])
  if not spec.get("zero_shot"):
    train = _read_json(spec["train"])
    with tempfile.TemporaryDirectory() as tmp:
      trainer = _trainer(model.model, train["anchor"], train["positive"],
                         spec["batch_size"], spec["epochs"], spec["seed"], tmp,
                         learning_rate=spec["learning_rate"],
                         warmup_ratio=spec["warmup_ratio"],
                         max_steps=spec.get("max_steps") or -1)
      start = time.perf_counter()
      out = trainer.train()
      result.update(train_seconds=time.perf_counter() - start,
                    steps=int(out.global_step),
                    train_loss=float(out.training_loss))
    model.model.eval()
  ir = information_retrieval(model, _read_json(spec["test"]),
                             spec["batch_size"])
  result["metrics"] = {k.rpartition("cosine_")[2]: v
                       for k, v in ir["metrics"].items()}
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--impl", choices=IMPLS, default="torch_fp32")
  parser.add_argument("--finetune", help="a run's spec (JSON file)")
  parser.add_argument("--output", help="--finetune: the result's JSON file")
  args = parser.parse_args()
  torch.set_num_threads(THREADS)
  if args.finetune:
    result = finetune(_read_json(args.finetune))
    with open(args.output, "w", encoding="utf-8") as f:
      json.dump(result, f)
    return
  serve(args.impl)


if __name__ == "__main__":
  main()
