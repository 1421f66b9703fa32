"""The pre-training data algorithm: token-id documents -> masked-LM/NSP instances.

The algorithm is google-research `create_pretraining_data.py`, run on token
ids instead of strings (documents are lists of sentences, each a list of ids;
`pretraining_shards` reads and tokenizes the text):
  - sentences are packed into chunks up to a target length (seq_length -
    3, or with probability `short_seq_prob` a random shorter one); a chunk
    splits at a random sentence into A and B; B is the actual continuation,
    or with probability 0.5 (always, for a one-sentence chunk) text from a
    random other document, in which case the unused sentences are put back;
  - the pair is truncated from a random end of the longer side;
  - masked_lm_prob of the tokens (at least 1, at most max_predictions_per_seq;
    [CLS]/[SEP] never) are predicted: 80% become [MASK], 10% a random vocab
    token, 10% stay; with whole-word masking a word's pieces go together.
`pretraining_records` serialises the masked instances with the reference's
feature names, dtypes and shapes, so its records and the reference's are
interchangeable.
"""

import dataclasses
import random
from typing import List

import numpy as np

from bert.data.vocab import Vocab
from bert.validation import check_bool, check_choice, check_float, check_int


# The reference script's flag names of the fields the library names
# otherwise; manifest.json records the config under the flags' names.
FLAG_NAMES = {"seq_length": "max_seq_length", "lower_case": "do_lower_case"}


SENTENCE_TASKS = ("nsp", "sop", "none")


@dataclasses.dataclass
class PretrainingDataConfig:
  """The reference script's knobs, with its defaults (its flags' names, but
  for the library's names in FLAG_NAMES)."""
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  dupe_factor: int = 10
  random_seed: int = 12345
  do_whole_word_mask: bool = False
  lower_case: bool = True
  # Instances are written through a shuffle buffer of this many records
  # (about 1 KB each at seq 128): bounded memory, whatever the corpus size.
  # Readers shuffle again (`PretrainingInputs.shuffle_buffer`, also 10,000).
  shuffle_buffer: int = 10_000
  # Input is read in blocks of whole documents of about this many sentences;
  # a block's instances (its dupe_factor passes) are made together and their
  # random next sentences come from the same block. Memory is bounded by one
  # block, whatever the corpus size.
  block_sentences: int = 20_000
  # The sentence-pair task the instances are made for: "nsp" (BERT: B is the
  # next segment or, half the time, a random one), "sop" (ALBERT's sentence
  # order: A and B consecutive, swapped half the time; google-research/albert
  # `random_next_sentence=False`) or "none" (RoBERTa's FULL-SENTENCES: one
  # segment of whole sentences read on across documents, a separator token
  # between documents, no sentence label).
  sentence_task: str = "nsp"

  def __post_init__(self):
    owner = "PretrainingDataConfig"
    # [CLS] A [SEP] B [SEP] with at least one token in each of A and B.
    check_int(owner, "seq_length", self.seq_length, minimum=5)
    check_int(owner, "max_predictions_per_seq", self.max_predictions_per_seq,
              minimum=1, maximum=self.seq_length)
    check_float(owner, "masked_lm_prob", self.masked_lm_prob, 0, 1,
                min_open=True)
    check_float(owner, "short_seq_prob", self.short_seq_prob, 0, 1)
    check_int(owner, "dupe_factor", self.dupe_factor, minimum=1)
    check_int(owner, "random_seed", self.random_seed)
    check_bool(owner, "do_whole_word_mask", self.do_whole_word_mask)
    check_bool(owner, "lower_case", self.lower_case)
    check_int(owner, "shuffle_buffer", self.shuffle_buffer, minimum=1)
    check_int(owner, "block_sentences", self.block_sentences, minimum=1)
    check_choice(owner, "sentence_task", self.sentence_task, SENTENCE_TASKS)

  def as_flags(self) -> dict:
    """The fields under the reference script's flag names."""
    return {FLAG_NAMES.get(k, k): v
            for k, v in dataclasses.asdict(self).items()}


@dataclasses.dataclass
class Instance:
  """One sentence pair, before masking (lists of the same length <= seq)."""
  tokens: List[int]          # [CLS] A [SEP] B [SEP]
  segment_ids: List[int]     # 0 for [CLS] A [SEP], 1 for B [SEP]
  is_random_next: bool


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


def mask_batch(tokens, lengths, config: PretrainingDataConfig, vocab: Vocab,
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
    tokens: int32 [n, seq_length], padded with 0; modified in place.
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
                                   vocab: Vocab, rng: random.Random):
  """The reference's instance construction for one document (masking is
  applied afterwards, to many instances at once, by `mask_batch`)."""
  document = documents[document_index]
  max_num_tokens = config.seq_length - 3
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
        sop = config.sentence_task == "sop"
        # (rng is drawn in the reference's order for each task: BERT's draw
        # decides a random B; ALBERT's, for a chunk of two or more segments,
        # a swap.)
        if len(current_chunk) == 1 or (not sop and rng.random() < 0.5):
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
        elif sop and rng.random() < 0.5:
          # Sentence order: the two consecutive parts, swapped.
          is_random_next = True
          tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
          tokens_a, tokens_b = tokens_b, tokens_a
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


def create_full_sentence_instances(documents, config: PretrainingDataConfig,
                                   vocab: Vocab):
  """RoBERTa's FULL-SENTENCES instances of `documents` (in order): whole
  sentences read on across document boundaries, a separator between
  documents, until the next sentence would pass seq_length - 2 tokens; one
  segment, `<s> ... </s>`, no sentence label. A sentence longer than a
  whole instance is cut into instance-long pieces."""
  budget = config.seq_length - 2
  instances, chunk = [], []

  def emit():
    while chunk and chunk[-1] == vocab.sep:     # no separator at the end
      chunk.pop()
    if chunk:
      tokens = [vocab.cls] + chunk + [vocab.sep]
      instances.append(Instance(tokens, [0] * len(tokens), False))
    chunk.clear()

  for d, document in enumerate(documents):
    if d and chunk:
      if len(chunk) + 1 >= budget:
        emit()
      else:
        chunk.append(vocab.sep)                 # between documents
    for sentence in document:
      while len(sentence) > budget:             # longer than an instance
        emit()
        chunk.extend(sentence[:budget])
        sentence = sentence[budget:]
        emit()
      if len(chunk) + len(sentence) > budget:
        emit()
      chunk.extend(sentence)
  emit()
  return instances
