"""Offline tokenization for data preparation, with the in-graph layer's ids.

`Tokenizer` runs `bert.layers.BertTokenizer` as a compiled tf.function over
batches and returns NumPy arrays, so data creation scripts and exported
models can never disagree about ids.
"""

import collections
import os
import threading
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert.data.errors import DataError
from bert.features import ENCODER_INPUTS
from bert.layers.bert_pack_inputs import PackTemplate
from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.layers.vocabulary import Vocabulary


def _split_rows(ragged) -> List[np.ndarray]:
  values = ragged.flat_values.numpy()
  splits = ragged.row_splits.numpy()
  return [values[splits[i]:splits[i + 1]] for i in range(len(splits) - 1)]


class Tokenizer:
  """A vocabulary's tokenizer (WordPiece, byte-level BPE or SentencePiece:
  `bert.layers.Vocabulary`) for Python-side data preparation.

  Example:
    tok = Tokenizer("vocab.txt", lower_case=True)
    tok.tokenize(["Hello, world!"])           # [array([7592, 1010, 2088, 999])]
    tok.convert_ids_to_tokens([7592, 1010])   # ['hello', ',']
  """

  def __init__(self, vocab_file: Optional[str] = None,
               lower_case: Optional[bool] = None, batch_size: int = 4096,
               vocabulary=None, **tokenizer_options):
    """vocab_file: a vocabulary file (vocab.txt, vocab.json with merges.txt
    beside it, spiece.model, tokenizer.json); or vocabulary: a `Vocabulary`
    or WordPiece tokens in id order. lower_case: None takes the file's say,
    else True (byte-level BPE has no casing). `tokenizer_options`: more
    arguments of the tokenizer layer (WordPiece's `special_tokens`)."""
    if (vocab_file is None) == (vocabulary is None):
      raise ValueError("Tokenizer: give vocab_file or vocabulary (the tokens "
                       "in id order), not both")
    self.vocabulary = Vocabulary.of(
        vocab_file if vocab_file is not None else vocabulary)
    # One packer for every length: `encode` passes its seq_length per call.
    self.layer, self.packer = tokenizer_and_packer(
        self.vocabulary, lower_case, seq_length=128, **tokenizer_options)
    self.batch_size = batch_size
    self.vocab = self.layer.vocab
    self._ids = {token: i for i, token in enumerate(self.vocab)}
    spec = [tf.TensorSpec([None], tf.string)]
    # No autograph: the graph has no data-dependent Python control flow, and
    # converting the code would only add start-up time.
    self._tokenize = tf.function(
        lambda t: self.layer.tokenize(t), input_signature=spec, autograph=False)
    self._tokenize_with_offsets = tf.function(
        lambda t: self.layer.tokenize(t, with_offsets=True),
        input_signature=spec, autograph=False)
    self._encoders = {}

  @property
  def template(self) -> PackTemplate:
    """The family's packing template (special ids, separators, type ids)."""
    return PackTemplate.of(self.layer)

  @property
  def word_prefix(self) -> str:
    """What a word alone is tokenized after, to get its ids inside a
    sentence (the layer's `word_prefix`: a space for byte-level BPE)."""
    return self.layer.word_prefix

  def tokenize_words(self, words: Sequence[str]) -> List[np.ndarray]:
    """Ids of each word as it is tokenized inside a sentence."""
    prefix = self.word_prefix
    return self.tokenize([prefix + w for w in words] if prefix else words)

  @property
  def lower_case(self) -> bool:
    return self.layer.lower_case

  def get_special_tokens_dict(self):
    return self.layer.get_special_tokens_dict()

  def _batches(self, texts: Sequence[str], name: str = "texts"
               ) -> Iterable[tf.Tensor]:
    for i in range(0, len(texts), self.batch_size):
      yield _strings(texts[i:i + self.batch_size], name, i)

  def tokenize(self, texts: Sequence[str]) -> List[np.ndarray]:
    """Wordpiece ids (int32) of each text."""
    out = []
    for batch in self._batches(texts):
      out += _split_rows(self._tokenize(batch))
    return out

  def tokenize_with_offsets(
      self, texts: Sequence[str]
  ) -> List[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(ids, start, end) of each text; offsets are UTF-8 byte offsets."""
    out = []
    for batch in self._batches(texts):
      ids, starts, ends = self._tokenize_with_offsets(batch)
      out += list(zip(_split_rows(ids), _split_rows(starts), _split_rows(ends)))
    return out

  def encode(self, texts_a: Sequence[str],
             texts_b: Optional[Sequence[str]] = None,
             seq_length: int = 128) -> Dict[str, np.ndarray]:
    """Model inputs of single texts or pairs: int32 [n, seq_length] arrays
    `input_word_ids`, `input_mask`, `input_type_ids`, packed with the
    family's template ([CLS] a [SEP] (b [SEP]); RoBERTa's <s> a </s>
    (</s> b </s>)) and truncated as the reference does."""
    if texts_b is not None and len(texts_b) != len(texts_a):
      raise ValueError(f"{len(texts_a)} first texts but {len(texts_b)} second")
    key = (seq_length, texts_b is not None)
    if key not in self._encoders:
      pack = lambda segments: self.packer(segments, seq_length=int(seq_length))
      tokenize = self.layer.tokenize
      if texts_b is None:
        fn = lambda a: pack([tokenize(a)])
        spec = [tf.TensorSpec([None], tf.string)]
      else:
        fn = lambda a, b: pack([tokenize(a), tokenize(b)])
        spec = [tf.TensorSpec([None], tf.string)] * 2
      self._encoders[key] = tf.function(fn, input_signature=spec,
                                        autograph=False)
    encoder = self._encoders[key]
    parts = []
    for i in range(0, len(texts_a), self.batch_size):
      args = [_strings(texts_a[i:i + self.batch_size], "texts_a", i)]
      if texts_b is not None:
        args.append(_strings(texts_b[i:i + self.batch_size], "texts_b", i))
      parts.append({k: v.numpy() for k, v in encoder(*args).items()})
    if not parts:
      return {k: np.zeros([0, seq_length], np.int32)
              for k in ENCODER_INPUTS}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

  def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
    return [self.vocab[int(i)] for i in ids]

  def convert_tokens_to_ids(self, tokens: Iterable[str],
                            unknown: Optional[str] = "") -> List[int]:
    """Ids of `tokens`; one not in the vocabulary is the unknown token's
    (`unknown=""`: the vocabulary's own), or a KeyError (`unknown=None`)."""
    if unknown == "":
      unk = self.get_special_tokens_dict()["unknown_id"]
    else:
      unk = self._ids.get(unknown) if unknown is not None else None
    out = []
    for token in tokens:
      if token in self._ids:
        out.append(self._ids[token])
      elif unk is not None:
        out.append(unk)
      else:
        raise KeyError(f"token {token!r} is not in the vocab")
    return out


# The tokenizers `shared_tokenizer` keeps, the most recently used last.
_SHARED: "collections.OrderedDict[tuple, Tokenizer]" = collections.OrderedDict()
_SHARED_COUNT = 4
_SHARED_LOCK = threading.Lock()


def shared_tokenizer(vocab_file: str, lower_case: Optional[bool]) -> Tokenizer:
  """`Tokenizer(vocab_file, lower_case=lower_case)`, built once per process
  for every task that reads the same file: a task only calls its tokenizer,
  and each new one costs its construction and the tracing of its `encode`.
  Keyed on the file's path and contents, so a file
  rewritten in place gets a tokenizer of its own; the last few are kept."""
  vocabulary = Vocabulary.of(vocab_file)
  key = (os.path.abspath(vocab_file), vocabulary, vocabulary.lower_case,
         vocabulary.clean_up_spaces, lower_case)
  with _SHARED_LOCK:
    tokenizer = _SHARED.pop(key, None)
    if tokenizer is None:
      tokenizer = Tokenizer(vocabulary=vocabulary, lower_case=lower_case)
    _SHARED[key] = tokenizer
    while len(_SHARED) > _SHARED_COUNT:
      _SHARED.popitem(last=False)
  return tokenizer


def _strings(texts: Sequence[str], name: str, start: int) -> tf.Tensor:
  """`texts` as a string tensor; an item that is not text, or a str that is
  not valid Unicode (a lone surrogate, which has no UTF-8 form), is a
  DataError naming `name[index]` (TensorFlow's own message names neither)."""
  texts = list(texts)
  for i, text in enumerate(texts):
    if isinstance(text, bytes):
      continue
    if not isinstance(text, str):
      raise DataError(f"{name}[{start + i}] is {type(text).__name__}, not a "
                      "string")
    try:
      text.encode("utf-8")
    except UnicodeEncodeError as e:
      raise DataError(f"{name}[{start + i}] is not valid Unicode (lone "
                      f"surrogate U+{ord(text[e.start]):04X} at character "
                      f"{e.start})") from None
  return tf.constant(texts, tf.string)
