"""Small batches without TensorFlow's fixed cost.

A request of one short text spends most of its time in the calls of the
SavedModel's `preprocess` and `postprocess` graphs, not in the network
(bench/SERVING_RUNS.md). Where the network runs outside them (TFLite,
OpenVINO), a batch of at most `MAX_ROWS` rows is tokenized, packed and
post-processed here in NumPy instead, and the answers are the graphs'.

The tokenizer is the graph's (`bert.serving.host_tokenizer`: its
normalisation table, written by the export beside the vocabulary), so any
text runs here; `tests/serving/host_test.py` checks the encoder inputs and
the answers against the graphs' on the shared data and generated Unicode.

What: the classifier (`label`, `probabilities`, or `score`), the text
embedder (`embeddings`; its prompt before each text, as in the graph) and
the span labeler (`answer`, `score`, `start`, `end`; its windows and answer
search in `bert.serving.host_squad`). The export writes what the host needs
into its manifest (`host`) and the files beside it (`assets.extra`).
"""

import dataclasses
import json
import os
import zipfile
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert.data.squad_config import SquadConfig
from bert.features import ENCODER_INPUTS
from bert.layers.bert_pack_inputs import PackTemplate
from bert.serving import host_squad
from bert.serving.host_squad import WINDOW_KEYS
from bert.serving.host_tokenizer import HostWordPiece

# The largest batch run here: beyond it the graphs' fixed cost is shared by
# enough rows, and the graph tokenizer runs the rows in parallel.
MAX_ROWS = 8
VOCAB_FILE = "host_vocab.json"
TABLE_FILE = "host_normalization.npz"
KINDS = ("classifier", "embedder", "span_labeler")


def _spec(kind: str, template: PackTemplate, seq_length: int,
          buckets: Sequence[int], string_inputs: Sequence[str], **fields
          ) -> Dict:
  return dict(kind=kind, vocab=VOCAB_FILE, normalization=TABLE_FILE,
              template=dataclasses.asdict(template), seq_length=int(seq_length),
              buckets=[int(b) for b in buckets],
              string_inputs=list(string_inputs), **fields)


def classifier_spec(template: PackTemplate, seq_length: int,
                    buckets: Sequence[int], string_inputs: Sequence[str],
                    labels: Optional[Sequence[str]]) -> Dict:
  """The manifest's `host` entry of a classifier export (labels None: a
  regression's `score`)."""
  return _spec("classifier", template, seq_length, buckets, string_inputs,
               labels=None if labels is None else [str(l) for l in labels])


def embedder_spec(template: PackTemplate, seq_length: int,
                  buckets: Sequence[int], prompt: str) -> Dict:
  """The manifest's `host` entry of a text-embedder export."""
  return _spec("embedder", template, seq_length, buckets, ["text"],
               prompt=str(prompt))


def span_labeler_spec(template: PackTemplate, squad: SquadConfig,
                      buckets: Sequence[int]) -> Dict:
  """The manifest's `host` entry of a span labeler (SQuAD) export."""
  return _spec("span_labeler", template, squad.seq_length, buckets,
               ["question", "context"], squad=dataclasses.asdict(squad))


def write_files(tokenizer, folder: str) -> None:
  """What the host tokenizer reads, from the graph's `BertTokenizer`: the
  vocabulary (a JSON list of its tokens in id order; a token may hold any
  character but a line break) and its normalisation table."""
  with open(os.path.join(folder, VOCAB_FILE), "w", encoding="utf-8") as f:
    json.dump(list(tokenizer.vocab), f)
  np.savez_compressed(os.path.join(folder, TABLE_FILE),
                      table=tokenizer.codepoint_table)


def _strings(value) -> Optional[List[str]]:
  """A 1-D batch of str or UTF-8 bytes as a list of str, else None (the
  caller's general path then checks it and says what is wrong)."""
  if isinstance(value, tf.Tensor):
    if value.dtype != tf.string or value.shape.rank != 1:
      return None
    value = value.numpy()
  if isinstance(value, np.ndarray):
    if value.ndim != 1:
      return None
    value = value.tolist()
  if not isinstance(value, (list, tuple)):
    return None
  out = []
  for v in value:
    try:
      if isinstance(v, bytes):
        v = v.decode("utf-8")
      elif not isinstance(v, str):
        return None
      elif not v.isascii():
        v.encode("utf-8")
    except UnicodeError:     # invalid UTF-8, or a lone surrogate
      return None
    out.append(v)
  return out


class HostStages:
  """An export's preprocess and postprocess in NumPy, for the `accepts`-ed
  batches of `bert.serving.loader.StagedServing`."""

  def __init__(self, spec: Mapping, folder: str):
    self._kind = spec["kind"]
    if self._kind not in KINDS:
      raise ValueError(f"unknown kind {self._kind!r} ({', '.join(KINDS)})")
    with open(os.path.join(folder, spec["vocab"]), encoding="utf-8") as f:
      tokens = json.load(f)
    try:
      with np.load(os.path.join(folder, spec["normalization"]),
                   allow_pickle=False) as data:
        table = data["table"]
    except zipfile.BadZipFile as e:
      raise ValueError(f"{spec['normalization']}: not a NumPy .npz file "
                       f"({e})") from None
    self._tokenizer = HostWordPiece(tokens, table)
    self._template = PackTemplate(**spec["template"])
    self._seq_length = int(spec["seq_length"])
    self._buckets = sorted(int(b) for b in spec["buckets"])
    self._names = tuple(spec["string_inputs"])
    self._prompt = str(spec.get("prompt", ""))
    self._squad = (SquadConfig(**spec["squad"])
                   if self._kind == "span_labeler" else None)
    labels = spec.get("labels")
    self._labels = None if labels is None else np.array(
        [l.encode("utf-8") for l in labels], dtype=object)
    self._label_tensors = [tf.constant([l], tf.string)
                           for l in (labels or ())]

  def accepts(self, strings: Mapping) -> Optional[Dict[str, List[str]]]:
    """The batch's texts (name -> list of str) when it runs here: the
    export's inputs, each a 1-D batch of 1 to MAX_ROWS strings (str or UTF-8
    bytes: a list, NumPy array or string tensor), all of one size; else
    None."""
    if set(strings) != set(self._names):
      return None
    texts = {}
    for name in self._names:
      values = _strings(strings[name])
      if values is None or not 0 < len(values) <= MAX_ROWS:
        return None
      texts[name] = [self._prompt + v for v in values] if self._prompt else values
    if len({len(v) for v in texts.values()}) != 1:
      return None
    return texts

  def preprocess(self, texts: Mapping[str, List[str]]) -> Dict:
    """The encoder inputs, int32 [rows, bucket], as the graph's `preprocess`
    (a span labeler's rows are its windows), and what `postprocess`
    needs."""
    if self._kind == "span_labeler":
      return self._windows(texts["question"], texts["context"])
    segments = [self._tokenizer.tokenize(texts[name]) for name in self._names]
    budget = self._seq_length - self._template.special_count(len(segments))
    rows = []
    for row in zip(*segments):
      keep = _truncate([len(s) for s in row], budget)
      rows.append([s[:n] for s, n in zip(row, keep)])
    longest = max(sum(len(s) for s in row) for row in rows) + \
        self._template.special_count(len(segments))
    word_ids, mask, type_ids = (np.array(a, np.int32) for a in zip(
        *(self._template.pack(row, self._bucket(longest)) for row in rows)))
    return dict(input_word_ids=word_ids, input_mask=mask,
                input_type_ids=type_ids)

  def _bucket(self, longest: int) -> int:
    """The length the graph cuts a batch to (`stages.cut_to_bucket`)."""
    return next((b for b in self._buckets if b >= longest), self._seq_length)

  def _windows(self, questions: List[str], contexts: List[str]) -> Dict:
    pieces = [self._tokenizer.tokenize_with_offsets(c) for c in contexts]
    t = self._template
    windows = host_squad.window_inputs(
        [np.array(q, np.int64) for q in self._tokenizer.tokenize(questions)],
        [np.array(p[0], np.int64) for p in pieces], self._squad,
        t.start_of_sequence_id, t.end_of_segment_id, t.padding_id,
        t.separators_between_segments, t.segment_type_ids)
    width = self._bucket(int(windows["input_mask"].sum(1).max()))
    features = {k: windows[k][:, :width] for k in ENCODER_INPUTS}
    features.update({k: windows[k] for k in WINDOW_KEYS})
    features.update(piece_start=[p[1] for p in pieces],
                    piece_end=[p[2] for p in pieces],
                    context=[c.encode("utf-8") for c in contexts])
    return features

  def postprocess(self, features: Mapping, outputs: Mapping[str, np.ndarray]
                  ) -> Dict[str, tf.Tensor]:
    """The answers, as the graph's `postprocess` gives them."""
    if self._kind == "embedder":
      return dict(embeddings=tf.constant(np.asarray(outputs["embeddings"],
                                                    np.float32)))
    if self._kind == "span_labeler":
      return self._answers(features, outputs)
    logits = np.asarray(outputs["logits"], np.float32)          # [b, classes]
    if self._labels is None:
      return dict(score=tf.constant(logits[:, 0]))
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities = shifted / shifted.sum(-1, keepdims=True)
    best = np.argmax(probabilities, -1)
    if len(best) == 1:     # one request: its label's tensor, made once
      label = self._label_tensors[best[0]]
    else:
      label = tf.constant(self._labels[best].astype(bytes), tf.string)
    return dict(probabilities=tf.constant(probabilities), label=label)

  def _answers(self, features: Mapping, outputs: Mapping[str, np.ndarray]
               ) -> Dict[str, tf.Tensor]:
    contexts = features["context"]
    spans = host_squad.best_spans(
        np.asarray(outputs["start_logits"], np.float32),
        np.asarray(outputs["end_logits"], np.float32),
        {k: features[k] for k in WINDOW_KEYS}, len(contexts), self._squad)
    start, end = host_squad.answer_byte_offsets(
        spans, features["piece_start"], features["piece_end"])
    answer = [c[s:e] for c, s, e in zip(contexts, start, end)]
    score = np.where(spans["answered"], spans["score"], 0.0).astype(np.float32)
    return dict(answer=tf.constant(answer, tf.string), score=tf.constant(score),
                start=tf.constant(start, tf.int64), end=tf.constant(end, tf.int64))


def _truncate(lengths: List[int], budget: int) -> List[int]:
  """How many tokens of each segment to keep: google-research's
  `truncate_seq_pair` (one token at a time from the longer segment, the
  later one on ties), as the graph's packer truncates."""
  keep = list(lengths)
  while sum(keep) > budget:
    longest = max(range(len(keep)), key=lambda i: (keep[i], i))
    keep[longest] -= 1
  return keep
