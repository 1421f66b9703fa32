"""Sentence embeddings against sentence-transformers, on all-MiniLM-L6-v2
(`bert.testing.minilm_dir()`): issue 44's parity, zero-shot retrieval and
speed figures, each mode printing a Markdown block for bench/EMBEDDINGS.md
and writing its figures as JSON (--json).

  python -m bench.embedding parity    [--texts 2000]
  python -m bench.embedding retrieval [--articles 0]
  python -m bench.embedding speed     [--parts encode,train] [--repeats 3]
      [--encode_impls ...] [--train_impls ...] [--articles 0]
      [--train_steps 20] [--export_precisions fp32,bf16,int8]
      [--exports NAME=DIR,...] [--omp_wait_policy PASSIVE]

parity: 2,000 real texts of different lengths, a third each of SST-2 (dev,
  then train), SQuAD 1.1 dev paragraphs and WNUT-17 (dev, test) sentences,
  evenly spaced through each file, through `BertTextEmbedder.
  from_pretrained(folder).encode` and `SentenceTransformer(folder, device=
  "cpu").encode`, fp32: the cosine of each pair of vectors (minimum), the
  largest |difference| of any component, per source and in all; how many
  texts are longer than the 256 word pieces both cut them to; and whether
  our rows hold as many word pieces as sentence-transformers' tokenizer
  gives (cut at 256). Targets: cosine >= 0.99999, max abs diff <= 1e-5.

retrieval: SQuAD 1.1 dev, zero-shot: every question against every distinct
  paragraph (10,570 x 2,067), its own paragraph relevant. Ours:
  `encode_queries` / `encode_documents`, `bert.retrieval.Index` (exact,
  the model's cosine), `bert.metrics.retrieval_metrics`. Theirs:
  `InformationRetrievalEvaluator` (its own encoding, scoring and metric code);
  and, as a check of the metric definitions, their vectors through our index
  and metrics. Target: recall@1, recall@5, MRR@10 within 0.05.

speed, one run, interleaved:
  encode: every SQuAD dev paragraph, then every question, raw strings to
    normalised float32 vectors, batches of 32: ours `encode(normalize=True)`
    (fp32; `ours_auto` from_pretrained(precision="auto")), our serving
    exports through `bert.export.load_serving(path).encode` (`export_<
    precision>`, written under --work_dir by `bert-export --kind=embedder`
    for --export_precisions, bf16 and int8 behind the gate on --gate_data,
    SQuAD dev recall@1; or given ready with --exports), and
    sentence-transformers' backends (`bench._st_worker`: torch fp32, torch
    bf16 weights, torch bf16 autocast, ONNX fp32, ONNX int8 from
    `export_dynamic_quantized_onnx_model`; the ONNX ones in the venv of
    bench/make_st_onnx_venv.sh when this one cannot run them).
    One untimed full pass each first (tracing, kernels; its vectors give
    each implementation's recall@1 / MRR@10 and its cosine to ours), then
    --repeats rounds, each timing one full pass of every implementation, the
    order rotating. Target: ours fp32 >= 1.5x torch fp32; our best gated
    export >= sentence-transformers' fastest.
  train: the in-batch ranking loss (scale 20, cosine) on --train_steps x 32
    (question, paragraph) pairs of SQuAD dev (a seeded sample), max 256
    word pieces, the recipe's optimizer: ours `compile()` + `fit` (jit_compile
    off: `ours`, on: `ours+xla`; `ours_auto`: precision="auto" and the
    jit_compile it picks) against `SentenceTransformerTrainer` +
    `MultipleNegativesRankingLoss` (defaults, batch 32). Each round is one
    `fit` / `train()` of 2 epochs over the pairs: the first warms up (tracing,
    XLA compilation of each length bucket), the second is timed (pairs/s);
    ours tokenizes its data before the first epoch, sentence-transformers
    inside each step, so ours is also given with that tokenization's time
    added to the timed epoch. Target: ours >= 1.3x.

Every implementation runs with THREADS intra-op threads: torch.set_num_threads
and ONNX Runtime sessions in the worker processes; TensorFlow (ours, in this
process) intra- and inter-op pools of THREADS (the library sets none: on a
2-core machine TensorFlow's own default is the same) and oneDNN as `import
bert` sets it. The machine's other CPU use is sampled before each round; a
busy machine's figures are flagged as not ones to quote.
"""

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from bench import _protocol
from bench.serving import background_busy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THREADS = 2
BATCH = 32
TARGETS = dict(cosine=0.99999, max_abs_diff=1e-5, retrieval=0.05,
               encode_ratio=1.5, train_ratio=1.3)
ST_IMPLS = ("st_torch_fp32", "st_torch_bf16", "st_torch_bf16_autocast",
            "st_onnx_fp32", "st_onnx_int8")
ENCODE_IMPLS = ("ours", "ours_auto") + ST_IMPLS
DEFAULT_ENCODE = ENCODE_IMPLS
TRAIN_IMPLS = ("ours", "ours+xla", "ours_auto", "st")
DEFAULT_TRAIN = TRAIN_IMPLS
RETRIEVAL_KEYS = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10")


# ------------------------------------------------------------------- data
def _tsv_first_column(path):
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n").split("\t")[0] for line in f][1:]


def _spaced(items, k):
  """k items evenly spaced through `items` (all of them if fewer)."""
  if k >= len(items):
    return list(items)
  return [items[i * len(items) // k] for i in range(k)]


def squad_articles():
  """SQuAD 1.1 dev through the library's checked reader."""
  from bert.data import squad_json  # pylint: disable=g-import-not-at-top
  from bert.testing import shared_data  # pylint: disable=g-import-not-at-top
  return squad_json.load_squad(shared_data("squad", "dev-v1.1.json"))


def parity_texts(n):
  """[(source, text)]: n // 3 SST-2 sentences, as many SQuAD dev paragraphs,
  the rest WNUT-17 sentences, each evenly spaced through its files."""
  from bert.testing import conll_sentences, shared_data  # pylint: disable=g-import-not-at-top
  sst2 = (_tsv_first_column(shared_data("glue", "SST-2", "dev.tsv"))
          + _tsv_first_column(shared_data("glue", "SST-2", "train.tsv")))
  paragraphs = list(dict.fromkeys(e.context for a in squad_articles()
                                  for e in a.examples))
  wnut = []
  for name in ("emerging.dev.conll", "emerging.test.annotated"):
    wnut += conll_sentences(shared_data("ner", "wnut17", name))
  k = n // 3
  picked = [("SST-2", t) for t in _spaced(sst2, k)]
  picked += [("SQuAD paragraphs", t) for t in _spaced(paragraphs, k)]
  picked += [("WNUT-17", t) for t in _spaced(wnut, n - 2 * k)]
  return picked


def squad_retrieval(articles=None, titles=None):
  """Questions against distinct paragraphs of SQuAD dev (all articles, or
  the first `articles`, or those titled `titles`): dict(questions, qids,
  corpus, relevant: each question's paragraph index)."""
  loaded = squad_articles()
  if titles is not None:
    keep = set(titles)
    loaded = [a for a in loaded if a.title in keep]
  if articles:
    loaded = loaded[:articles]
  corpus, index, questions, qids, relevant = [], {}, [], [], []
  for article in loaded:
    for e in article.examples:
      if e.context not in index:
        index[e.context] = len(corpus)
        corpus.append(e.context)
      questions.append(e.question)
      qids.append(e.qas_id)
      relevant.append(index[e.context])
  return dict(questions=questions, qids=qids, corpus=corpus,
              relevant=relevant)


def ir_data(data):
  """The InformationRetrievalEvaluator's dicts of `squad_retrieval` data."""
  return dict(queries=dict(zip(data["qids"], data["questions"])),
              corpus={f"c{i}": t for i, t in enumerate(data["corpus"])},
              relevant={q: [f"c{r}"] for q, r in zip(data["qids"],
                                                     data["relevant"])})


def write_json(work_dir, name, obj):
  path = os.path.join(work_dir, name)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f)
  return path


def load_npy(path):
  import numpy as np  # pylint: disable=g-import-not-at-top
  return np.load(path, allow_pickle=False)


# ----------------------------------------------------------------- record
def commit():
  """The commit of this tree (+ "-dirty" with uncommitted changes)."""
  def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True,
                          text=True, check=False).stdout.strip()
  head = git("rev-parse", "--short", "HEAD") or "?"
  return head + ("-dirty" if git("status", "--porcelain") else "")


def record(command, omp_wait_policy=None):
  from bert import hardware  # pylint: disable=g-import-not-at-top
  return dict(command=command, date=time.strftime("%Y-%m-%d %H:%M"),
              commit=commit(), cpu=hardware.describe(), threads=THREADS,
              onednn=os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset)"),
              omp_wait_policy=omp_wait_policy)


def header(rec, title):
  return [f"### {title}", "",
          f"`{rec['command']}` on {rec['date']}, commit {rec['commit']}, "
          f"{rec['cpu']}, {rec['threads']} threads per implementation "
          f"(TF_ENABLE_ONEDNN_OPTS={rec['onednn']}"
          + (f"; OMP_WAIT_POLICY={rec['omp_wait_policy']}"
             if rec.get("omp_wait_policy") else "") + ").", ""]


def stats(values):
  return dict(median=statistics.median(values), min=min(values),
              max=max(values), rounds=list(values))


def cell(s, fmt=".1f"):
  return f"{s['median']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}})"


def busy_warning(busy):
  if busy is not None and busy > 10:
    print(f"warning: the machine is {busy:.0f}% busy with other processes "
          "while the implementations idle; these timings are not ones to "
          "quote", flush=True)


# ------------------------------------------------------------------- ours
def setup_tensorflow():
  """TensorFlow with THREADS intra- and inter-op threads (before any op)."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  # `bert` before TensorFlow: its oneDNN default.
  import bert  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(THREADS)
  tf.config.threading.set_inter_op_parallelism_threads(THREADS)
  return tf


def load_ours(precision="fp32"):
  from bert.models import BertTextEmbedder  # pylint: disable=g-import-not-at-top
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  return BertTextEmbedder.from_pretrained(minilm_dir(), precision=precision)


def precision_info(model):
  """The precision `from_pretrained` chose ("auto") or was given."""
  choice = getattr(model, "precision_choice", None)
  if choice is None:
    return dict(precision="fp32")
  return dict(precision=choice.name, reason=choice.reason)


def rank(query_vectors, corpus_vectors, depth=100):
  """Exact cosine top-`depth` corpus ids of each query (`bert.retrieval`)."""
  from bert import retrieval  # pylint: disable=g-import-not-at-top
  index = retrieval.Index(corpus_vectors.shape[1], metric="cosine")
  index.add(corpus_vectors)
  _, ids = index.search(query_vectors, k=min(depth, len(corpus_vectors)))
  return ids


def metrics_of(ranked, relevant):
  """`bert.metrics.retrieval_metrics` at the cutoffs the corpus can hold."""
  from bert.metrics import retrieval_metrics  # pylint: disable=g-import-not-at-top
  depth = ranked.shape[1]
  cut = min(10, depth)
  return retrieval_metrics(ranked, [{r} for r in relevant],
                           ks=tuple(k for k in (1, 5, 10) if k <= depth),
                           mrr_at=cut, ndcg_at=cut)


# ------------------------------------------------------ sentence-transformers
ST_ONNX_VENV = os.path.join(os.path.expanduser("~"), ".cache", "bert-tf2-bench",
                            "venv_st_onnx")


def st_onnx_python(venv):
  """The Python of sentence-transformers' ONNX backend: this one when
  Optimum's ONNX Runtime models import here, else the venv of
  bench/make_st_onnx_venv.sh at VENV (made when missing; outside the
  repository, whose bench/ and tests/ the tests scan file by file)."""
  # Tried in a child process: this one keeps TensorFlow alone.
  here = subprocess.run([sys.executable, "-c", "import optimum.onnxruntime"],
                        capture_output=True, check=False)
  if here.returncode == 0:
    return sys.executable
  python = os.path.join(venv, "bin", "python")
  if not os.path.exists(python):
    print("making sentence-transformers' ONNX venv "
          "(bench/make_st_onnx_venv.sh) ...", flush=True)
    subprocess.run(["bash", os.path.join(HERE, "make_st_onnx_venv.sh"), venv],
                   check=True)
  return python


def start_st(impl, args):
  """A `bench._st_worker` process with `impl` loaded (in --work_dir, with
  --omp_wait_policy); (worker, info)."""
  work_dir = args.work_dir
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  name = impl[len("st_"):] if impl.startswith("st_") else "torch_fp32"
  python = (st_onnx_python(args.st_onnx_venv) if name.startswith("onnx")
            else sys.executable)
  worker = _protocol.Worker(
      impl, [python, "-m", "bench._st_worker", f"--impl={name}"], ROOT,
      os.path.join(work_dir, f"{impl}.log"),
      dict(OMP_WAIT_POLICY=args.omp_wait_policy) if args.omp_wait_policy
      else None)
  try:
    reply = worker.call_full(cmd="load", model=minilm_dir(), work_dir=work_dir)
  except Exception:
    worker.close()
    raise
  return worker, reply["info"]


# ----------------------------------------------------------------- parity
def run_parity(args):
  import numpy as np  # pylint: disable=g-import-not-at-top
  setup_tensorflow()
  picked = parity_texts(args.texts)
  sources = [s for s, _ in picked]
  texts = [t for _, t in picked]
  path = write_json(args.work_dir, "parity_texts.json", texts)
  worker, info = start_st("st_torch_fp32", args)
  try:
    out = os.path.join(args.work_dir, "parity_st.npy")
    worker.call_full(cmd="encode", texts=path, out=out, batch_size=BATCH)
    theirs = load_npy(out)
    lengths = np.asarray(worker.call_full(cmd="lengths", texts=path)["lengths"])
  finally:
    worker.close()
  model = load_ours()
  ours = model.encode(texts, batch_size=BATCH, show_progress=False)
  seq = model.preprocessor.seq_length
  our_lengths = model.preprocessor.encode_texts(texts)["input_mask"].sum(-1)
  cosine = (ours * theirs).sum(-1) / (np.linalg.norm(ours, axis=-1)
                                      * np.linalg.norm(theirs, axis=-1))
  diff = np.abs(ours - theirs).max(-1)
  rows = []
  for source in list(dict.fromkeys(sources)) + ["all"]:
    m = np.array([source in ("all", s) for s in sources])
    rows.append(dict(
        source=source, texts=int(m.sum()),
        longest=int(lengths[m].max()), truncated=int((lengths[m] > seq).sum()),
        min_cosine=float(cosine[m].min()), max_abs_diff=float(diff[m].max()),
        pieces_differ=int((our_lengths[m] != np.minimum(lengths[m], seq)).sum())))
  total = rows[-1]
  passed = (total["min_cosine"] >= TARGETS["cosine"]
            and total["max_abs_diff"] <= TARGETS["max_abs_diff"])
  rec = record(" ".join(["python -m bench.embedding"] + sys.argv[1:]),
               args.omp_wait_policy)
  report = dict(rec, mode="parity", seq_length=seq, st=info, rows=rows,
                passed=passed, worst=dict(
                    cosine=texts[int(cosine.argmin())][:200],
                    abs_diff=texts[int(diff.argmax())][:200]))
  lines = header(rec, "Parity: `BertTextEmbedder.encode` against "
                 "`SentenceTransformer.encode`, fp32")
  lines += ["| texts | source | longest (pieces) | cut at "
            f"{seq} | min cosine | max abs diff | rows whose piece count "
            "differs |", "| --- | --- | --- | --- | --- | --- | --- |"]
  for r in rows:
    lines.append(f"| {r['texts']} | {r['source']} | {r['longest']} | "
                 f"{r['truncated']} | {r['min_cosine']:.8f} | "
                 f"{r['max_abs_diff']:.1e} | {r['pieces_differ']} |")
  lines += ["", f"Targets cosine >= {TARGETS['cosine']}, max abs diff <= "
            f"{TARGETS['max_abs_diff']:.0e}: {'met' if passed else 'NOT met'}. "
            f"sentence-transformers {info['versions']['sentence-transformers']}, "
            f"torch {info['versions']['torch']}."]
  return report, lines


# -------------------------------------------------------------- retrieval
def run_retrieval(args):
  setup_tensorflow()
  data = squad_retrieval(args.articles)
  path = write_json(args.work_dir, "retrieval_ir.json", ir_data(data))
  q_path = write_json(args.work_dir, "retrieval_questions.json",
                      data["questions"])
  c_path = write_json(args.work_dir, "retrieval_corpus.json", data["corpus"])
  worker, info = start_st("st_torch_fp32", args)
  try:
    theirs = worker.call_full(cmd="ir", data=path, batch_size=BATCH)
    vectors = {}
    for name, texts in (("questions", q_path), ("corpus", c_path)):
      out = os.path.join(args.work_dir, f"retrieval_st_{name}.npy")
      worker.call_full(cmd="encode", texts=texts, out=out, batch_size=BATCH)
      vectors[name] = load_npy(out)
  finally:
    worker.close()
  model = load_ours()
  start = time.perf_counter()
  docs = model.encode_documents(data["corpus"], batch_size=BATCH,
                                show_progress=False)
  queries = model.encode_queries(data["questions"], batch_size=BATCH,
                                 show_progress=False)
  ranked = rank(queries, docs)
  ours = metrics_of(ranked, data["relevant"])
  seconds = time.perf_counter() - start
  st_ranked = rank(vectors["questions"], vectors["corpus"])
  st_ours_metrics = metrics_of(st_ranked, data["relevant"])
  st = {k.partition("cosine_")[2]: v for k, v in theirs["metrics"].items()}
  top1 = float((ranked[:, 0] == st_ranked[:, 0]).mean())
  diffs = {k: ours[k] - st[k] for k in RETRIEVAL_KEYS if k in ours and k in st}
  passed = all(abs(diffs[k]) <= TARGETS["retrieval"]
               for k in ("recall@1", "recall@5", "mrr@10") if k in diffs)
  rec = record(" ".join(["python -m bench.embedding"] + sys.argv[1:]),
               args.omp_wait_policy)
  report = dict(rec, mode="retrieval", questions=len(data["questions"]),
                paragraphs=len(data["corpus"]), ours=ours, st=st,
                st_vectors_our_metrics=st_ours_metrics, differences=diffs,
                top1_agreement=top1, ours_seconds=seconds,
                st_seconds=theirs["seconds"], st_info=info, passed=passed)
  keys = [k for k in RETRIEVAL_KEYS if k in ours]
  lines = header(rec, f"Zero-shot retrieval, SQuAD 1.1 dev: "
                 f"{len(data['questions'])} questions x "
                 f"{len(data['corpus'])} paragraphs")
  lines += ["| implementation | " + " | ".join(keys) + " |",
            "| --- |" + " --- |" * len(keys)]
  for name, m in (
      ("**ours**: `encode_queries`/`encode_documents`, `retrieval.Index` "
       "(exact), `metrics.retrieval_metrics`", ours),
      ("sentence-transformers: `InformationRetrievalEvaluator`", st),
      ("sentence-transformers' vectors, our index and metrics", st_ours_metrics)):
    lines.append(f"| {name} | " + " | ".join(f"{m[k]:.4f}" for k in keys) + " |")
  lines.append("| ours - sentence-transformers | " + " | ".join(
      f"{diffs[k]:+.4f}" for k in keys) + " |")
  lines += ["", f"Same top-1 paragraph for {100 * top1:.2f}% of the "
            f"questions. Target: recall@1, recall@5, MRR@10 within "
            f"{TARGETS['retrieval']}: {'met' if passed else 'NOT met'}."]
  return report, lines


# ------------------------------------------------------------------ speed
class ExportEncoder:
  """A serving export through `bert.serving.load_serving` as an encoder:
  its `encode(texts, batch_size)` (texts in length order, each batch cut to
  its bucket), the vectors then normalised as the other implementations'."""

  def __init__(self, path):
    import numpy as np  # pylint: disable=g-import-not-at-top
    from bert.export import load_serving  # pylint: disable=g-import-not-at-top
    from bert.serving.loader import read_manifest  # pylint: disable=g-import-not-at-top
    self.np = np
    self.serving = load_serving(path, num_threads=THREADS)
    self.manifest = read_manifest(path)

  def encode(self, texts, batch_size=BATCH):
    np = self.np
    v = self.serving.encode(texts, batch_size=batch_size)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def prepare_exports(args):
  """{name: folder} of our serving exports: --exports, and `bert-export
  --kind=embedder` of MiniLM at each of --export_precisions (written once
  under --work_dir). An export that fails is reported and left out."""
  from bert.testing import minilm_dir  # pylint: disable=g-import-not-at-top
  exports = {}
  for item in filter(None, args.exports.split(",")):
    name, _, path = item.partition("=")
    exports[name if name.startswith("export_") else f"export_{name}"] = path
  for p in filter(None, args.export_precisions.split(",")):
    out = os.path.join(args.work_dir, f"embedder_{p}")
    source = dict(commit=commit(), precision=p, gate_data=args.gate_data,
                  flags=args.export_flags)
    stamp = out + ".source.json"
    if os.path.exists(stamp):
      with open(stamp, encoding="utf-8") as f:
        if json.load(f) != source:
          os.remove(stamp)
    if not os.path.exists(stamp):
      shutil.rmtree(out, ignore_errors=True)
      argv = [sys.executable, "-m", "bert.scripts.export", "--kind=embedder",
              f"--checkpoint={minilm_dir()}", f"--output={out}"]
      argv.append(f"--precision={p}")
      if p != "fp32":
        argv.append(f"--gate_data={args.gate_data}")
      argv += args.export_flags.split()
      print(f"exporting {p}: {' '.join(argv[1:])}", flush=True)
      done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                            check=False)
      if done.returncode:
        tail = [l for l in done.stderr.strip().splitlines() if l.strip()]
        print(f"warning: bert-export --kind=embedder --precision={p} failed "
              f"({tail[-1] if tail else '?'}); export_{p} left out", flush=True)
        continue
      with open(stamp, "w", encoding="utf-8") as f:
        json.dump(source, f)
    exports[f"export_{p}"] = out
  return exports


def speed_encode(args, report, lines):
  import numpy as np  # pylint: disable=g-import-not-at-top
  impls = [i for i in args.encode_impls.split(",") if i]
  data = squad_retrieval(args.articles)
  texts = dict(paragraphs=data["corpus"], questions=data["questions"])
  paths = {k: write_json(args.work_dir, f"speed_{k}.json", v)
           for k, v in texts.items()}
  exports = prepare_exports(args)
  impls += list(exports)
  encoders, workers, info = {}, {}, {}
  try:
    for impl in impls:
      start = time.perf_counter()
      if impl in ("ours", "ours_auto"):
        model = load_ours("auto" if impl == "ours_auto" else "fp32")
        encoders[impl] = lambda t, m=model: m.encode(
            t, batch_size=BATCH, normalize=True, show_progress=False)
        info[impl] = precision_info(model)
      elif impl in exports:
        export = ExportEncoder(exports[impl])
        encoders[impl] = export.encode
        info[impl] = dict(path=exports[impl], manifest={
            k: v for k, v in export.manifest.items()
            if k in ("precision", "runtime", "kind", "gate")})
      else:
        workers[impl], info[impl] = start_st(impl, args)
      print(f"loaded {impl} in {time.perf_counter() - start:.1f} s", flush=True)

    def one_pass(impl, keep=False):
      seconds, vectors = {}, {}
      for part in ("paragraphs", "questions"):
        if impl in workers:
          out = (os.path.join(args.work_dir, f"speed_{impl}_{part}.npy")
                 if keep else None)
          seconds[part] = workers[impl].call_full(
              cmd="encode", texts=paths[part], out=out,
              batch_size=BATCH)["seconds"]
          if keep:
            vectors[part] = load_npy(out)
        else:
          start = time.perf_counter()
          v = encoders[impl](texts[part])
          seconds[part] = time.perf_counter() - start
          vectors[part] = v
      return seconds, vectors

    quality, vectors = {}, {}
    for impl in impls:           # the untimed warm-up pass
      _, vectors[impl] = one_pass(impl, keep=True)
      ranked = rank(vectors[impl]["questions"], vectors[impl]["paragraphs"])
      quality[impl] = metrics_of(ranked, data["relevant"])
      print(f"warmed up {impl}: recall@1 {quality[impl]['recall@1']:.4f}",
            flush=True)
    base = "ours" if "ours" in vectors else impls[0]
    for impl in impls:
      cos = np.concatenate([(vectors[impl][p] * vectors[base][p]).sum(-1)
                            for p in ("paragraphs", "questions")])
      quality[impl]["min_cosine_to_" + base] = float(cos.min())
    timings, busy = {i: [] for i in impls}, []
    started = time.time()
    for r in range(args.repeats):
      busy.append(background_busy())
      busy_warning(busy[-1])
      k = r % len(impls)
      for impl in impls[k:] + impls[:k]:
        timings[impl].append(one_pass(impl)[0])
      print(f"encode round {r + 1}/{args.repeats} done "
            f"({time.time() - started:.0f} s)", flush=True)
  finally:
    _protocol.close_all(workers.values())

  n = {k: len(v) for k, v in texts.items()}
  rows = {}
  for impl in impls:
    rounds = timings[impl]
    rows[impl] = dict(
        texts_per_s=stats([(n["paragraphs"] + n["questions"])
                           / (t["paragraphs"] + t["questions"]) for t in rounds]),
        paragraphs_per_s=stats([n["paragraphs"] / t["paragraphs"] for t in rounds]),
        questions_per_s=stats([n["questions"] / t["questions"] for t in rounds]),
        quality=quality[impl], info=info[impl])
  st_rows = [i for i in impls if i.startswith("st_")]
  fastest_st = max(st_rows, key=lambda i: rows[i]["texts_per_s"]["median"],
                   default=None)
  for impl, row in rows.items():
    for ref in ("st_torch_fp32", fastest_st):
      if ref in rows:
        row.setdefault("ratios", {})[ref] = (
            row["texts_per_s"]["median"] / rows[ref]["texts_per_s"]["median"])
  report["encode"] = dict(rows=rows, texts=n, busy_percent=busy,
                          fastest_st=fastest_st, repeats=args.repeats)
  lines += [f"Encoding raw strings to normalised vectors: {n['paragraphs']} "
            f"SQuAD dev paragraphs, then {n['questions']} questions, batches "
            f"of {BATCH}. Median of {args.repeats} interleaved rounds "
            "(min-max); ratios of medians, this run. Other processes' CPU use "
            "before each round: " + ", ".join(
                "?" if b is None else f"{b:.0f}%" for b in busy) + ".", "",
            "| implementation | texts/s | paragraphs/s | questions/s | vs "
            f"st_torch_fp32 | vs fastest ST ({fastest_st}) | recall@1 | "
            f"MRR@10 | min cosine to {base} |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
  for impl, row in rows.items():
    ratios = row.get("ratios", {})
    q = row["quality"]
    name = f"**{impl}**" if not impl.startswith("st_") else impl
    lines.append(
        f"| {name} | {cell(row['texts_per_s'])} | "
        f"{cell(row['paragraphs_per_s'])} | {cell(row['questions_per_s'])} | "
        + " | ".join(f"{ratios[r]:.2f}x" if r in ratios else "-"
                     for r in ("st_torch_fp32", fastest_st))
        + f" | {q['recall@1']:.4f} | {q.get('mrr@10', float('nan')):.4f} | "
        f"{q['min_cosine_to_' + base]:.6f} |")
  lines += ["", "Implementations: " + "; ".join(
      f"{i}: " + json.dumps(row["info"], sort_keys=True)
      for i, row in rows.items()), ""]


def train_pairs(rows, seed=0):
  """`rows` (question, paragraph) pairs of SQuAD dev, a seeded sample."""
  import random  # pylint: disable=g-import-not-at-top
  data = squad_retrieval()
  pairs = [(q, data["corpus"][r]) for q, r in zip(data["questions"],
                                                  data["relevant"])]
  random.Random(seed).shuffle(pairs)
  pairs = pairs[:rows]
  return dict(anchor=[a for a, _ in pairs], positive=[p for _, p in pairs])


class OursTrainer:
  """Our model, compiled once (the recipe's optimizer, its schedule long
  enough for every round), `fit` of 2 epochs per round."""

  def __init__(self, impl, total_steps):
    import tf_keras  # pylint: disable=g-import-not-at-top
    from bert.models.embedding_objective import default_recipe  # pylint: disable=g-import-not-at-top
    self.tf_keras = tf_keras
    self.model = load_ours("auto" if impl == "ours_auto" else "fp32")
    recipe = dataclasses.replace(default_recipe(), num_train_steps=total_steps)
    kwargs = {} if impl == "ours_auto" else dict(jit_compile=impl == "ours+xla")
    self.model.compile(optimizer=recipe, **kwargs)
    self.info = dict(precision_info(self.model),
                     jit_compile=bool(self.model.jit_compile))

  def round(self, pairs, seed):
    tf_keras = self.tf_keras

    class EpochTimer(tf_keras.callbacks.Callback):

      def __init__(self):
        super().__init__()
        self.seconds, self._start = [], None

      def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

      def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)

    tf_keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    pre = self.model.preprocessor
    pre.encode_texts(pairs["anchor"])
    pre.encode_texts(pairs["positive"])
    tokenize = time.perf_counter() - start
    timer = EpochTimer()
    start = time.perf_counter()
    self.model.fit((pairs["anchor"], pairs["positive"]), batch_size=BATCH,
                   epochs=2, verbose=0, callbacks=[timer])
    return dict(epoch_seconds=timer.seconds, seconds=time.perf_counter() - start,
                tokenize_seconds=tokenize, rows=len(pairs["anchor"]))


def speed_train(args, report, lines):
  impls = [i for i in args.train_impls.split(",") if i]
  pairs = train_pairs(args.train_steps * BATCH)
  path = write_json(args.work_dir, "train_pairs.json", pairs)
  total_steps = 2 * args.train_steps * (args.repeats + 1)
  runners, workers, info = {}, {}, {}
  try:
    for impl in impls:
      if impl == "st":
        workers[impl], info[impl] = start_st("st", args)
      else:
        runners[impl] = OursTrainer(impl, total_steps)
        info[impl] = runners[impl].info
    timings, busy = {i: [] for i in impls}, []
    started = time.time()
    for r in range(args.repeats):
      busy.append(background_busy())
      busy_warning(busy[-1])
      k = r % len(impls)
      for impl in impls[k:] + impls[:k]:
        if impl in workers:
          reply = workers[impl].call_full(cmd="train", pairs=path,
                                          batch_size=BATCH, epochs=2, seed=r)
          reply["tokenize_seconds"] = 0.0   # inside its steps
        else:
          reply = runners[impl].round(pairs, seed=r)
        timings[impl].append(reply)
      print(f"train round {r + 1}/{args.repeats} done "
            f"({time.time() - started:.0f} s)", flush=True)
  finally:
    _protocol.close_all(workers.values())
  rows = {}
  for impl in impls:
    rounds = timings[impl]
    rows[impl] = dict(
        pairs_per_s=stats([t["rows"] / t["epoch_seconds"][-1] for t in rounds]),
        with_tokenization=stats([t["rows"] / (t["epoch_seconds"][-1]
                                              + t["tokenize_seconds"])
                                 for t in rounds]),
        first_epoch_s=stats([t["epoch_seconds"][0] for t in rounds]),
        call_s=stats([t["seconds"] for t in rounds]), info=info[impl])
  if "st" in rows:
    for row in rows.values():
      row["vs_st"] = (row["pairs_per_s"]["median"]
                      / rows["st"]["pairs_per_s"]["median"])
      row["vs_st_with_tokenization"] = (row["with_tokenization"]["median"]
                                        / rows["st"]["pairs_per_s"]["median"])
  report["train"] = dict(rows=rows, pairs=len(pairs["anchor"]),
                         steps_per_epoch=args.train_steps, busy_percent=busy,
                         repeats=args.repeats)
  lines += [f"Training step, in-batch ranking loss: {len(pairs['anchor'])} "
            f"(question, paragraph) pairs of SQuAD dev, batch {BATCH}, max 256 "
            "word pieces; per round one call of 2 epochs, the second timed "
            f"(pairs/s). Median of {args.repeats} interleaved rounds "
            "(min-max). Other processes' CPU use before each round: "
            + ", ".join("?" if b is None else f"{b:.0f}%" for b in busy) + ".",
            "", "| implementation | pairs/s (epoch 2) | with its tokenization "
            "| vs ST | with tokenization vs ST | first epoch s | whole call s |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
  for impl, row in rows.items():
    ratio = lambda k: f"{row[k]:.2f}x" if k in row else "-"
    name = "sentence-transformers trainer" if impl == "st" else f"**{impl}**"
    lines.append(f"| {name} | {cell(row['pairs_per_s'], '.2f')} | "
                 f"{cell(row['with_tokenization'], '.2f')} | {ratio('vs_st')} | "
                 f"{ratio('vs_st_with_tokenization')} | "
                 f"{cell(row['first_epoch_s'])} | {cell(row['call_s'])} |")
  lines += ["", "Implementations: " + "; ".join(
      f"{i}: " + json.dumps(row["info"], sort_keys=True)
      for i, row in rows.items()), ""]


def run_speed(args):
  setup_tensorflow()
  rec = record(" ".join(["python -m bench.embedding"] + sys.argv[1:]),
               args.omp_wait_policy)
  report, lines = dict(rec, mode="speed"), header(rec, "Speed")
  parts = [p for p in args.parts.split(",") if p]
  if "encode" in parts:
    speed_encode(args, report, lines)
  if "train" in parts:
    speed_train(args, report, lines)
  return report, lines


def main(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("mode", choices=("parity", "retrieval", "speed"))
  parser.add_argument("--texts", type=int, default=2000,
                      help="parity: how many texts")
  parser.add_argument("--articles", type=int, default=0,
                      help="retrieval, speed encode: the first N SQuAD dev "
                      "articles only (0: all 48)")
  parser.add_argument("--parts", default="encode,train")
  parser.add_argument("--encode_impls", default=",".join(DEFAULT_ENCODE),
                      help=f"from {','.join(ENCODE_IMPLS)}")
  parser.add_argument("--train_impls", default=",".join(DEFAULT_TRAIN),
                      help=f"from {','.join(TRAIN_IMPLS)}")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--train_steps", type=int, default=20,
                      help="steps per timed epoch (pairs = steps x 32)")
  parser.add_argument("--export_precisions", default="fp32,bf16,int8",
                      help="bert-export --kind=embedder at these precisions "
                      "(fp32,bf16,int8), timed as export_<precision>")
  parser.add_argument("--gate_data", default=None,
                      help="bert-export --gate_data of the bf16/int8 exports "
                      "(default: SQuAD 1.1 dev, recall@1)")
  parser.add_argument("--export_flags", default="",
                      help="more bert-export flags (e.g. the gate's)")
  parser.add_argument("--exports", default="",
                      help="NAME=DIR,... ready serving exports to time")
  parser.add_argument("--omp_wait_policy", default=None,
                      choices=("PASSIVE", "ACTIVE"),
                      help="OMP_WAIT_POLICY of sentence-transformers' workers "
                      "(default: PyTorch's own; PASSIVE keeps it usable on a "
                      "busy machine, see bench/serving.py)")
  parser.add_argument("--st_onnx_venv", default=ST_ONNX_VENV,
                      help="the venv of bench/make_st_onnx_venv.sh, used when "
                      "this one cannot run sentence-transformers' ONNX backend")
  parser.add_argument("--work_dir",
                      default=os.path.join(HERE, ".serving", "embedding"),
                      help="texts, vectors, ONNX files, exports, worker logs")
  parser.add_argument("--json", default=None,
                      help="default: WORK_DIR/<mode>.json")
  args = parser.parse_args(argv)
  for name, given, known in (("--encode_impls", args.encode_impls, ENCODE_IMPLS),
                             ("--train_impls", args.train_impls, TRAIN_IMPLS),
                             ("--parts", args.parts, ("encode", "train"))):
    unknown = [x for x in given.split(",") if x and x not in known]
    if unknown:
      parser.error(f"{name}: unknown {unknown}; choose from {list(known)}")
  os.makedirs(args.work_dir, exist_ok=True)
  if args.gate_data is None:
    from bert.testing import shared_data  # pylint: disable=g-import-not-at-top
    args.gate_data = shared_data("squad", "dev-v1.1.json")
  run = dict(parity=run_parity, retrieval=run_retrieval, speed=run_speed)
  report, lines = run[args.mode](args)
  path = args.json or os.path.join(args.work_dir, f"{args.mode}.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(report, f, indent=1)
  print("\n".join(lines))
  print(f"\nwrote {path}")


if __name__ == "__main__":
  main()
