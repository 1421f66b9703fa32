"""Pre-training data runs: text files -> TFRecord shards and a manifest.

Input: text files of one sentence per line, documents separated by blank
lines. The documents of all inputs are dealt round-robin into `num_shards`
shards; each shard is created independently (its own seeded RNG) and
written to its own file, so the output depends only on the inputs, the flags
and the shard count, and shards run in parallel processes.

Every shard streams: its process reads the inputs itself, keeping only its
own documents, in blocks of whole documents of about
`config.block_sentences` sentences; a block is tokenized, its instances made
(`dupe_factor` passes; random next sentences from the same block), masked and
written before the next block is read. Instances are shuffled within a
bounded buffer. So memory is bounded by one block and the buffer, whatever
the corpus size. `manifest.json`, written last, lists the run's shards and
their fingerprints; readers (`bert.data.pretraining_manifest.check_manifests`)
refuse a TFRecord beside it that it does not list, or that differs from its
fingerprint. The run's folder (or each `--output_file`) takes its place
whole once every shard is written; what an existing one may hold to be
replaced: `bert.data.pretraining_output`.
"""

import contextlib
import dataclasses
import glob
import os
import random
import time
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from bert import io as _io
from bert.data import record_integrity
from bert.data._workers import worker_pool
from bert.data.errors import DataError
from bert.data.pretraining_data import (Instance, PretrainingDataConfig,
                                        create_full_sentence_instances,
                                        create_instances_from_document)
from bert.data.pretraining_manifest import (MANIFEST, check_manifests,  # noqa: F401
                                            write_manifest)
from bert.data.pretraining_output import (check_output_dir,
                                          check_output_files, replaceable,
                                          shard_names)
from bert.data.pretraining_records import encode_instances
from bert.data.vocab import Vocab
from bert.layers.vocabulary import Vocabulary
from bert.validation import check_int


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


@dataclasses.dataclass
class ShardSummary:
  """What one shard's creation made (`total`: all shards'); the histogram
  counts instances by length, in buckets of 16 tokens (key: bucket end)."""
  shard: int
  documents: int = 0
  instances: int = 0
  tokens: int = 0
  padding: int = 0
  masked: int = 0
  random_next: int = 0
  length_histogram: Dict[int, int] = dataclasses.field(default_factory=dict)
  seconds: float = 0.0
  file: dict = dataclasses.field(default_factory=dict)   # its fingerprint


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


def shard_documents(files: Sequence[str], shard: int,
                    num_shards: int) -> Iterator[List[str]]:
  """The documents dealt to `shard` (every `num_shards`-th of all inputs,
  in order), read lazily."""
  index = 0
  for path in files:
    if os.path.getsize(path) == 0:
      continue
    for document in read_documents(path):
      if index % num_shards == shard:
        yield document
      index += 1


def document_blocks(documents: Iterator[List[str]],
                    block_sentences: int) -> Iterator[List[List[str]]]:
  """Whole documents grouped into blocks of about `block_sentences` lines."""
  block: List[List[str]] = []
  size = 0
  for document in documents:
    block.append(document)
    size += len(document)
    if size >= block_sentences:
      yield block
      block, size = [], 0
  if block:
    yield block


def create_shard(files: Sequence[str], shard: int, num_shards: int,
                 output_path: str, vocab_file: str,
                 config: PretrainingDataConfig) -> ShardSummary:
  """Streams one shard's documents from `files` and writes its instances."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  vocabulary = Vocabulary.from_file(vocab_file)
  # Byte-level BPE has no casing: do_lower_case (True by default, as the
  # reference's) does not apply to it.
  tokenizer = Tokenizer(vocabulary=vocabulary, lower_case=(
      config.lower_case if vocabulary.has_casing else None))
  vocab = Vocab(vocabulary, vocab_file)
  # Same seed per (random_seed, shard): independent of process scheduling.
  rng = random.Random(config.random_seed * 1_000_003 + shard)
  np_rng = np.random.default_rng([config.random_seed, shard])
  summary = ShardSummary(shard=shard)
  buffer: List[bytes] = []
  pending: List[Instance] = []

  def encode_pending():
    records, lengths, count = encode_instances(pending, config, vocab, np_rng)
    summary.instances += len(records)
    summary.tokens += int(lengths.sum())
    summary.padding += int((config.seq_length - lengths).sum())
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
    for block in document_blocks(shard_documents(files, shard, num_shards),
                                 config.block_sentences):
      documents = _tokenize_block(block, tokenizer)
      summary.documents += len(documents)
      rng.shuffle(documents)
      for _ in range(config.dupe_factor):
        if config.sentence_task == "none":
          # One pass reads the block's documents on, in this pass's order.
          rng.shuffle(documents)
          made = create_full_sentence_instances(documents, config, vocab)
          for first in range(0, len(made), 4096):
            pending.extend(made[first:first + 4096])
            encode_pending()
            if len(buffer) >= config.shuffle_buffer:
              flush(writer, config.shuffle_buffer // 2)
          continue
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


def _tokenize_block(block: List[List[str]], tokenizer) -> List[List[List[int]]]:
  """Documents of text lines -> documents of token-id sentences (empty
  sentences and documents dropped)."""
  ids = tokenizer.tokenize([line for doc in block for line in doc])
  documents, k = [], 0
  for doc in block:
    sentences = [ids[k + j].tolist() for j in range(len(doc))]
    k += len(doc)
    sentences = [s for s in sentences if s]
    if sentences:
      documents.append(sentences)
  return documents


def _run_shard(args):
  """Creates a shard and takes its fingerprint (for the manifest: in the
  shard's process, as it is a read of the whole file)."""
  summary = create_shard(*args)
  summary.file = record_integrity.fingerprint(args[3],
                                              records=summary.instances)
  return summary


def create_pretraining_data(input_spec: str, output_dir: Optional[str],
                            vocab_file: str, config: PretrainingDataConfig,
                            num_shards: int = 1, num_processes: int = 1,
                            log=print, overwrite: bool = False,
                            output_files: Optional[Sequence[str]] = None
                            ) -> List[ShardSummary]:
  """Creates `num_shards` TFRecord files in `output_dir` using processes,
  and `manifest.json` listing them.

  The folder appears whole (shards and manifest) or not at all
  (`bert.data.pretraining_output`): an existing one is refused if it holds
  an earlier run, since a reader's `output_dir/*.tfrecord` would mix them
  in, unless `overwrite`: then it is replaced whole once the new run is
  written. A folder holding anything else (a user's files) is refused.

  `output_files` (google-research's `--output_file=a,b`) names the files
  instead, one shard each (`output_dir` None): they are replaced if they
  exist, as the reference does, and no manifest is written. Each file
  appears whole (written beside it, then renamed) or not at all.
  """
  owner = "create_pretraining_data"
  check_int(owner, "num_shards", num_shards, minimum=1)
  check_int(owner, "num_processes", num_processes, minimum=1)
  if (output_dir is None) == (output_files is None):
    raise ValueError(f"{owner}: give output_dir or output_files, not both")
  files = expand_inputs(input_spec)
  for path in files:
    if os.path.getsize(path) == 0:
      log(f"warning: {path} is empty; skipped")
  if all(os.path.getsize(path) == 0 for path in files):
    raise DataError(f"no text in {', '.join(files)}: every input file is "
                    "empty")
  Vocab.from_file(vocab_file)   # checked before any writing

  def shards(paths):   # the shards, written to `paths`
    return _write_shards([(files, i, len(paths), path, vocab_file, config)
                          for i, path in enumerate(paths)], num_processes, log)

  if output_files is not None:
    outputs = check_output_files(output_files, num_shards)
    with contextlib.ExitStack() as stack:
      # Renamed into place together, once every shard is written.
      return shards([stack.enter_context(_io.atomic_file(path, "wb")).name
                     for path in outputs])
  earlier = check_output_dir(output_dir, overwrite)
  names = shard_names(num_shards)
  what = "a pre-training data run" if overwrite else "an empty folder"
  with _io.atomic_folder(output_dir, replaceable(overwrite), what) as tmp:
    summaries = shards([os.path.join(tmp, name) for name in names])
    write_manifest(tmp, names, summaries, config)   # the run is complete
  if earlier:
    log(f"--overwrite: replaced the earlier run in {output_dir} "
        f"({len(earlier)} files)")
  return summaries


def _write_shards(jobs, num_processes, log) -> List[ShardSummary]:
  """Runs the shard jobs; their summaries in shard order. A run of no
  words is an error (raised before its outputs take their places)."""
  summaries = []
  if num_processes > 1:
    # Its workers end with this process: none outlives a killed run, to
    # write into the temp files a later run removes.
    with worker_pool(num_processes) as pool:
      for summary in pool.imap_unordered(_run_shard, jobs):
        log(f"shard {summary.shard}: {summary.instances} instances in "
            f"{summary.seconds:.1f} s")
        summaries.append(summary)
  else:
    for job in jobs:
      summary = _run_shard(job)
      log(f"shard {summary.shard}: {summary.instances} instances in "
          f"{summary.seconds:.1f} s")
      summaries.append(summary)
  if not any(s.documents for s in summaries):
    files = jobs[0][0]
    raise DataError(f"no text in {', '.join(files)}: no line holds a word")
  return sorted(summaries, key=lambda s: s.shard)
