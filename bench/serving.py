"""Serving speed end to end: raw strings -> predictions (tokenization and
post-processing included), our exported serving models against ONNX Runtime
(fp32 and int8) and Hugging Face PyTorch (fp32 and bf16 autocast), on the
same fine-tuned weights.

  python -m bench.serving [--tasks sst2,mrpc,squad] [--impls ...]
      [--model_dirs sst2=DIR,mrpc=DIR,squad=DIR] [--limit 0] [--repeats 5]

Tasks: SST-2 dev sentences, MRPC dev pairs, SQuAD 1.1 dev questions with
their contexts (the articles the run held out of training, `SquadData.
train_fraction` and `FinetuningInputs.seed` of its operative_config.gin).
Each task's `bert-train` model_dir is exported into --work_dir (again
whenever its newest checkpoint changes): our serving SavedModels
(`bert-export`, one per precision asked for) and a Hugging Face folder
(`bench._hf_serving_export`, which checks its logits against ours before
writing).

Implementations, each in a worker process of its own with 2 intra-op
threads, each loaded once (ONNX Runtime and PyTorch in the bench-only venv
made by `bash bench/make_ort_venv.sh`, never a dependency of the library):
  ours        our fp32 serving export through `bert.export.load_serving`
              (`bench._ours_serving_worker`)
  ours_bf16, ours_int8   the same from `bert-export --precision=bf16|int8`
  ours_default   `bert-export` with neither --precision nor --runtime: the
              default (auto: the fastest gated export on this machine)
  ours_ov_fp32, ours_ov_bf16, ours_ov_int8   `bert-export --runtime=openvino
              --precision=..`
  ort_fp32    torch.onnx.export + ONNX Runtime's BERT fusion
  ort_int8    the fused model, dynamically quantized (int8 weights, per channel)
  torch_fp32  transformers in PyTorch, eval + inference_mode
  torch_bf16  the same under torch.autocast("cpu", dtype=torch.bfloat16)
  ov_default  OpenVINO on the same model at its default precision (bf16 where
              the CPU has AVX512_BF16 or AMX)
  ov_int8     the same quantized by NNCF (int8 weights and activations)
The Hugging Face side tokenizes with the fast tokenizer, pads each batch to
its longest row, and for SQuAD runs every window (seq 384, windows
overlapping by 128 pieces as HF's `stride`, question <= 64 pieces) and picks the answer over all of them (n-best 20,
answers <= 30 pieces, the max-context rule).

Measured per task, in rounds: throughput (every example once, batches of
--batch_size, examples/s) and latency (the first --latency_requests examples
one at a time: p50 and p99 ms). Every round visits every implementation
(the order rotating each round), one worker computing at a time; medians
over rounds with their spread (min-max) and the ratios of the medians
against ORT int8 and against ours (fp32), all from the same run. Before each
round the orchestrator samples the other processes' CPU use (a busy machine
is reported and warned about; `--omp_wait_policy=PASSIVE` keeps PyTorch's
OpenMP threads from collapsing when a core is taken). Predictions come
back once, outside the timing: accuracy (SST-2, MRPC; MRPC also F1), SQuAD
EM/F1 by the official rules, and the agreement with ours.

Protocol (one JSON object per line; replies on the worker's original
stdout, framework logs on stderr; `serve(build)` below runs the loop):
  {"cmd": "build", "key": K, "spec": {"task", "model", "limit",
      "squad_titles", "batch_size", "latency_requests", "warmup", "cache_dir"}}
      -> {"ok": true, "seconds": s, "examples": n, "info": {...}}
      reads the task's examples (`read_examples`), loads or prepares the model
      at spec["model"] once (`build(spec)` -> (predict, info)), then runs
      `warmup` untimed full passes of both modes.
  {"cmd": "time", "key": K, "mode": "throughput"}
      -> {"ok": true, "seconds": s, "examples": n}
  {"cmd": "time", "key": K, "mode": "latency"}
      -> {"ok": true, "seconds": s, "examples": m, "latencies": [s, ...]}
  {"cmd": "predict", "key": K} -> {"ok": true, "predictions": [str, ...]}
  {"cmd": "quit"}
  errors: {"ok": false, "error": "..."}.
`predict(examples)` takes a list of example dicts (sst2: text; mrpc: text,
text_b; squad: id, question, context) and returns one string per example:
the label name (as in the data's label column) or the answer text.

This module imports nothing but the standard library at its top, so the
workers of either venv import `serve` and `read_examples` from it.
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
import traceback
from bench import _protocol

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ORT_VENV = os.path.join(HERE, ".venv_ort")
THREADS = 2
TASKS = ("sst2", "mrpc", "squad")
# Implementation -> worker argv after the venv's python.
IMPLS = {
    "ours": ["-m", "bench._ours_serving_worker"],
    "ours_bf16": ["-m", "bench._ours_serving_worker"],
    "ours_int8": ["-m", "bench._ours_serving_worker"],
    "ours_default": ["-m", "bench._ours_serving_worker"],
    "ours_ov_fp32": ["-m", "bench._ours_serving_worker"],
    "ours_ov_bf16": ["-m", "bench._ours_serving_worker"],
    "ours_ov_int8": ["-m", "bench._ours_serving_worker"],
    "ort_fp32": ["-m", "bench._ort_worker", "--serve", "--impl=ort_fp32"],
    "ort_int8": ["-m", "bench._ort_worker", "--serve", "--impl=ort_int8"],
    "torch_fp32": ["-m", "bench._ort_worker", "--serve", "--impl=torch_fp32"],
    "torch_bf16": ["-m", "bench._ort_worker", "--serve", "--impl=torch_bf16"],
    "ov_default": ["-m", "bench._ort_worker", "--serve", "--impl=ov_default"],
    "ov_int8": ["-m", "bench._ort_worker", "--serve", "--impl=ov_int8"],
}
KIND = {"sst2": "classifier", "mrpc": "classifier", "squad": "span_labeler"}
DEFAULT_IMPLS = ("ours", "ours_int8", "ort_fp32", "ort_int8", "torch_fp32", "torch_bf16")


def precision(impl):
  """The export of one of our implementations: its `bert-export
  --precision`, after "ov_" for `--runtime=openvino`."""
  return impl.partition("_")[2] or "fp32"

CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni",
             "amx_tile", "amx_bf16", "amx_int8")


# ------------------------------------------------- shared with the workers
def shared_data_dir():
  """As `bert.testing.shared_data_dir`: $BERT_SHARED_DATA, else ../shared/data
  beside the repository."""
  return os.environ.get("BERT_SHARED_DATA",
                        os.path.join(ROOT, "..", "shared", "data"))


def _tsv(path, encoding="utf-8"):
  # GLUE files: no quoting ('"' is an ordinary character), header first.
  with open(path, encoding=encoding) as f:
    return [line.rstrip("\n").split("\t") for line in f][1:]


def read_examples(task, limit=0, squad_titles=None):
  """The task's dev examples in file order (the first `limit`; 0 = all):
  sst2 {text, label}, mrpc {text, text_b, label}, squad {id, question,
  context, answers} (only the articles in `squad_titles` when given)."""
  data = shared_data_dir()
  if task == "sst2":
    rows = _tsv(os.path.join(data, "glue", "SST-2", "dev.tsv"))
    out = [dict(text=r[0], label=r[1]) for r in rows]
  elif task == "mrpc":
    rows = _tsv(os.path.join(data, "glue", "MRPC", "dev.tsv"), "utf-8-sig")
    out = [dict(text=r[3], text_b=r[4], label=r[0]) for r in rows]
  elif task == "squad":
    with open(os.path.join(data, "squad", "dev-v1.1.json"), encoding="utf-8") as f:
      articles = json.load(f)["data"]
    keep = set(squad_titles) if squad_titles is not None else None
    out = [dict(id=qa["id"], question=qa["question"], context=p["context"],
                answers=[a["text"] for a in qa["answers"]])
           for a in articles if keep is None or a.get("title", "") in keep
           for p in a["paragraphs"] for qa in p["qas"]]
  else:
    raise ValueError(f"unknown task {task!r}; choose from {TASKS}")
  return out[:limit] if limit else out


class Case:
  """One task on one implementation: its examples and predict function."""

  def __init__(self, spec, predict, info):
    self.examples = read_examples(spec["task"], spec.get("limit", 0),
                                  spec.get("squad_titles"))
    self.predict = predict
    self.info = info
    self.batch_size = int(spec.get("batch_size", 32))
    self.latency_requests = min(int(spec.get("latency_requests", 100)),
                                len(self.examples))
    # Full passes of both modes: every shape the timed rounds meet has been
    # seen once (runtimes that build kernels per shape, e.g. oneDNN, do so
    # here, not in the first timed round).
    for _ in range(int(spec.get("warmup", 1))):
      self.throughput()
      self.latency()

  def throughput(self):
    start = time.perf_counter()
    for i in range(0, len(self.examples), self.batch_size):
      self.predict(self.examples[i:i + self.batch_size])
    return dict(seconds=time.perf_counter() - start, examples=len(self.examples))

  def latency(self):
    latencies = []
    start = time.perf_counter()
    for example in self.examples[:self.latency_requests]:
      t = time.perf_counter()
      self.predict([example])
      latencies.append(time.perf_counter() - t)
    return dict(seconds=time.perf_counter() - start, examples=len(latencies),
                latencies=latencies)

  def predict_all(self):
    out = []
    for i in range(0, len(self.examples), self.batch_size):
      batch = self.examples[i:i + self.batch_size]
      predictions = list(self.predict(batch))
      if len(predictions) != len(batch):
        raise RuntimeError(f"predict returned {len(predictions)} predictions "
                           f"for {len(batch)} examples")
      out += [str(p) for p in predictions]
    return out


def serve(build):
  """The worker's command loop (see the module docstring). `build(spec)`
  returns (predict, info): predict maps a list of example dicts to one
  string each; info is a JSON-able dict for the report."""
  out = _protocol.reply_channel()
  cases = {}
  for line in sys.stdin:
    msg = json.loads(line)
    try:
      cmd = msg["cmd"]
      if cmd == "quit":
        break
      start = time.perf_counter()
      if cmd == "build":
        predict, info = build(msg["spec"])
        case = cases[msg["key"]] = Case(msg["spec"], predict, info)
        reply = dict(seconds=time.perf_counter() - start,
                     examples=len(case.examples), info=info)
      elif cmd == "time":
        case = cases[msg["key"]]
        if msg["mode"] not in ("throughput", "latency"):
          raise ValueError(f"unknown mode {msg['mode']!r}")
        reply = getattr(case, msg["mode"])()
      elif cmd == "predict":
        reply = dict(predictions=cases[msg["key"]].predict_all())
      else:
        raise ValueError(f"unknown command {cmd!r}")
      reply["ok"] = True
    except Exception as e:  # pylint: disable=broad-except
      traceback.print_exc()
      reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    out.write(json.dumps(reply) + "\n")


def percentile(values, q):
  """The q-th percentile (0-100), linear interpolation (numpy's default)."""
  v = sorted(values)
  if len(v) == 1:
    return v[0]
  x = (len(v) - 1) * q / 100
  i = int(x)
  return v[i] if i + 1 >= len(v) else v[i] + (v[i + 1] - v[i]) * (x - i)


# ------------------------------------------------------------ orchestrator
def ort_python():
  python = os.path.join(ORT_VENV, "bin", "python")
  if not os.path.exists(python):
    print("making the ONNX Runtime venv (bench/make_ort_venv.sh) ...", flush=True)
    subprocess.run(["bash", os.path.join(HERE, "make_ort_venv.sh"), ORT_VENV],
                   check=True)
  return python


def cpu_info():
  """Model name, core count and the SIMD/matrix flags that decide which
  kernels the runtimes can use."""
  model, flags = platform.processor() or "unknown CPU", set()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name":
          model = value.strip()
        elif key.strip() == "flags":
          flags = set(value.split())
  except OSError:
    pass
  lscpu = {}
  try:
    text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    for line in text.splitlines():
      key, _, value = line.partition(":")
      if key.strip() in ("Model name", "CPU(s)", "Thread(s) per core",
                         "Core(s) per socket", "L2 cache", "L3 cache",
                         "Hypervisor vendor", "Vendor ID"):
        lscpu[key.strip()] = value.strip()
  except (OSError, subprocess.SubprocessError):
    pass
  return dict(model=model, cpus=os.cpu_count(), lscpu=lscpu,
              flags={f: f in flags for f in CPU_FLAGS})


def background_busy(seconds=1.0):
  """Percent of the machine's CPU time used in the next `seconds` while the
  workers idle: other processes competing for the cores. With 2 threads on
  2 cores, a busy core hurts every runtime, PyTorch's spinning OpenMP
  threads most (batch-1 latency 15 ms -> 500 ms seen with one core taken by
  a nice-19 process), so a run with a busy machine is not one to quote."""
  def ticks():
    with open("/proc/stat") as f:
      values = [int(v) for v in f.readline().split()[1:]]
    return sum(values), values[3] + values[4]       # total, idle + iowait
  try:
    total0, idle0 = ticks()
    time.sleep(seconds)
    total1, idle1 = ticks()
  except OSError:
    return None
  return 100.0 * (1 - (idle1 - idle0) / max(1, total1 - total0))


def _latest_checkpoint(model_dir):
  """The newest checkpoint's name and mtime (what the exports are keyed by)."""
  path = os.path.join(model_dir, "checkpoint")
  with open(path) as f:
    m = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', f.read(), re.M)
  if not m:
    raise RuntimeError(f"{path}: no model_checkpoint_path")
  name = m.group(1)
  index = os.path.join(model_dir, name + ".index")
  return dict(model_dir=os.path.abspath(model_dir), checkpoint=name,
              mtime=os.path.getmtime(index))


def _export(argv, out, source, log):
  """Runs one export into OUT unless OUT was made from SOURCE already."""
  stamp = out + ".source.json"
  if os.path.exists(stamp) and os.path.isdir(out):
    with open(stamp) as f:
      if json.load(f) == source:
        return
  if os.path.exists(stamp):
    os.remove(stamp)
  log(f"exporting {source['model_dir']} ({source['checkpoint']}) -> {out}", flush=True)
  done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
  if done.returncode:
    tail = [l for l in done.stderr.strip().splitlines() if l.strip()] or ["?"]
    raise RuntimeError(f"{' '.join(os.path.basename(a) for a in argv[1:4])}: "
                       f"{tail[-1]}")
  with open(stamp, "w") as f:
    json.dump(source, f)


def prepare_models(task, model_dir, work_dir, precisions, hf=True,
                   max_accuracy_drop=None, log=print):
  """Our serving SavedModels (one per precision) and the Hugging Face folder
  of MODEL_DIR under WORK_DIR/TASK, exported again when the run's newest
  checkpoint changed. Returns ({precision: path, "hf": path}, source)."""
  folder = os.path.join(work_dir, task)
  os.makedirs(folder, exist_ok=True)
  source = _latest_checkpoint(model_dir)
  paths = {}
  for p in precisions:
    paths[p] = os.path.join(folder, f"saved_model_{p}")
    argv = [sys.executable, "-m", "bert.scripts.export", f"--kind={KIND[task]}",
            f"--checkpoint={model_dir}", f"--output={paths[p]}"]
    runtime, _, bits = p.rpartition("_")   # "ov_bf16": OpenVINO at bf16
    if runtime == "ov":
      argv.append("--runtime=openvino")
    if bits != "default":     # "default": bert-export as a user runs it
      argv.append(f"--precision={bits}")
    if bits != "fp32" and max_accuracy_drop is not None:
      argv.append(f"--max_accuracy_drop={max_accuracy_drop}")
    _export(argv, paths[p], source, log)
  if hf:
    paths["hf"] = os.path.join(folder, "hf")
    _export([sys.executable, "-m", "bench._hf_serving_export", model_dir,
             paths["hf"]], paths["hf"], source, log)
  return paths, source


def squad_held_out_titles(model_dir):
  """Article titles the SQuAD run did not train on (its train_fraction and
  seed); None when it trained on a file of its own."""
  from bert.data import squad_examples  # pylint: disable=g-import-not-at-top
  with open(os.path.join(model_dir, "operative_config.gin")) as f:
    gin = f.read()

  def value(name, default):
    m = re.search(rf"^{re.escape(name)}\s*=\s*(.+)$", gin, re.M)
    return m.group(1).strip().strip("'\"") if m else default

  if value("SquadData.train_file", "") != value("SquadData.eval_file", ""):
    return None
  path = os.path.join(shared_data_dir(), "squad", "dev-v1.1.json")
  _, held_out = squad_examples.split_articles(
      squad_examples.article_titles(path),
      float(value("SquadData.train_fraction", 0.8)),
      int(value("FinetuningInputs.seed", 42)))
  return held_out


def accuracy(task, examples, predictions):
  if task == "squad":
    from bert.data import squad_eval  # pylint: disable=g-import-not-at-top
    from bert.data.squad_examples import SquadExample  # pylint: disable=g-import-not-at-top
    exs = [SquadExample(e["id"], e["question"], e["context"],
                        [(a, 0) for a in e["answers"]], False, "") for e in examples]
    m = squad_eval.squad_metrics(
        exs, {e["id"]: p for e, p in zip(examples, predictions)}, version_2=False)
    return dict(exact_match=m["exact_match"], f1=m["f1"])
  gold = [e["label"] for e in examples]
  out = dict(accuracy=100.0 * sum(p == g for p, g in zip(predictions, gold)) / len(gold))
  if task == "mrpc":
    tp = sum(p == "1" and g == "1" for p, g in zip(predictions, gold))
    fp = sum(p == "1" and g != "1" for p, g in zip(predictions, gold))
    fn = sum(p != "1" and g == "1" for p, g in zip(predictions, gold))
    out["f1"] = 100.0 * 2 * tp / max(1, 2 * tp + fp + fn)
  return out


def _stats(values):
  return dict(median=statistics.median(values), min=min(values), max=max(values),
              rounds=values)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--tasks", default=",".join(TASKS))
  parser.add_argument("--impls", default=",".join(DEFAULT_IMPLS),
                      help=f"from {','.join(IMPLS)}")
  parser.add_argument("--model_dirs", default="",
                      help="task=bert-train model_dir,... (default "
                      "/work/runs/i20/TASK)")
  parser.add_argument("--work_dir", default=os.path.join(HERE, ".serving"),
                      help="exported models, ONNX cache, worker logs")
  parser.add_argument("--limit", default="0",
                      help="examples per task, N or task=N,... (0 = the whole "
                      "dev set / the held-out SQuAD articles)")
  parser.add_argument("--latency_requests", type=int, default=200)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--warmup", type=int, default=1,
                      help="untimed full passes of each mode before the rounds")
  parser.add_argument("--max_accuracy_drop", type=float, default=None,
                      help="passed to bert-export for our bf16/int8 exports")
  parser.add_argument("--modes", default="throughput,latency")
  parser.add_argument("--omp_wait_policy", default=None, choices=("PASSIVE", "ACTIVE"),
                      help="OMP_WAIT_POLICY for every worker (default: the "
                      "runtimes' own; PASSIVE keeps PyTorch usable on a busy machine)")
  parser.add_argument("--output", default=os.path.join(HERE, "SERVING.md"))
  parser.add_argument("--json", default=None, help="default: --output with .json")
  args = parser.parse_args()
  tasks = [t for t in args.tasks.split(",") if t]
  impls = [i for i in args.impls.split(",") if i]
  modes = [m for m in args.modes.split(",") if m]
  for name, given, known in (("--tasks", tasks, TASKS), ("--impls", impls, IMPLS),
                             ("--modes", modes, ("throughput", "latency"))):
    unknown = [x for x in given if x not in known]
    if unknown:
      parser.error(f"{name}: unknown {unknown}; choose from {list(known)}")
  limits = {t: 0 for t in tasks}
  for item in filter(None, args.limit.split(",")):
    task, _, n = item.rpartition("=")
    for t in ([task] if task else tasks):
      limits[t] = int(n)
  model_dirs = {t: f"/work/runs/i20/{t}" for t in tasks}
  for item in filter(None, args.model_dirs.split(",")):
    task, _, path = item.partition("=")
    model_dirs[task] = path
  os.makedirs(args.work_dir, exist_ok=True)

  started = time.time()
  models, sources, titles = {}, {}, {}
  precisions = sorted({precision(i) for i in impls if i.startswith("ours")})
  for task in tasks:
    models[task], sources[task] = prepare_models(
        task, model_dirs[task], args.work_dir, precisions,
        hf=any(not i.startswith("ours") for i in impls),
        max_accuracy_drop=args.max_accuracy_drop)
    titles[task] = squad_held_out_titles(model_dirs[task]) if task == "squad" else None
  examples = {t: read_examples(t, limits[t], titles[t]) for t in tasks}

  workers = {}
  for impl in impls:
    python = sys.executable if impl.startswith("ours") else ort_python()
    env = dict(OMP_WAIT_POLICY=args.omp_wait_policy) if args.omp_wait_policy else None
    workers[impl] = _protocol.Worker(
        impl, [python] + IMPLS[impl], ROOT,
        os.path.join(args.work_dir, f".serving_{impl}.log"), env)
  info, predictions, results, busy = {}, {}, {}, []
  try:
    for task in tasks:
      for impl in impls:
        model = models[task][precision(impl) if impl.startswith("ours") else "hf"]
        spec = dict(task=task, model=model,
                    limit=limits[task], squad_titles=titles[task],
                    batch_size=args.batch_size, latency_requests=args.latency_requests,
                    warmup=args.warmup, cache_dir=os.path.join(args.work_dir, "onnx"))
        reply = workers[impl].call_full(cmd="build", key=task, spec=spec)
        info[(task, impl)] = reply["info"]
        predictions[(task, impl)] = workers[impl].call_full(
            cmd="predict", key=task)["predictions"]
        print(f"built {task}/{impl} in {reply['seconds']:.1f} s "
              f"({reply['examples']} examples)", flush=True)
    for r in range(args.repeats):
      busy.append(background_busy())
      if busy[-1] is not None and busy[-1] > 10:
        print(f"warning: the machine is {busy[-1]:.0f}% busy with other "
              "processes while the workers idle; these timings are not ones "
              "to quote", flush=True)
      for task in tasks:
        for mode in modes:
          k = r % len(impls)
          for impl in impls[k:] + impls[:k]:
            reply = workers[impl].call_full(cmd="time", key=task, mode=mode)
            results.setdefault((task, mode, impl), []).append(reply)
      print(f"round {r + 1}/{args.repeats} done ({time.time() - started:.0f} s)",
            flush=True)
  finally:
    _protocol.close_all(workers.values())

  report = summarize(args, tasks, impls, modes, examples, info, predictions,
                     results, sources)
  report["background_busy_percent"] = busy
  json_path = args.json or os.path.splitext(args.output)[0] + ".json"
  with open(json_path, "w") as f:
    json.dump(report, f, indent=1)
  text = render(report)
  print(text)
  with open(args.output, "w") as f:
    f.write(text)
  print(f"wrote {args.output} and {json_path}")


def summarize(args, tasks, impls, modes, examples, info, predictions, results,
              sources):
  rows = []
  for task in tasks:
    ours = predictions.get((task, "ours"))
    for impl in impls:
      row = dict(task=task, impl=impl, examples=len(examples[task]),
                 info=info[(task, impl)],
                 quality=accuracy(task, examples[task], predictions[(task, impl)]))
      if ours is not None:
        row["agreement_with_ours"] = 100.0 * sum(
            a == b for a, b in zip(predictions[(task, impl)], ours)) / len(ours)
      if "throughput" in modes:
        row["throughput"] = _stats([x["examples"] / x["seconds"]
                                    for x in results[(task, "throughput", impl)]])
      if "latency" in modes:
        rounds = results[(task, "latency", impl)]
        row["latency_p50_ms"] = _stats([1e3 * percentile(x["latencies"], 50)
                                        for x in rounds])
        row["latency_p99_ms"] = _stats([1e3 * percentile(x["latencies"], 99)
                                        for x in rounds])
        row["latency_requests"] = rounds[0]["examples"]
      rows.append(row)
  for row in rows:
    peers = {r["impl"]: r for r in rows if r["task"] == row["task"]}
    for ref in ("ort_int8", "ours"):
      if ref not in peers:
        continue
      for key in ("throughput", "latency_p50_ms", "latency_p99_ms"):
        if key in row:
          row.setdefault("ratios", {})[f"{key}/{ref}"] = (
              row[key]["median"] / peers[ref][key]["median"])
  return dict(
      command=" ".join([os.path.basename(sys.executable), "-m", "bench.serving"]
                       + sys.argv[1:]),
      date=time.strftime("%Y-%m-%d %H:%M:%S"),
      cpu=cpu_info(), threads=THREADS, batch_size=args.batch_size,
      repeats=args.repeats, limit=args.limit, modes=modes,
      omp_wait_policy=args.omp_wait_policy, sources=sources, rows=rows)


def render(report):
  cpu = report["cpu"]
  flags = ", ".join(f"{f} {'yes' if on else 'no'}" for f, on in cpu["flags"].items())
  versions = {}
  for row in report["rows"]:
    versions.update(row["info"].get("versions", {}))
  lines = [
      "# Serving: raw strings -> predictions (`python -m bench.serving`)", "",
      f"Machine: {cpu['model']}, {cpu['cpus']} CPUs; flags: {flags}. "
      f"{report['threads']} intra-op threads per implementation, one "
      f"implementation computing at a time. Versions: "
      + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".", "",
      f"Throughput: every example once in batches of {report['batch_size']} "
      "(tokenization, model and post-processing to the final label / answer "
      "text), examples/s. Latency: requests of one example, p50 and p99 in ms. "
      f"Median of {report['repeats']} interleaved rounds (spread: min-max); "
      "ratios are of the medians, within this run (throughput: higher is "
      "faster; latency: lower is faster).", "",
      "Other processes' CPU use before each round (workers idle): "
      + ", ".join("?" if b is None else f"{b:.0f}%"
                  for b in report["background_busy_percent"])
      + (f"; OMP_WAIT_POLICY={report['omp_wait_policy']}"
         if report["omp_wait_policy"] else "") + ".", "",
      f"Command: `{report['command']}`; models: "
      + ", ".join(f"{t} {s['model_dir']} ({s['checkpoint']})"
                  for t, s in report["sources"].items()) + ".", "",
      "| task (examples) | implementation | examples/s | vs ORT int8 | vs ours | "
      "p50 ms | p99 ms | p50 vs ours | quality | agrees with ours |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

  def cell(stats, fmt):
    if not stats:
      return "-"
    return (f"{stats['median']:{fmt}} ({stats['min']:{fmt}}-"
            f"{stats['max']:{fmt}})")

  for row in report["rows"]:
    ratios = row.get("ratios", {})
    r = lambda k: f"{ratios[k]:.2f}x" if k in ratios else "-"
    quality = ", ".join(f"{k} {v:.2f}" for k, v in row["quality"].items())
    agree = (f"{row['agreement_with_ours']:.1f}%" if "agreement_with_ours" in row
             else "-")
    name = f"**{row['impl']}**" if row["impl"] == "ours" else row["impl"]
    lines.append(
        f"| {row['task']} ({row['examples']}) | {name} | "
        f"{cell(row.get('throughput'), '.1f')} | {r('throughput/ort_int8')} | "
        f"{r('throughput/ours')} | {cell(row.get('latency_p50_ms'), '.1f')} | "
        f"{cell(row.get('latency_p99_ms'), '.1f')} | {r('latency_p50_ms/ours')} | "
        f"{quality} | {agree} |")
  lines += ["", "Implementations:", ""]
  for row in report["rows"]:
    detail = dict(row["info"])
    detail.pop("versions", None)
    prepare = detail.pop("prepare", None)
    parity = detail.pop("parity", None)
    text = "; ".join(f"{k} {json.dumps(v)}" for k, v in detail.items())
    if parity:
      text += (f"; max abs logit difference from torch_fp32 on "
               f"{parity['rows']} examples: {parity['max_abs_diff_vs_torch_fp32']:.1e}")
    if prepare and row["impl"] == "ort_fp32":
      text += "; fused: " + ", ".join(f"{k} x{v}" for k, v in
                                      prepare["fused_operators"].items())
      text += f"; {prepare['bytes']['onnx_fp32'] / 2**20:.1f} MiB"
    if prepare and row["impl"] == "ort_int8":
      text += "; quantized: " + ", ".join(f"{k} x{v}" for k, v in
                                          prepare["int8_quantized_ops"].items())
      left = prepare["int8_float_ops_left"]
      text += "; float ops left: " + (", ".join(f"{k} x{v}" for k, v in left.items())
                                      or "none")
      text += (f"; {prepare['bytes']['onnx_int8'] / 2**20:.1f} MiB (fp32 "
               f"{prepare['bytes']['onnx_fp32'] / 2**20:.1f} MiB)")
    lines.append(f"- {row['task']}/{row['impl']}: {text.lstrip('; ')}")
  return "\n".join(lines) + "\n"


if __name__ == "__main__":
  main()
