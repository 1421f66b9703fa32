"""`bench.serving` worker for ONNX Runtime and Hugging Face PyTorch, in the
bench-only venv (`bash bench/make_ort_venv.sh`); never imports `bert` or
TensorFlow. MODEL_DIR is a Hugging Face folder (`bench._hf_serving_export`).

  bench/.venv_ort/bin/python -m bench._ort_worker --serve --impl=IMPL
      (the `bench.serving` protocol on stdin/stdout)
  bench/.venv_ort/bin/python -m bench._ort_worker --impl=IMPL --task=sst2 \
      --model_dir=DIR [--limit=64] [--mode=throughput|latency|both]
      [--batch_size=32] [--latency_requests=100] [--repeats=3] [--predict]
      (standalone: one JSON line per timing round)

Implementations, all with 2 intra-op threads:
  torch_fp32  `AutoModelFor...` (default attention), eval + inference_mode
  torch_bf16  the same under torch.autocast("cpu", dtype=torch.bfloat16)
  ort_fp32    torch.onnx.export (TorchScript exporter, eager attention, opset
              17, dynamic batch and sequence axes), then
              `onnxruntime.transformers.optimizer.optimize_model(model_type=
              "bert")` fusion (embeddings + LayerNorm, attention, bias + GELU,
              skip + LayerNorm); a session with every graph optimization
  ort_int8    the fused model through `quantize_dynamic(per_channel=True,
              reduce_range=False, weight_type=QInt8)`
  ov_default  OpenVINO on the PyTorch model (`openvino.convert_model` with an
              example input; dynamic batch and sequence), at its default
              precision: bf16 where the CPU has AVX512_BF16 or AMX
  ov_int8     the same quantized by NNCF (`nncf.quantize`, the transformer
              preset: int8 weights and activations) on the task's first 300
              dev examples, then at OpenVINO's default precision
The export, fusion and quantization are made once per model (keyed by the
folder and its weights, under --cache_dir, file-locked so parallel workers
share them) and checked against PyTorch fp32 on real inputs.

End to end as Hugging Face users serve: the fast tokenizer, each batch
padded to its longest row; classification truncates at the run's seq_length
(128) and maps the argmax to id2label. SQuAD: questions cut to 64 pieces,
windows of 384 with a stride (overlap) of 128 (`return_overflowing_tokens`,
`return_offsets_mapping`), all windows of a batch's questions in one model
call, and the answer chosen over all windows: the top 20 starts and ends of
each window, both in the context, end >= start, at most 30 pieces, the start
token in the window where it has the most context (google-research's rule),
best start + end logit; the text cut from the context by the offsets.
"""

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import time

import numpy as np
import onnxruntime as ort
import transformers

from bench.serving import THREADS, Case, percentile, serve

IMPLS = ("ort_fp32", "ort_int8", "torch_fp32", "torch_bf16", "ov_default",
         "ov_int8")
# Examples NNCF calibrates the int8 activations on (the first of the dev set:
# favourable to OpenVINO, which sees the data it is scored on).
CALIBRATION_EXAMPLES = 300
HEADS = {"BertForSequenceClassification": ("AutoModelForSequenceClassification", ["logits"]),
         "BertForQuestionAnswering": ("AutoModelForQuestionAnswering",
                                      ["start_logits", "end_logits"])}
INPUTS = ["input_ids", "attention_mask", "token_type_ids"]
DEFAULT_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".serving", "onnx")
QUANTIZED_OPS = ("MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
                 "QAttention", "QEmbedLayerNormalization", "QGemm", "DynamicQuantizeLinear",
                 "DequantizeLinear", "QuantizeLinear", "ConvInteger", "QLinearMatMul")
FLOAT_OPS = ("MatMul", "Gemm", "Attention", "EmbedLayerNormalization", "Gather")


def _settings(model_dir):
  with open(os.path.join(model_dir, "config.json")) as f:
    config = json.load(f)
  export = {}
  path = os.path.join(model_dir, "bench_export.json")
  if os.path.exists(path):
    with open(path) as f:
      export = json.load(f)
  arch = config["architectures"][0]
  if arch not in HEADS:
    raise ValueError(f"{model_dir}: {arch} is not served here ({list(HEADS)})")
  qa = arch == "BertForQuestionAnswering"
  return dict(
      config=config, arch=arch, qa=qa,
      seq_length=export.get("seq_length") or (384 if qa else 128),
      doc_stride=export.get("doc_stride") or 128,
      max_query_length=export.get("max_query_length") or 64,
      max_answer_length=export.get("max_answer_length") or 30,
      n_best_size=export.get("n_best_size") or 20)


def _hf_model(model_dir, settings, **kwargs):
  cls = getattr(transformers, HEADS[settings["arch"]][0])
  return cls.from_pretrained(model_dir, **kwargs).eval()


# ------------------------------------------------------------------ runners
def torch_runner(model_dir, settings, bf16):
  import torch  # pylint: disable=g-import-not-at-top
  model = _hf_model(model_dir, settings)
  names = HEADS[settings["arch"]][1]

  def run(enc):
    feed = {k: torch.from_numpy(enc[k]) for k in INPUTS}
    with torch.inference_mode(), (torch.autocast("cpu", dtype=torch.bfloat16)
                                  if bf16 else contextlib.nullcontext()):
      out = model(**feed)
    return {k: out[k].float().numpy() for k in names}

  info = dict(attention=model.config._attn_implementation)  # pylint: disable=protected-access
  return run, info


def _file_size(path):
  return os.path.getsize(path) + sum(
      os.path.getsize(os.path.join(os.path.dirname(path), f))
      for f in os.listdir(os.path.dirname(path)) if f.startswith(
          os.path.basename(path) + ".data"))


def _cache_folder(model_dir, cache_dir):
  import importlib.metadata as md  # pylint: disable=g-import-not-at-top
  weights = os.path.join(model_dir, "model.safetensors")
  stat = os.stat(weights)
  with open(os.path.join(model_dir, "config.json"), "rb") as f:
    config = f.read()
  key = json.dumps([os.path.abspath(model_dir), stat.st_size, stat.st_mtime_ns,
                    hashlib.sha1(config).hexdigest()] +
                   [md.version(p) for p in ("torch", "onnx", "onnxruntime",
                                            "transformers")])
  name = os.path.basename(os.path.normpath(model_dir))
  parent = os.path.basename(os.path.dirname(os.path.abspath(model_dir)))
  return os.path.join(cache_dir, f"{parent}_{name}_{hashlib.sha1(key.encode()).hexdigest()[:12]}")


def _op_counts(path):
  import onnx  # pylint: disable=g-import-not-at-top
  counts = {}
  for node in onnx.load(path, load_external_data=False).graph.node:
    counts[node.op_type] = counts.get(node.op_type, 0) + 1
  return counts


def prepare_onnx(model_dir, settings, cache_dir):
  """(fused fp32 path, int8 path, prepare info), made once per model."""
  folder = _cache_folder(model_dir, cache_dir)
  os.makedirs(cache_dir, exist_ok=True)
  done = os.path.join(folder, "prepare.json")
  with open(folder + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.path.exists(done):
      _prepare(model_dir, settings, folder)
      _prune(folder)
    with open(done) as f:
      info = json.load(f)
  return (os.path.join(folder, "model_fused.onnx"),
          os.path.join(folder, "model_int8.onnx"), info)


def _prune(folder):
  """Removes the cache of earlier versions of the same model folder."""
  import shutil  # pylint: disable=g-import-not-at-top
  parent, name = os.path.split(folder)
  prefix = name[:name.rindex("_") + 1]
  for other in os.listdir(parent):
    path = os.path.join(parent, other)
    if (other.startswith(prefix) and other != name and os.path.isdir(path)
        and len(other) == len(name)):
      shutil.rmtree(path, ignore_errors=True)
      if os.path.exists(path + ".lock"):
        os.remove(path + ".lock")


def _prepare(model_dir, settings, folder):
  import shutil  # pylint: disable=g-import-not-at-top
  import onnx  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  from onnxruntime.quantization import QuantType, quantize_dynamic  # pylint: disable=g-import-not-at-top
  from onnxruntime.transformers import optimizer  # pylint: disable=g-import-not-at-top
  tmp = folder + ".tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  info = {}
  # Eager attention: the pattern ONNX Runtime's attention fusion recognises
  # (the SDPA path exports masks it does not fuse).
  model = _hf_model(model_dir, settings, attn_implementation="eager")
  tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
  sample = tokenizer(["a short one", "and a somewhat longer second sentence"],
                     padding=True, return_tensors="pt")
  names = HEADS[settings["arch"]][1]
  raw = os.path.join(tmp, "model.onnx")
  start = time.perf_counter()
  axes = {k: {0: "batch", 1: "sequence"} for k in INPUTS}
  axes.update({k: {0: "batch"} if k == "logits" else {0: "batch", 1: "sequence"}
               for k in names})
  torch.onnx.export(model, tuple(sample[k] for k in INPUTS), raw, dynamo=False,
                    input_names=INPUTS, output_names=names, dynamic_axes=axes,
                    opset_version=17, do_constant_folding=True)
  info["export_seconds"] = time.perf_counter() - start
  config = settings["config"]
  start = time.perf_counter()
  fused = optimizer.optimize_model(raw, model_type="bert",
                                   num_heads=config["num_attention_heads"],
                                   hidden_size=config["hidden_size"])
  info["fused_operators"] = {k: v for k, v in fused.get_fused_operator_statistics().items()
                             if v}
  fused_path = os.path.join(tmp, "model_fused.onnx")
  fused.save_model_to_file(fused_path)
  info["fuse_seconds"] = time.perf_counter() - start
  start = time.perf_counter()
  int8_path = os.path.join(tmp, "model_int8.onnx")
  # Shape inference cannot type the outputs of the fused contrib ops; they
  # are all float.
  quantize_dynamic(fused_path, int8_path, per_channel=True, reduce_range=False,
                   weight_type=QuantType.QInt8,
                   extra_options=dict(DefaultTensorType=onnx.TensorProto.FLOAT))
  info["quantize_seconds"] = time.perf_counter() - start
  fp32_ops, int8_ops = _op_counts(fused_path), _op_counts(int8_path)
  info["fp32_ops"] = fp32_ops
  info["int8_quantized_ops"] = {k: v for k, v in int8_ops.items() if k in QUANTIZED_OPS}
  info["int8_float_ops_left"] = {k: v for k, v in int8_ops.items() if k in FLOAT_OPS}
  info["bytes"] = dict(onnx_fp32=_file_size(fused_path), onnx_int8=_file_size(int8_path),
                       safetensors=os.path.getsize(os.path.join(model_dir, "model.safetensors")))
  os.remove(raw)
  for f in os.listdir(tmp):   # the exporter's external data, if any, of model.onnx
    if f.startswith("model.onnx"):
      os.remove(os.path.join(tmp, f))
  with open(os.path.join(tmp, "prepare.json"), "w") as f:
    json.dump(info, f, indent=1)
  shutil.rmtree(folder, ignore_errors=True)
  os.rename(tmp, folder)


def ort_runner(path, settings):
  options = ort.SessionOptions()
  options.intra_op_num_threads = THREADS
  options.inter_op_num_threads = 1
  options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
  options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
  session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
  names = HEADS[settings["arch"]][1]
  feeds = [i.name for i in session.get_inputs()]

  def run(enc):
    return dict(zip(names, session.run(names, {k: enc[k] for k in feeds})))

  return run


def openvino_runner(model_dir, settings, calibration):
  """OpenVINO on the PyTorch model; int8 (NNCF) when `calibration` (a list
  of tokenizer outputs) is given."""
  import openvino as ov  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  model = _hf_model(model_dir, settings)
  names = HEADS[settings["arch"]][1]
  example = {k: torch.from_numpy(v) for k, v in _example(settings).items()}
  with torch.no_grad():
    converted = ov.convert_model(model, example_input=example)
  info = {}
  if calibration is not None:
    import nncf  # pylint: disable=g-import-not-at-top
    start = time.perf_counter()
    converted = nncf.quantize(
        converted, nncf.Dataset(calibration, lambda enc: {k: enc[k] for k in INPUTS}),
        model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calibration))
    info.update(quantize_seconds=time.perf_counter() - start,
                calibration_batches=len(calibration))
  compiled = ov.Core().compile_model(converted, "CPU", {
      "INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY"})
  info["inference_precision"] = compiled.get_property(
      "INFERENCE_PRECISION_HINT").to_string()
  request = compiled.create_infer_request()
  inputs = [port.get_any_name() for port in compiled.inputs]
  outputs = list(compiled.outputs)[:len(names)]

  def run(enc):
    result = request.infer({k: enc[k] for k in inputs})
    return {name: np.array(result[port]) for name, port in zip(names, outputs)}

  return run, info


def _example(settings):
  """Two rows of ids for the conversion's trace (every shape stays dynamic)."""
  n = 16
  return dict(input_ids=np.full((2, n), 1000, np.int64),
              attention_mask=np.ones((2, n), np.int64),
              token_type_ids=np.zeros((2, n), np.int64))


def _calibration(tokenizer, settings, task):
  """The first CALIBRATION_EXAMPLES dev examples, tokenized one at a time as
  the task tokenizes (NNCF's transformer preset calibrates per row)."""
  from bench.serving import read_examples  # pylint: disable=g-import-not-at-top
  examples = read_examples(task, CALIBRATION_EXAMPLES)
  if settings["qa"]:
    return [dict(tokenizer([e["question"]], [e["context"]], truncation="only_second",
                           max_length=settings["seq_length"], return_tensors="np"))
            for e in examples]
  return [dict(tokenizer([e["text"]], [e["text_b"]] if "text_b" in e else None,
                         truncation=True, max_length=settings["seq_length"],
                         return_tensors="np"))
          for e in examples]


# ------------------------------------------------------------ tasks
def classifier_predict(run, tokenizer, settings):
  id2label = {int(k): v for k, v in settings["config"]["id2label"].items()}

  def predict(examples):
    texts = [e["text"] for e in examples]
    pairs = [e["text_b"] for e in examples] if "text_b" in examples[0] else None
    enc = tokenizer(texts, pairs, truncation=True, max_length=settings["seq_length"],
                    padding="longest", return_tensors="np")
    logits = run(enc)["logits"]
    return [id2label[int(i)] for i in logits.argmax(-1)]

  return predict


def _max_context(starts_per_window):
  """Per window, whether each context token has its most context there:
  google-research's score min(left, right) + 0.01 * window length, tokens
  identified across windows by their start character."""
  best = {}
  for w, starts in enumerate(starts_per_window):
    n = len(starts)
    for j, c in enumerate(starts):
      score = min(j, n - 1 - j) + 0.01 * n
      if c not in best or score > best[c][0]:
        best[c] = (score, w)
  return [np.array([best[c][1] == w for c in starts], bool)
          for w, starts in enumerate(starts_per_window)]


def squad_predict(run, tokenizer, settings):
  max_query, n_best = settings["max_query_length"], settings["n_best_size"]
  max_answer = settings["max_answer_length"]

  def predict(examples):
    questions = [e["question"].lstrip() for e in examples]
    contexts = [e["context"] for e in examples]
    # Questions longer than max_query_length pieces are cut there.
    q = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    for i, offsets in enumerate(q["offset_mapping"]):
      if len(offsets) > max_query:
        questions[i] = questions[i][:offsets[max_query - 1][1]]
    enc = tokenizer(questions, contexts, truncation="only_second",
                    max_length=settings["seq_length"], stride=settings["doc_stride"],
                    return_overflowing_tokens=True, return_offsets_mapping=True,
                    padding="longest", return_tensors="np")
    sample = enc.pop("overflow_to_sample_mapping")
    offsets = enc.pop("offset_mapping")                      # [f, s, 2]
    out = run(enc)
    start_logits, end_logits = out["start_logits"], out["end_logits"]
    # Context tokens: the second segment, without the closing [SEP] (0, 0).
    context = (enc["token_type_ids"] == 1) & (offsets[:, :, 1] > 0)
    windows = {}
    for f, i in enumerate(sample):
      windows.setdefault(int(i), []).append(f)
    answers = []
    for i in range(len(examples)):
      feats = windows.get(i, [])
      if len(feats) > 1:
        starts = [offsets[f, context[f], 0] for f in feats]
        max_ctx = _max_context([s.tolist() for s in starts])
      best, text = -np.inf, ""
      for k, f in enumerate(feats):
        ctx = context[f]
        if len(feats) > 1:
          is_max = np.zeros_like(ctx)
          is_max[np.nonzero(ctx)[0]] = max_ctx[k]
        else:
          is_max = ctx
        s_top = np.argsort(start_logits[f])[::-1][:n_best]
        e_top = np.argsort(end_logits[f])[::-1][:n_best]
        s_top = s_top[is_max[s_top]]
        e_top = e_top[ctx[e_top]]
        if not len(s_top) or not len(e_top):
          continue
        scores = start_logits[f][s_top][:, None] + end_logits[f][e_top][None, :]
        length = e_top[None, :] - s_top[:, None]
        scores = np.where((length >= 0) & (length < max_answer), scores, -np.inf)
        a, b = np.unravel_index(np.argmax(scores), scores.shape)
        if scores[a, b] > best:
          best = scores[a, b]
          text = contexts[i][offsets[f, s_top[a], 0]:offsets[f, e_top[b], 1]]
      answers.append(text)
    return answers

  return predict


# ------------------------------------------------------------ build
def build(spec, impl):
  model_dir = spec["model"]
  settings = _settings(model_dir)
  tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
  import importlib.metadata as md  # pylint: disable=g-import-not-at-top
  info = dict(versions={p: md.version(p) for p in ("onnxruntime", "torch",
                                                   "transformers", "tokenizers")})
  if impl.startswith("torch"):
    import torch  # pylint: disable=g-import-not-at-top
    torch.set_num_threads(THREADS)
    run, extra = torch_runner(model_dir, settings, bf16=impl == "torch_bf16")
    info.update(extra)
    if impl == "torch_bf16":
      info["parity"] = _parity(run, model_dir, settings, tokenizer, spec["task"])
  elif impl.startswith("ov"):
    calibration = (_calibration(tokenizer, settings, spec["task"])
                   if impl == "ov_int8" else None)
    run, extra = openvino_runner(model_dir, settings, calibration)
    info.update(extra)
    import importlib.metadata as md  # pylint: disable=g-import-not-at-top,reimported
    info["versions"].update({p: md.version(p) for p in ("openvino", "nncf")})
    info["parity"] = _parity(run, model_dir, settings, tokenizer, spec["task"])
  else:
    fused, int8, prepared = prepare_onnx(model_dir, settings,
                                         spec.get("cache_dir") or DEFAULT_CACHE)
    run = ort_runner(fused if impl == "ort_fp32" else int8, settings)
    info["prepare"] = prepared
    info["parity"] = _parity(run, model_dir, settings, tokenizer, spec["task"])
  make = squad_predict if settings["qa"] else classifier_predict
  return make(run, tokenizer, settings), info


def _parity(run, model_dir, settings, tokenizer, task):
  """Max abs difference of the outputs from PyTorch fp32's on the task's
  first 8 examples (fp32: must be tiny; int8: what quantization costs)."""
  import torch  # pylint: disable=g-import-not-at-top
  from bench.serving import read_examples  # pylint: disable=g-import-not-at-top
  examples = read_examples(task, 8)
  if settings["qa"]:
    enc = tokenizer([e["question"] for e in examples], [e["context"] for e in examples],
                    truncation="only_second", max_length=settings["seq_length"],
                    padding="longest", return_tensors="np")
  else:
    enc = tokenizer([e["text"] for e in examples],
                    [e["text_b"] for e in examples] if "text_b" in examples[0] else None,
                    truncation=True, max_length=settings["seq_length"],
                    padding="longest", return_tensors="np")
  reference, _ = torch_runner(model_dir, settings, bf16=False)
  torch.set_num_threads(THREADS)
  ours, ref = run(enc), reference(enc)
  mask = enc["attention_mask"].astype(bool)
  diff = 0.0
  for k in ref:
    a, b = (ours[k], ref[k]) if k == "logits" else (ours[k][mask], ref[k][mask])
    diff = max(diff, float(np.abs(a - b).max()))
  return dict(max_abs_diff_vs_torch_fp32=diff, rows=len(examples))


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--impl", required=True, choices=IMPLS)
  parser.add_argument("--serve", action="store_true")
  parser.add_argument("--task", choices=("sst2", "mrpc", "squad"))
  parser.add_argument("--model_dir")
  parser.add_argument("--limit", type=int, default=64)
  parser.add_argument("--mode", default="both", choices=("throughput", "latency", "both"))
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--latency_requests", type=int, default=100)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--predict", action="store_true")
  parser.add_argument("--cache_dir", default=DEFAULT_CACHE)
  args = parser.parse_args()
  if args.serve:
    serve(lambda spec: build(spec, args.impl))
    return
  if not (args.task and args.model_dir):
    parser.error("--task and --model_dir are required without --serve")
  spec = dict(task=args.task, model=args.model_dir, limit=args.limit,
              batch_size=args.batch_size, latency_requests=args.latency_requests,
              warmup=args.warmup, cache_dir=args.cache_dir)
  predict, info = build(spec, args.impl)
  case = Case(spec, predict, info)
  print(json.dumps(dict(impl=args.impl, task=args.task, info=info)), flush=True)
  modes = ("throughput", "latency") if args.mode == "both" else (args.mode,)
  for _ in range(args.repeats):
    for mode in modes:
      r = getattr(case, mode)()
      line = dict(impl=args.impl, task=args.task, mode=mode, seconds=r["seconds"],
                  examples=r["examples"])
      if mode == "latency":
        line.update(p50_ms=1e3 * percentile(r["latencies"], 50),
                    p99_ms=1e3 * percentile(r["latencies"], 99))
      print(json.dumps(line), flush=True)
  if args.predict:
    print(json.dumps(dict(impl=args.impl, task=args.task,
                          predictions=case.predict_all())), flush=True)


if __name__ == "__main__":
  main()
