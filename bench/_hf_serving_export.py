"""A fine-tuned `bert-train` run as a Hugging Face folder, for `bench.serving`
(ONNX Runtime and PyTorch run our weights, not a model of their own):

  python -m bench._hf_serving_export MODEL_DIR OUTPUT

MODEL_DIR is a `bert-train` model_dir (its task rebuilt from
operative_config.gin, the newest checkpoint's weights). OUTPUT gets
config.json (`BertForSequenceClassification`, `BertForQuestionAnswering` or
`BertForTokenClassification` with num_labels and id2label), model.safetensors
(the encoder under `bert.` names, the head as `classifier.*` / `qa_outputs.*`,
Linear weights [out, in]), vocab.txt, tokenizer_config.json (the run's
casing) and tokenizer.json.

Every write checks itself first: `transformers` loads the folder, its fast
tokenizer must give our tokenizer's ids, and its logits must equal our
model's (max abs difference <= 1e-4) on real SST-2, MRPC and SQuAD dev
inputs; otherwise nothing is written and the error is one line.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

TOLERANCE = 1e-4
ARCHITECTURES = {"classifier": "BertForSequenceClassification",
                 "span_labeler": "BertForQuestionAnswering",
                 "tagger": "BertForTokenClassification"}


class ExportError(Exception):
  pass


def _squad_fields(pre) -> dict:
  """The span labeler's window and answer settings (none for other kinds)."""
  squad = getattr(pre, "squad", None)
  names = ("max_query_length", "doc_stride", "max_answer_length", "n_best_size")
  return {n: getattr(squad, n) if squad is not None else None for n in names}


def _kind(model):
  from bert.models import (BertClassifier, BertSpanLabeler,  # pylint: disable=g-import-not-at-top
                           BertTokenClassifier)
  for cls, kind in ((BertClassifier, "classifier"),
                    (BertSpanLabeler, "span_labeler"),
                    (BertTokenClassifier, "tagger")):
    if isinstance(model, cls):
      return kind
  raise ExportError(f"{type(model).__name__} has no Hugging Face serving "
                    "equivalent here (classifier, span labeler, tagger)")


def _dense(layer):
  """(HF Linear weight [out, in], bias [out]) of a Keras Dense layer."""
  kernel, bias = (np.asarray(w.numpy(), np.float32) for w in (layer.kernel, layer.bias))
  return np.ascontiguousarray(kernel.T), bias


def hf_tensors(model, kind):
  """{HF key: array}: the encoder under `bert.` keys plus the task head."""
  from bert.checkpoints import hf, mapping  # pylint: disable=g-import-not-at-top
  tensors = {}
  for name, value in mapping.to_tf1(model.encoder).items():
    if kind != "classifier" and name.startswith("bert/pooler/"):
      continue   # BertForQuestionAnswering / TokenClassification have no pooler
    key, transpose = hf.tf1_to_hf_name(name, prefixed=True)
    value = np.asarray(value, np.float32)
    tensors[key] = np.ascontiguousarray(value.T if transpose else value)
  if kind == "classifier":
    if model.head.inner is not None:
      raise ExportError("a classifier head with an inner dense layer "
                        "(inner_dim > 0) has no BertForSequenceClassification "
                        "equivalent")
    tensors["classifier.weight"], tensors["classifier.bias"] = _dense(model.head.out)
  elif kind == "span_labeler":
    # Our span dense gives [..., 2] = (start, end); HF splits qa_outputs the same way.
    tensors["qa_outputs.weight"], tensors["qa_outputs.bias"] = _dense(model.head.dense)
  else:
    tensors["classifier.weight"], tensors["classifier.bias"] = _dense(model.dense)
  return tensors


def hf_config(model, kind, labels):
  config = model.encoder.config.to_hf_dict()
  config["architectures"] = [ARCHITECTURES[kind]]
  if kind == "span_labeler":
    return config
  num_labels = model.num_classes
  names = list(labels) if labels else [f"LABEL_{i}" for i in range(num_labels)]
  config["id2label"] = {str(i): n for i, n in enumerate(names)}
  config["label2id"] = {n: i for i, n in enumerate(names)}
  if kind == "classifier":
    config["problem_type"] = ("regression" if num_labels == 1
                              else "single_label_classification")
  return config


def _sample_inputs(kind, pairs):
  """A few real inputs from the shared data: (texts, texts_b or None)."""
  from bert.testing import shared_data_dir  # pylint: disable=g-import-not-at-top
  data = shared_data_dir()
  if kind == "span_labeler":
    with open(os.path.join(data, "squad", "dev-v1.1.json"), encoding="utf-8") as f:
      paragraphs = [p for a in json.load(f)["data"][:2] for p in a["paragraphs"][:2]]
    return ([p["qas"][0]["question"] for p in paragraphs],
            [p["context"] for p in paragraphs])
  if pairs:
    with open(os.path.join(data, "glue", "MRPC", "dev.tsv"), encoding="utf-8-sig") as f:
      rows = [line.rstrip("\n").split("\t") for line in f][1:5]
    return [r[3] for r in rows], [r[4] for r in rows]
  with open(os.path.join(data, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:5]
  return [r[0] for r in rows] + ["A Long, TWISTED tale of Café owners in Zürich!"], None


def check_parity(folder, model, kind, pre):
  """Raises ExportError unless the HF folder reproduces our model."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  arch = getattr(transformers, ARCHITECTURES[kind])
  hf_model = arch.from_pretrained(folder).eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
  texts, texts_b = _sample_inputs(kind, getattr(pre, "text_pairs", False))
  seq = pre.seq_length
  # Both truncate pairs longest-first (the reference's rule), so the ids of
  # the two tokenizers must be equal.
  enc = tokenizer(texts, texts_b, truncation=True, max_length=seq,
                  padding=True, return_tensors="np")
  ours_ids = pre.tokenizer.encode(texts, texts_b, seq)["input_word_ids"]
  width = enc["input_ids"].shape[1]
  if not np.array_equal(ours_ids[:, :width], enc["input_ids"]) or ours_ids[:, width:].any():
    raise ExportError("the Hugging Face tokenizer's ids differ from ours on "
                      f"{texts[0]!r}...: vocab or casing not carried over")
  inputs = dict(input_word_ids=enc["input_ids"].astype(np.int32),
                input_mask=enc["attention_mask"].astype(np.int32),
                input_type_ids=enc["token_type_ids"].astype(np.int32))
  ours = {k: np.asarray(v) for k, v in model(inputs, training=False).items()}
  with torch.inference_mode():
    out = hf_model(**{k: torch.from_numpy(v.astype(np.int64)) for k, v in enc.items()})
  mask = enc["attention_mask"].astype(bool)
  if kind == "span_labeler":
    pairs = [(ours["start_logits"][mask], out.start_logits.numpy()[mask]),
             (ours["end_logits"][mask], out.end_logits.numpy()[mask])]
  elif kind == "tagger":
    pairs = [(ours["logits"][mask], out.logits.numpy()[mask])]
  else:
    pairs = [(ours["logits"], out.logits.numpy())]
  diff = max(float(np.abs(a - b).max()) for a, b in pairs)
  if not diff <= TOLERANCE:
    raise ExportError(f"Hugging Face logits differ from ours by {diff:.2e} "
                      f"(> {TOLERANCE:g}) on {len(texts)} real inputs")
  return diff


def export(model_dir, output):
  """Writes OUTPUT; returns (kind, max abs logit difference)."""
  from bert.tasks.trained_run import load_trained_task  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  task, model = load_trained_task(model_dir)
  kind = _kind(model)
  pre = task.preprocessor()
  if os.path.exists(output) and not (os.path.isdir(output) and (
      not os.listdir(output) or os.path.exists(os.path.join(output, "config.json")))):
    raise ExportError(f"{output}: exists and is not a Hugging Face folder; "
                      "refusing to replace it")
  parent = os.path.dirname(os.path.abspath(output))
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".hf_export_", dir=parent)
  try:
    save_file(hf_tensors(model, kind), os.path.join(tmp, "model.safetensors"),
              metadata={"format": "pt", "source": os.path.abspath(model_dir)})
    with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
      json.dump(hf_config(model, kind, getattr(pre, "labels", None)), f, indent=2)
    with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write("".join(t + "\n" for t in pre.vocabulary))
    with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
      json.dump(dict(do_lower_case=pre.lower_case, tokenizer_class="BertTokenizer",
                     model_max_length=model.encoder.config.max_position_embeddings),
                f, indent=2)
    import transformers  # pylint: disable=g-import-not-at-top
    transformers.AutoTokenizer.from_pretrained(tmp).save_pretrained(tmp)  # + tokenizer.json
    diff = check_parity(tmp, model, kind, pre)
    with open(os.path.join(tmp, "bench_export.json"), "w", encoding="utf-8") as f:
      json.dump(dict(model_dir=os.path.abspath(model_dir), kind=kind,
                     seq_length=pre.seq_length, max_abs_logit_diff=diff,
                     **_squad_fields(pre)), f, indent=2)
    if os.path.isdir(output):
      shutil.rmtree(output)
    os.rename(tmp, output)
  finally:
    if os.path.isdir(tmp):
      shutil.rmtree(tmp)
  return kind, diff


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("model_dir")
  parser.add_argument("output")
  args = parser.parse_args()
  try:
    kind, diff = export(args.model_dir, args.output)
  except (ExportError, FileNotFoundError) as e:
    sys.exit(f"_hf_serving_export: {e}")
  print(f"wrote {args.output} ({ARCHITECTURES[kind]}); logits match ours to "
        f"{diff:.1e}")


if __name__ == "__main__":
  main()
