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
import os
import random
import time
from typing import Dict, Iterator, List, Sequence

import numpy as np

FEATURE_SPEC_NAMES = ("input_ids", "input_mask", "segment_ids",
                      "masked_lm_positions", "masked_lm_ids",
                      "masked_lm_weights", "next_sentence_labels")


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


@dataclasses.dataclass
class Instance:
  tokens: List[int]          # with [CLS]/[SEP], masking applied
  segment_ids: List[int]
  masked_lm_positions: List[int]
  masked_lm_labels: List[int]
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
        raise ValueError(f"{path}:{number}: not valid UTF-8 ({e.reason} at "
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
        raise ValueError(f"vocab file {vocab_file} has no {needed} token, which "
                         "pre-training data needs")
    self.cls, self.sep, self.mask = index["[CLS]"], index["[SEP]"], index["[MASK]"]
    self.size = len(tokens)
    self.is_continuation = np.array([t.startswith("##") for t in tokens])


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Trims the longer list, from a random end, until the pair fits."""
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del trunc[0]
    else:
      trunc.pop()


def create_masked_lm_predictions(tokens, config: PretrainingDataConfig,
                                 vocab: _Vocab, rng: random.Random):
  """Masks tokens in place; returns (positions, labels) sorted by position."""
  candidates: List[List[int]] = []
  for i, token in enumerate(tokens):
    if token in (vocab.cls, vocab.sep):
      continue
    if (config.do_whole_word_mask and candidates
        and vocab.is_continuation[token]):
      candidates[-1].append(i)
    else:
      candidates.append([i])
  rng.shuffle(candidates)
  num_to_predict = min(config.max_predictions_per_seq,
                       max(1, int(round(len(tokens) * config.masked_lm_prob))))
  original = list(tokens)
  masked = []
  covered = set()
  for index_set in candidates:
    if len(masked) >= num_to_predict:
      break
    if len(masked) + len(index_set) > num_to_predict:
      continue
    if any(i in covered for i in index_set):
      continue
    for i in index_set:
      covered.add(i)
      if rng.random() < 0.8:
        replacement = vocab.mask
      elif rng.random() < 0.5:
        replacement = original[i]
      else:
        replacement = rng.randint(0, vocab.size - 1)
      tokens[i] = replacement
      masked.append((i, original[i]))
  masked.sort()
  return [i for i, _ in masked], [label for _, label in masked]


def create_instances_from_document(documents, document_index,
                                   config: PretrainingDataConfig,
                                   vocab: _Vocab, rng: random.Random):
  """The reference's instance construction for one document."""
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
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        if tokens_a and tokens_b:
          tokens = [vocab.cls] + tokens_a + [vocab.sep] + tokens_b + [vocab.sep]
          segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
          positions, labels = create_masked_lm_predictions(tokens, config,
                                                           vocab, rng)
          instances.append(Instance(tokens, segment_ids, positions, labels,
                                    is_random_next))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def _int_feature(values):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def instance_to_example_bytes(instance: Instance,
                              config: PretrainingDataConfig) -> bytes:
  """The reference's tf.train.Example, serialised."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  n = len(instance.tokens)
  pad = config.max_seq_length - n
  p = len(instance.masked_lm_positions)
  ppad = config.max_predictions_per_seq - p
  features = collections.OrderedDict(
      input_ids=_int_feature(instance.tokens + [0] * pad),
      input_mask=_int_feature([1] * n + [0] * pad),
      segment_ids=_int_feature(instance.segment_ids + [0] * pad),
      masked_lm_positions=_int_feature(instance.masked_lm_positions + [0] * ppad),
      masked_lm_ids=_int_feature(instance.masked_lm_labels + [0] * ppad),
      masked_lm_weights=_float_feature([1.0] * p + [0.0] * ppad),
      next_sentence_labels=_int_feature([1 if instance.is_random_next else 0]))
  return tf.train.Example(
      features=tf.train.Features(feature=features)).SerializeToString()


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
  rng.shuffle(documents)
  summary = ShardSummary(shard=shard, documents=len(documents))
  buffer: List[bytes] = []

  def flush(writer, keep):
    rng.shuffle(buffer)
    while len(buffer) > keep:
      writer.write(buffer.pop())

  with tf.io.TFRecordWriter(output_path) as writer:
    for _ in range(config.dupe_factor):
      for index in range(len(documents)):
        for instance in create_instances_from_document(documents, index,
                                                       config, vocab, rng):
          n = len(instance.tokens)
          summary.instances += 1
          summary.tokens += n
          summary.padding += config.max_seq_length - n
          summary.masked += len(instance.masked_lm_positions)
          summary.random_next += instance.is_random_next
          bucket = (n - 1) // 16 * 16 + 16
          summary.length_histogram[bucket] = summary.length_histogram.get(bucket, 0) + 1
          buffer.append(instance_to_example_bytes(instance, config))
          if len(buffer) >= config.shuffle_buffer:
            flush(writer, config.shuffle_buffer // 2)
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
    raise ValueError(f"no text in {', '.join(files)}: every input file is empty")
  return shards


def _run_shard(args):
  return create_shard(*args)


def create_pretraining_data(input_spec: str, output_dir: str, vocab_file: str,
                            config: PretrainingDataConfig, num_shards: int = 1,
                            num_processes: int = 1, log=print) -> List[ShardSummary]:
  """Creates `num_shards` TFRecord files in `output_dir` using processes."""
  files = expand_inputs(input_spec)
  for path in files:
    if os.path.getsize(path) == 0:
      log(f"warning: {path} is empty; skipped")
  shards = shard_documents(files, num_shards)
  os.makedirs(output_dir, exist_ok=True)
  jobs = [(docs, i, os.path.join(output_dir,
                                 f"pretrain-{i:05d}-of-{num_shards:05d}.tfrecord"),
           vocab_file, config) for i, docs in enumerate(shards)]
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
  return sorted(summaries, key=lambda s: s.shard)


def feature_spec(max_seq_length: int, max_predictions_per_seq: int):
  """The reference's parsing spec (run_pretraining.input_fn_builder)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {
      "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }


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
