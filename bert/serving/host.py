"""Small batches without TensorFlow's fixed cost.

A request of one short text spends most of its time in the calls of the
SavedModel's `preprocess` and `postprocess` graphs, not in the network
(bench/SERVING_RUNS.md). Where the network runs outside TensorFlow (TFLite,
OpenVINO), a batch of at most `MAX_ROWS` rows is tokenized, packed and
post-processed here in Python instead, and the answers are the graphs'.

Which texts: the host tokenizer is Hugging Face `tokenizers`' WordPiece with
BERT's normaliser and pre-tokenizer. On ASCII text BERT's rules are few
(lower-casing, whitespace, ASCII punctuation, control characters, words of
at most 100 characters) and both tokenizers apply them alike; a batch with
any non-ASCII character goes through the graph, whose tokenizer is the
reference's. `tests/serving/host_test.py` checks the ids against the graph's
on the shared data and on generated text.

What: the classifier (`label`, `probabilities`, or `score`) and the text
embedder (`embeddings`; its prompt before each text, as in the graph). The
export writes what the host needs into its manifest (`host`) and the
vocabulary beside it (`assets.extra/host_vocab.json`).
"""

import json
import os
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert.layers.bert_pack_inputs import PackTemplate

# The largest batch run here: beyond it the graphs' fixed cost is shared by
# enough rows, and the graph tokenizer runs the rows in parallel.
MAX_ROWS = 8
VOCAB_FILE = "host_vocab.json"


def classifier_spec(lower_case: bool, seq_length: int,
                    buckets: Sequence[int], string_inputs: Sequence[str],
                    labels: Optional[Sequence[str]]) -> Dict:
  """The manifest's `host` entry of a classifier export with a WordPiece
  vocabulary."""
  return dict(kind="classifier", vocab=VOCAB_FILE, lower_case=bool(lower_case),
              seq_length=int(seq_length), buckets=[int(b) for b in buckets],
              string_inputs=list(string_inputs),
              labels=None if labels is None else [str(l) for l in labels])


def embedder_spec(lower_case: bool, seq_length: int, buckets: Sequence[int],
                  prompt: str) -> Dict:
  """The manifest's `host` entry of a text-embedder export with a WordPiece
  vocabulary."""
  return dict(kind="embedder", vocab=VOCAB_FILE, lower_case=bool(lower_case),
              seq_length=int(seq_length), buckets=[int(b) for b in buckets],
              string_inputs=["text"], prompt=str(prompt))


def write_vocab(tokens: Sequence[str], folder: str) -> None:
  """The vocabulary the host tokenizer reads: its tokens in id order, a
  JSON list (a token may hold any character but a line break)."""
  with open(os.path.join(folder, VOCAB_FILE), "w", encoding="utf-8") as f:
    json.dump(list(tokens), f)


def _wordpiece(tokens: Sequence[str], lower_case: bool):
  """`tokenizers`' WordPiece with BERT's normaliser and pre-tokenizer and no
  template (the rows are packed here)."""
  from tokenizers import Tokenizer, models, normalizers, pre_tokenizers  # pylint: disable=g-import-not-at-top
  tokenizer = Tokenizer(models.WordPiece(
      {t: i for i, t in enumerate(tokens)}, unk_token="[UNK]",
      max_input_chars_per_word=100))
  tokenizer.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=lower_case,
      lowercase=lower_case)
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return tokenizer


def _truncate(lengths: List[int], budget: int) -> List[int]:
  """How many tokens of each segment to keep: google-research's
  `truncate_seq_pair` (one token at a time from the longer segment, the
  later one on ties), as the graph's packer truncates."""
  keep = list(lengths)
  while sum(keep) > budget:
    longest = max(range(len(keep)), key=lambda i: (keep[i], i))
    keep[longest] -= 1
  return keep


class HostStages:
  """A classifier's or text embedder's preprocess and postprocess in
  Python, for the `accepts`-ed batches of `bert.serving.loader.StagedServing`."""

  def __init__(self, spec: Mapping, folder: str):
    with open(os.path.join(folder, spec["vocab"]), encoding="utf-8") as f:
      tokens = json.load(f)
    self._tokenizer = _wordpiece(tokens, spec["lower_case"])
    ids = {t: i for i, t in enumerate(tokens)}
    # BERT's template: [CLS] a [SEP] b [SEP], b's type ids 1.
    self._template = PackTemplate(ids["[CLS]"], ids["[SEP]"], ids["[PAD]"])
    self._seq_length = int(spec["seq_length"])
    self._buckets = sorted(int(b) for b in spec["buckets"])
    self._names = tuple(spec["string_inputs"])
    self._kind = spec["kind"]
    if self._kind not in ("classifier", "embedder"):
      raise ValueError(f"unknown kind {self._kind!r}")
    self._prompt = str(spec.get("prompt", ""))
    labels = spec.get("labels")
    self._labels = None if labels is None else np.array(
        [l.encode("utf-8") for l in labels], dtype=object)

  def accepts(self, strings: Mapping[str, tf.Tensor]) -> Optional[
      Dict[str, List[str]]]:
    """The batch's texts when this batch runs here (1 to MAX_ROWS rows,
    ASCII only), else None."""
    texts = {}
    for name in self._names:
      values = strings[name].numpy()
      if not 0 < len(values) <= MAX_ROWS or not all(v.isascii()
                                                    for v in values):
        return None
      texts[name] = [self._prompt + v.decode("ascii") for v in values]
    if not self._prompt.isascii():
      return None
    return texts

  def preprocess(self, texts: Mapping[str, List[str]]) -> Dict[str, np.ndarray]:
    """Encoder inputs, int32 [batch, bucket], as the graph's `preprocess`."""
    segments = [[e.ids for e in self._tokenizer.encode_batch(
        texts[name], add_special_tokens=False)] for name in self._names]
    budget = self._seq_length - self._template.special_count(len(segments))
    rows = []
    for row in zip(*segments):
      keep = _truncate([len(s) for s in row], budget)
      rows.append([s[:n] for s, n in zip(row, keep)])
    longest = max(sum(len(s) for s in row) for row in rows) + \
        self._template.special_count(len(segments))
    width = next((b for b in self._buckets if b >= longest), self._seq_length)
    word_ids, mask, type_ids = (np.array(a, np.int32) for a in zip(
        *(self._template.pack(row, width) for row in rows)))
    return dict(input_word_ids=word_ids, input_mask=mask,
                input_type_ids=type_ids)

  def postprocess(self, outputs: Mapping[str, np.ndarray]) -> Dict[str, tf.Tensor]:
    """The classifier's `probabilities` and `label` (regression: `score`),
    the embedder's `embeddings`, as the graph's."""
    if self._kind == "embedder":
      return dict(embeddings=tf.constant(np.asarray(outputs["embeddings"],
                                                    np.float32)))
    logits = np.asarray(outputs["logits"], np.float32)          # [b, classes]
    if self._labels is None:
      return dict(score=tf.constant(logits[:, 0]))
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities = shifted / shifted.sum(-1, keepdims=True)
    label = self._labels[np.argmax(probabilities, -1)]
    return dict(probabilities=tf.constant(probabilities),
                label=tf.constant(label.astype(bytes), tf.string))
