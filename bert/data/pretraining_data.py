"""Pre-training data creation: text -> masked-LM + next-sentence TFRecords.

The algorithm is google-research `create_pretraining_data.py`, run on token
ids instead of strings:
  - documents are runs of non-empty lines (one sentence per line), separated
    by blank lines;
  - sentences are packed into chunks up to a target length (max_seq_length -
    3, or with probability `short_seq_prob` a random shorter one); a chunk
    splits at a random sentence into A and B; B is the actual continuation,
    or with probability 0.5 (always, for a one-sentence chunk) text from a
    random other document, in which case the unused sentences are put back;
  - the pair is truncated from a random end of the longer side;
  - masked_lm_prob of the tokens (at least 1, at most max_predictions_per_seq;
    [CLS]/[SEP] never) are predicted: 80% become [MASK], 10% a random vocab
    token, 10% stay; with whole-word masking a word's pieces go together.
Records carry the reference feature names, dtypes and shapes, so they and the
reference's are interchangeable.

Sharding: the documents of all inputs are dealt round-robin into
`num_shards` shards; each shard is created independently (its own seeded
RNG; random next sentences come from the same shard) and written to its own
file, so the output depends only on the inputs, the flags and the shard count,
and shards run in parallel processes. Memory holds one shard's token ids, never
all `dupe_factor` copies: instances are written as they are made, and shuffled
within a bounded buffer.
"""

import collections
import dataclasses
import glob
import itertools
import json
import os
import random
import time
from typing import Dict, Iterator, List, Sequence

import numpy as np

from bert.data.errors import DataError
from bert.features import RECORD_FEATURES
from bert.validation import check_bool, check_float, check_int


@dataclasses.dataclass
class PretrainingDataConfig:
  """The reference script's knobs, with its defaults."""
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  dupe_factor: int = 10
  random_seed: int = 12345
  do_whole_word_mask: bool = False
  do_lower_case: bool = True
  shuffle_buffer: int = 100_000

  def __post_init__(self):
    owner = "PretrainingDataConfig"
    # [CLS] A [SEP] B [SEP] with at least one token in each of A and B.
    check_int(owner, "max_seq_length", self.max_seq_length, minimum=5)
    check_int(owner, "max_predictions_per_seq", self.max_predictions_per_seq,
              minimum=1, maximum=self.max_seq_length)
    check_float(owner, "masked_lm_prob", self.masked_lm_prob, 0, 1,
                min_open=True)
    check_float(owner, "short_seq_prob", self.short_seq_prob, 0, 1)
    check_int(owner, "dupe_factor", self.dupe_factor, minimum=1)
    check_int(owner, "random_seed", self.random_seed)
    check_bool(owner, "do_whole_word_mask", self.do_whole_word_mask)
    check_bool(owner, "do_lower_case", self.do_lower_case)
    check_int(owner, "shuffle_buffer", self.shuffle_buffer, minimum=1)


@dataclasses.dataclass
class Instance:
  tokens: List[int]          # [CLS] A [SEP] B [SEP], before masking
  segment_ids: List[int]
  is_random_next: bool


def expand_inputs(spec: str) -> List[str]:
  """Comma-separated files and globs -> sorted file list; errors name misses."""
  files = []
  for part in [p.strip() for p in spec.split(",") if p.strip()]:
    matches = sorted(glob.glob(part))
    if not matches:
      raise FileNotFoundError(f"input {part!r} matches no file")
    files += matches
  return files


def read_documents(path: str) -> Iterator[List[str]]:
  """Documents (lists of non-empty lines) of one text file.

  Raises ValueError naming the file and line for bytes that are not UTF-8.
  """
  document: List[str] = []
  with open(path, "rb") as f:
    for number, raw in enumerate(f, start=1):
      try:
        line = raw.decode("utf-8").strip()
      except UnicodeDecodeError as e:
        raise DataError(f"{path}:{number}: not valid UTF-8 ({e.reason} at "
                        f"byte {e.start})") from None
      if line:
        document.append(line)
      elif document:
        yield document
        document = []
  if document:
    yield document


class _Vocab:
  """What masking needs to know about the vocabulary, as ids."""

  def __init__(self, tokens: Sequence[str], vocab_file: str):
    index = {t: i for i, t in enumerate(tokens)}
    for needed in ("[CLS]", "[SEP]", "[MASK]"):
      if needed not in index:
        raise DataError(f"vocab file {vocab_file} has no {needed} token, "
                        "which pre-training data needs")
    self.cls, self.sep, self.mask = index["[CLS]"], index["[SEP]"], index["[MASK]"]
    self.size = len(tokens)
    self.is_continuation = np.array([t.startswith("##") for t in tokens])


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """The reference's truncation, in closed form; returns the new (a, b).

  The reference removes one token at a time from the longer list (the
  second on ties), from its front or back with probability 1/2 each, until
  the pair fits. The final lengths follow directly; the number of tokens
  removed from the front of a list is then Binomial(removed, 1/2), which is
  what the coin flips add up to.
  """
  la, lb = len(tokens_a), len(tokens_b)
  if la + lb <= max_num_tokens:
    return tokens_a, tokens_b
  shorter = min(la, lb)
  if max_num_tokens - shorter >= shorter:
    ka, kb = ((max_num_tokens - lb, lb) if la > lb else (la, max_num_tokens - la))
  else:
    ka, kb = (max_num_tokens + 1) // 2, max_num_tokens // 2

  def cut(tokens, keep):
    removed = len(tokens) - keep
    front = bin(rng.getrandbits(removed)).count("1") if removed else 0
    return tokens[front:front + keep]

  return cut(tokens_a, ka), cut(tokens_b, kb)


def mask_batch(tokens, lengths, config: PretrainingDataConfig, vocab: _Vocab,
               rng: np.random.Generator):
  """Masks a batch of instances at once, with the reference's rules.

  Per instance: num_to_predict = min(max_predictions_per_seq, max(1,
  round(length * masked_lm_prob))) ([CLS]/[SEP] counted in the length, as
  the reference does); candidate words (single pieces, or with whole-word
  masking a piece and its "##" continuations, [CLS]/[SEP] skipped) are visited
  in random order and taken while they fit, skipping those that would exceed
  the count; each chosen position becomes [MASK] (80%), stays (10%) or becomes
  a random vocab id (10%).

  Args:
    tokens: int32 [n, max_seq_length], padded with 0; modified in place.
    lengths: int [n] real lengths.
  Returns:
    positions, labels: int32 [n, max_predictions_per_seq] (0-padded), and
    count: int [n] predictions per instance.
  """
  n, width = tokens.shape
  columns = np.arange(width)[np.newaxis, :]
  valid = columns < lengths[:, np.newaxis]
  special = (tokens == vocab.cls) | (tokens == vocab.sep)
  candidate = valid & ~special
  num_to_predict = np.minimum(
      config.max_predictions_per_seq,
      np.maximum(1, np.round(lengths * config.masked_lm_prob).astype(np.int64)))
  if config.do_whole_word_mask:
    # A candidate starts a new word unless it is a "##" continuation that
    # follows an earlier candidate in the same instance.
    starts = candidate & ~(vocab.is_continuation[tokens]
                           & (np.cumsum(candidate, axis=1) > 1))
  else:
    starts = candidate
  word = np.cumsum(starts, axis=1) - 1                 # word index per token
  word = np.where(candidate, word, -1)
  num_words = starts.sum(axis=1)
  max_words = max(int(num_words.max()), 1)
  rows = np.repeat(np.arange(n), width)
  word_length = np.zeros((n, max_words), np.int64)
  np.add.at(word_length, (rows[candidate.ravel()], word[candidate]), 1)
  # Visit words in random order; take each that still fits.
  keys = rng.random((n, max_words))
  keys[np.arange(max_words)[np.newaxis, :] >= num_words[:, np.newaxis]] = np.inf
  order = np.argsort(keys, axis=1)
  taken = np.zeros((n, max_words), bool)
  count = np.zeros(n, np.int64)
  for k in range(max_words):
    length_k = word_length[np.arange(n), order[:, k]]
    fits = (length_k > 0) & (count + length_k <= num_to_predict)
    taken[np.arange(n)[fits], order[fits, k]] = True
    count += np.where(fits, length_k, 0)
  chosen = candidate & np.take_along_axis(taken, np.maximum(word, 0), axis=1)
  # 80% [MASK], 10% unchanged, 10% random id.
  draw = rng.random((n, width))
  random_ids = rng.integers(0, vocab.size, size=(n, width))
  labels_full = tokens.copy()
  tokens[chosen & (draw < 0.8)] = vocab.mask
  replace = chosen & (draw >= 0.9)
  tokens[replace] = random_ids[replace]
  # Positions in ascending order, padded.
  p = config.max_predictions_per_seq
  order = np.argsort(~chosen, axis=1, kind="stable")[:, :p]
  has = np.take_along_axis(chosen, order, axis=1)
  positions = np.where(has, order, 0).astype(np.int32)
  labels = np.where(has, np.take_along_axis(labels_full, order, axis=1),
                    0).astype(np.int32)
  return positions, labels, chosen.sum(axis=1)


def create_instances_from_document(documents, document_index,
                                   config: PretrainingDataConfig,
                                   vocab: _Vocab, rng: random.Random):
  """The reference's instance construction for one document (masking is
  applied afterwards, to many instances at once, by `mask_batch`)."""
  document = documents[document_index]
  max_num_tokens = config.max_seq_length - 3
  target_seq_length = max_num_tokens
  if rng.random() < config.short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)
  instances = []
  current_chunk: List[List[int]] = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = rng.randint(1, len(current_chunk) - 1)
        tokens_a = [t for seg in current_chunk[:a_end] for t in seg]
        tokens_b: List[int] = []
        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = rng.randint(0, len(documents) - 1)
            if random_document_index != document_index:
              break
          random_document = documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
              break
          # The unused sentences go back for the next chunk.
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
        tokens_a, tokens_b = truncate_seq_pair(tokens_a, tokens_b,
                                               max_num_tokens, rng)
        if tokens_a and tokens_b:
          tokens = [vocab.cls] + tokens_a + [vocab.sep] + tokens_b + [vocab.sep]
          segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
          instances.append(Instance(tokens, segment_ids, is_random_next))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def _varint(value: int) -> bytes:
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


# Varints of every length a record field can have (a lookup is ~10x faster).
_VARINTS = [_varint(i) for i in range(1 << 16)]


def _packed_varints(matrix: np.ndarray) -> List[bytes]:
  """Each row of a non-negative int matrix (< 2**21) as packed varints."""
  v = matrix.astype(np.int64)
  if v.size and (v.min() < 0 or v.max() >= 1 << 21):
    raise ValueError("feature values must be in [0, 2**21)")
  parts = np.stack([(v & 0x7F) | np.where(v >= 1 << 7, 0x80, 0),
                    ((v >> 7) & 0x7F) | np.where(v >= 1 << 14, 0x80, 0),
                    v >> 14], axis=-1).astype(np.uint8)
  keep = np.stack([np.ones_like(v, bool), v >= 1 << 7, v >= 1 << 14], axis=-1)
  flat = parts[keep].tobytes()
  ends = np.cumsum(keep.reshape(len(v), -1).sum(axis=1))
  starts = np.concatenate([[0], ends[:-1]])
  return [flat[a:b] for a, b in zip(starts, ends)]


def _entry_prefix(name: str) -> bytes:
  """map entry key (field 1) and the value tag (field 2) of a feature."""
  key = name.encode()
  return b"\x0a" + _varint(len(key)) + key + b"\x12"


def _feature_entry(prefix: bytes, kind: bytes, payload: bytes) -> bytes:
  """One map<string, Feature> entry; kind b"\x1a" = int64_list, b"\x12" =
  float_list, each holding one packed `value` field."""
  values = b"\x0a" + _VARINTS[len(payload)] + payload
  feature = kind + _VARINTS[len(values)] + values
  entry = prefix + _VARINTS[len(feature)] + feature
  return b"\x0a" + _VARINTS[len(entry)] + entry


def encode_examples(features: Dict[str, np.ndarray]) -> List[bytes]:
  """Serialised tf.train.Examples, one per row, without building protos.

  int matrices become int64_list features (packed varints), float matrices
  float_list (packed little-endian float32). `tf.io.parse_single_example`
  reads them exactly as it reads `tf.train.Example.SerializeToString()`.
  """
  columns = []
  for name, matrix in features.items():
    prefix = _entry_prefix(name)
    if np.issubdtype(matrix.dtype, np.floating):
      rows = [r.tobytes() for r in matrix.astype("<f4")]
      columns.append([_feature_entry(prefix, b"\x12", r) for r in rows])
    else:
      columns.append([_feature_entry(prefix, b"\x1a", r)
                      for r in _packed_varints(matrix)])
  out = []
  for parts in zip(*columns):
    body = b"".join(parts)
    out.append(b"\x0a" + _VARINTS[len(body)] + body)
  return out


def encode_instances(instances: Sequence[Instance], config: PretrainingDataConfig,
                     vocab: _Vocab, rng: np.random.Generator):
  """Masks a batch of instances and serialises them; returns (records,
  lengths, prediction counts)."""
  n, width = len(instances), config.max_seq_length
  lengths = np.array([len(x.tokens) for x in instances])
  mask = (np.arange(width)[np.newaxis, :] < lengths[:, np.newaxis])
  tokens = np.zeros((n, width), np.int32)
  segments = np.zeros((n, width), np.int32)
  # Row-major boolean assignment fills each row's first `length` slots.
  tokens[mask] = np.fromiter(itertools.chain.from_iterable(
      x.tokens for x in instances), np.int32, count=int(lengths.sum()))
  segments[mask] = np.fromiter(itertools.chain.from_iterable(
      x.segment_ids for x in instances), np.int32, count=int(lengths.sum()))
  positions, labels, count = mask_batch(tokens, lengths, config, vocab, rng)
  p = config.max_predictions_per_seq
  weights = (np.arange(p)[np.newaxis, :] < count[:, np.newaxis]).astype(np.float32)
  next_sentence = np.array([[int(x.is_random_next)] for x in instances])
  records = encode_examples(collections.OrderedDict(zip(RECORD_FEATURES, (
      tokens, mask.astype(np.int32), segments, positions, labels, weights,
      next_sentence))))
  return records, lengths, count


@dataclasses.dataclass
class ShardSummary:
  shard: int
  documents: int = 0
  instances: int = 0
  tokens: int = 0
  padding: int = 0
  masked: int = 0
  random_next: int = 0
  length_histogram: Dict[int, int] = dataclasses.field(default_factory=dict)
  seconds: float = 0.0


def create_shard(documents_text: List[List[str]], shard: int, output_path: str,
                 vocab_file: str, config: PretrainingDataConfig) -> ShardSummary:
  """Tokenizes one shard's documents and writes its instances."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  tokenizer = Tokenizer(vocab_file, lower_case=config.do_lower_case)
  vocab = _Vocab(tokenizer.vocab, vocab_file)
  lines = [line for doc in documents_text for line in doc]
  ids = tokenizer.tokenize(lines)
  documents, k = [], 0
  for doc in documents_text:
    sentences = [ids[k + j].tolist() for j in range(len(doc))]
    k += len(doc)
    sentences = [s for s in sentences if s]
    if sentences:
      documents.append(sentences)
  # Same seed per (random_seed, shard): independent of process scheduling.
  rng = random.Random(config.random_seed * 1_000_003 + shard)
  np_rng = np.random.default_rng([config.random_seed, shard])
  rng.shuffle(documents)
  summary = ShardSummary(shard=shard, documents=len(documents))
  buffer: List[bytes] = []
  pending: List[Instance] = []

  def encode_pending():
    records, lengths, count = encode_instances(pending, config, vocab, np_rng)
    summary.instances += len(records)
    summary.tokens += int(lengths.sum())
    summary.padding += int((config.max_seq_length - lengths).sum())
    summary.masked += int(count.sum())
    summary.random_next += sum(x.is_random_next for x in pending)
    for bucket, number in zip(*np.unique((lengths - 1) // 16 * 16 + 16,
                                         return_counts=True)):
      summary.length_histogram[int(bucket)] = (
          summary.length_histogram.get(int(bucket), 0) + int(number))
    buffer.extend(records)
    pending.clear()

  def flush(writer, keep):
    rng.shuffle(buffer)
    while len(buffer) > keep:
      writer.write(buffer.pop())

  with tf.io.TFRecordWriter(output_path) as writer:
    for _ in range(config.dupe_factor):
      for index in range(len(documents)):
        pending.extend(create_instances_from_document(documents, index,
                                                      config, vocab, rng))
        if len(pending) >= 4096:
          encode_pending()
        if len(buffer) >= config.shuffle_buffer:
          flush(writer, config.shuffle_buffer // 2)
    if pending:
      encode_pending()
    flush(writer, 0)
  summary.seconds = time.perf_counter() - start
  return summary


def shard_documents(files: Sequence[str], num_shards: int) -> List[List[List[str]]]:
  """Deals every document of `files` round-robin into `num_shards` shards."""
  shards: List[List[List[str]]] = [[] for _ in range(num_shards)]
  count = 0
  nonempty = False
  for path in files:
    if os.path.getsize(path) == 0:
      continue
    for document in read_documents(path):
      shards[count % num_shards].append(document)
      count += 1
      nonempty = True
  if not nonempty:
    raise DataError(f"no text in {', '.join(files)}: every input file is "
                    "empty")
  return shards


def _run_shard(args):
  return create_shard(*args)


def create_pretraining_data(input_spec: str, output_dir: str, vocab_file: str,
                            config: PretrainingDataConfig, num_shards: int = 1,
                            num_processes: int = 1, log=print,
                            overwrite: bool = False) -> List[ShardSummary]:
  """Creates `num_shards` TFRecord files in `output_dir` using processes,
  then `manifest.json` listing them (written last: a folder without it
  holds an unfinished run).

  A folder that holds files of an earlier run (TFRecords, a manifest) is
  refused, since a reader's `output_dir/*.tfrecord` would mix them in; with
  `overwrite` they are deleted first.
  """
  check_int("create_pretraining_data", "num_shards", num_shards, minimum=1)
  check_int("create_pretraining_data", "num_processes", num_processes,
            minimum=1)
  files = expand_inputs(input_spec)
  for path in files:
    if os.path.getsize(path) == 0:
      log(f"warning: {path} is empty; skipped")
  from bert.layers.bert_tokenizer import read_vocab  # pylint: disable=g-import-not-at-top
  _Vocab(read_vocab(vocab_file), vocab_file)   # checked before any writing
  shards = shard_documents(files, num_shards)
  created = not os.path.exists(output_dir)
  os.makedirs(output_dir, exist_ok=True)
  _clear_earlier_run(output_dir, overwrite, log)
  jobs = [(docs, i, os.path.join(output_dir,
                                 f"pretrain-{i:05d}-of-{num_shards:05d}.tfrecord"),
           vocab_file, config) for i, docs in enumerate(shards)]
  try:
    return _write_shards(jobs, output_dir, num_processes, config, log)
  except BaseException:
    # No partial run is left where a reader could take it for data.
    for job in jobs:
      for path in (job[2], job[2] + ".tmp"):
        if os.path.exists(path):
          os.remove(path)
    if created and not os.listdir(output_dir):
      os.rmdir(output_dir)
    raise


def _write_shards(jobs, output_dir, num_processes, config, log):
  """Runs the shard jobs, then writes the manifest."""
  if num_processes > 1:
    import multiprocessing  # pylint: disable=g-import-not-at-top
    with multiprocessing.get_context("spawn").Pool(num_processes) as pool:
      summaries = []
      for summary in pool.imap_unordered(_run_shard, jobs):
        log(f"shard {summary.shard}: {summary.instances} instances in "
            f"{summary.seconds:.1f} s")
        summaries.append(summary)
  else:
    summaries = []
    for job in jobs:
      summary = _run_shard(job)
      log(f"shard {summary.shard}: {summary.instances} instances in "
          f"{summary.seconds:.1f} s")
      summaries.append(summary)
  summaries = sorted(summaries, key=lambda s: s.shard)
  _write_manifest(output_dir, [os.path.basename(job[2]) for job in jobs],
                  summaries, config)
  return summaries


MANIFEST = "manifest.json"


def _earlier_files(output_dir: str) -> List[str]:
  return sorted(f for f in os.listdir(output_dir)
                if f == MANIFEST or f.endswith((".tfrecord", ".tfrecord.tmp")))


def _clear_earlier_run(output_dir: str, overwrite: bool, log) -> None:
  earlier = _earlier_files(output_dir)
  if not earlier:
    return
  if not overwrite:
    shown = ", ".join(earlier[:3]) + (f" and {len(earlier) - 3} more"
                                      if len(earlier) > 3 else "")
    raise FileExistsError(
        f"{output_dir} holds files of an earlier run ({shown}), which a "
        f"reader of {output_dir}/*.tfrecord would mix in; pass --overwrite "
        "to delete them, or choose another --output_dir")
  for name in earlier:
    os.remove(os.path.join(output_dir, name))
  log(f"--overwrite: deleted {len(earlier)} files of an earlier run in "
      f"{output_dir}")


def _write_manifest(output_dir, names, summaries, config) -> None:
  manifest = dict(files=names,
                  instances={n: s.instances for n, s in zip(names, summaries)},
                  config=dataclasses.asdict(config))
  path = os.path.join(output_dir, MANIFEST)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=1)
  os.replace(path + ".tmp", path)


def check_manifests(files: Sequence[str]) -> None:
  """Refuses files that sit beside a `manifest.json` that does not list
  them: data of another run in the same folder."""
  by_folder = {}
  for path in files:
    by_folder.setdefault(os.path.dirname(path), []).append(path)
  for folder, paths in by_folder.items():
    manifest = os.path.join(folder, MANIFEST)
    if not os.path.exists(manifest):
      continue      # not made by bert-create-pretraining-data (or unfinished)
    try:
      with open(manifest, encoding="utf-8") as f:
        listed = set(json.load(f)["files"])
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise DataError(f"{manifest}: unreadable ({type(e).__name__}: {e})"
                      ) from None
    stray = [p for p in paths if os.path.basename(p) not in listed]
    if stray:
      raise DataError(f"{stray[0]}: not listed in {manifest} (a file of "
                      "another run?); remove it, or recreate the data with "
                      "--overwrite")



def feature_spec(max_seq_length: int, max_predictions_per_seq: int):
  """The reference's parsing spec (run_pretraining.input_fn_builder)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  widths = [max_seq_length] * 3 + [max_predictions_per_seq] * 3 + [1]
  return {name: tf.io.FixedLenFeature(
      [width], tf.float32 if name == "masked_lm_weights" else tf.int64)
          for name, width in zip(RECORD_FEATURES, widths)}


def total(summaries: Sequence[ShardSummary]) -> ShardSummary:
  """The shards' summaries added up (seconds: the slowest shard)."""
  agg = ShardSummary(shard=-1)
  for s in summaries:
    agg.documents += s.documents
    agg.instances += s.instances
    agg.tokens += s.tokens
    agg.padding += s.padding
    agg.masked += s.masked
    agg.random_next += s.random_next
    for k, v in s.length_histogram.items():
      agg.length_histogram[k] = agg.length_histogram.get(k, 0) + v
    agg.seconds = max(agg.seconds, s.seconds)
  return agg
