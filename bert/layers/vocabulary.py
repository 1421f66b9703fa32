"""`Vocabulary`: what a tokenizer needs, whichever family it serves.

Three kinds, one per tokenizer layer:

- "wordpiece" (BERT, DistilBERT, ELECTRA): the tokens in id order
  (`vocab.txt`), for `BertTokenizer`.
- "byte_pair" (RoBERTa): the tokens in id order and the merges by rank
  (`vocab.json` + `merges.txt`), for `BytePairTokenizer`.
- "sentencepiece" (ALBERT): a serialized SentencePiece model (`spiece.model`)
  whose pieces are the tokens, for `SentencePieceTokenizer`.

A `Vocabulary` reads any of those files, or a Hugging Face `tokenizer.json`
of any of the three models (recent `transformers` save nothing else; read
by `hf_tokenizer_files`, checked here as the other files are), and carries
the contents rather than a path: a preprocessor saved with a model keeps
its vocabulary in its config. It is a sequence of its tokens, so code
that only looks tokens up treats every kind alike.
"""

import base64
import dataclasses
import functools
import hashlib
import json
import os
from typing import Iterator, Optional, Sequence, Tuple, Union

from bert.errors import DataError
from bert.layers import hf_tokenizer_files
from bert.layers.byte_level_bpe import (byte_level_text, read_merges,
                                        read_vocab_json)
from bert.layers.sentencepiece_model import parse_model

WORDPIECE = "wordpiece"
BYTE_PAIR = "byte_pair"
SENTENCEPIECE = "sentencepiece"
KINDS = (WORDPIECE, BYTE_PAIR, SENTENCEPIECE)

VOCAB_TXT = "vocab.txt"
VOCAB_JSON = "vocab.json"
MERGES_TXT = "merges.txt"
SPIECE_MODEL = "spiece.model"
TOKENIZER_JSON = "tokenizer.json"
FILES = (VOCAB_TXT, VOCAB_JSON, SPIECE_MODEL, TOKENIZER_JSON)

# The vocabulary each family's released models tokenize with.
KIND_OF_FAMILY = {"bert": WORDPIECE, "distilbert": WORDPIECE,
                  "electra": WORDPIECE, "roberta": BYTE_PAIR,
                  "albert": SENTENCEPIECE}

# The WordPiece decoder's clean-up of each piece, in its order.
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
             (" n't", "n't"), (" 'm", "'m"), (" do not", " don't"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))

# The token a masked-LM input holds where a prediction is asked for.
MASK_TOKENS = {WORDPIECE: "[MASK]", BYTE_PAIR: "<mask>",
               SENTENCEPIECE: "[MASK]"}


@dataclasses.dataclass(frozen=True, eq=False)
class Vocabulary(Sequence):
  """A tokenizer's vocabulary: `kind`, `tokens` in id order, the BPE
  `merges` ("left right", by rank) and the SentencePiece `model` (serialized
  ModelProto, scores as spiece.model holds them). `source` names the
  file it came from, for messages; `lower_case` is what that file says of
  casing (None: it does not say)."""
  kind: str
  tokens: Tuple[str, ...]
  merges: Tuple[str, ...] = ()
  model: bytes = b""
  source: str = "vocabulary"
  lower_case: Optional[bool] = None
  # WordPiece `decode`: whether each piece loses the space before it when it
  # is punctuation (tokenizers' WordPiece decoder `cleanup`; its default, and
  # what a tokenizer.json says).
  clean_up_spaces: bool = True

  # ------------------------------------------------------------ sequence
  def __len__(self) -> int:
    return len(self.tokens)

  def __getitem__(self, i):
    return self.tokens[i]

  def __iter__(self) -> Iterator[str]:
    return iter(self.tokens)

  def __eq__(self, other) -> bool:
    if isinstance(other, Vocabulary):
      return (self.kind, self.tokens, self.merges, self.model) == (
          other.kind, other.tokens, other.merges, other.model)
    if self.kind == WORDPIECE and isinstance(other, (list, tuple)):
      return self.tokens == tuple(other)
    return NotImplemented

  def __hash__(self):
    return hash((self.kind, self.tokens))

  def __repr__(self):
    return f"Vocabulary({self.kind}, {len(self.tokens)} tokens, {self.source})"

  # ---------------------------------------------------------- properties
  @property
  def mask_token(self) -> str:
    return MASK_TOKENS[self.kind]

  @property
  def has_casing(self) -> bool:
    """Whether the tokenizer takes a `lower_case` (byte-level BPE does not:
    it sees bytes as written)."""
    return self.kind != BYTE_PAIR

  def fingerprint(self) -> str:
    """sha256 of the contents: equal exactly when the ids are."""
    h = hashlib.sha256(self.kind.encode())
    for part in (self.tokens, self.merges):
      h.update(b"\0".join(t.encode("utf-8") for t in part) + b"\1")
    h.update(self.model)
    return h.hexdigest()

  @functools.cached_property
  def special_tokens(self) -> Tuple[str, ...]:
    """The family's special tokens (those `decode` can skip). Cached: `decode`
    asks per call, and the lookup scans the whole vocabulary."""
    if self.kind == BYTE_PAIR:
      found = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
    elif self.kind == SENTENCEPIECE:
      found = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
    else:
      found = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    present = set(self.tokens)
    return tuple(t for t in found if t in present)

  def decode(self, ids, skip_special_tokens: bool = False,
             clean_up_spaces: Optional[bool] = None) -> str:
    """Text of token ids, as transformers' `decode` gives it (no clean-up of
    spaces): WordPiece pieces joined by spaces with "##" continuations glued
    on; byte-level BPE's bytes as UTF-8 (bad bytes replaced), special tokens
    as written; SentencePiece pieces with "▁" as a space, the first one's
    dropped. WordPiece's `clean_up_spaces` (None: the vocabulary's) drops
    the space before a piece of punctuation, as tokenizers' WordPiece
    decoder does piece by piece."""
    tokens = [self.tokens[int(i)] for i in ids]
    if skip_special_tokens:
      special = set(self.special_tokens)
      tokens = [t for t in tokens if t not in special]
    if self.kind == WORDPIECE:
      pieces = [t[2:] if i and t.startswith("##") else (" " if i else "") + t
                for i, t in enumerate(tokens)]
      if self.clean_up_spaces if clean_up_spaces is None else clean_up_spaces:
        for before, after in _CLEAN_UP:
          pieces = [p.replace(before, after) for p in pieces]
      return "".join(pieces)
    if self.kind == SENTENCEPIECE:
      text = "".join(tokens).replace("\u2581", " ")
      return text[1:] if tokens and tokens[0].startswith("\u2581") else text
    return byte_level_text(tokens, self.special_tokens)

  # -------------------------------------------------------- tokenizers
  def tokenizer(self, lower_case: Optional[bool] = None,
                name: Optional[str] = None, **kwargs):
    """The tokenizer layer of this vocabulary. `lower_case` None: the one the
    file says, else WordPiece's and SentencePiece's True."""
    # pylint: disable=g-import-not-at-top
    from bert.layers.bert_tokenizer import BertTokenizer
    from bert.layers.byte_pair_tokenizer import BytePairTokenizer
    from bert.layers.sentencepiece_tokenizer import SentencePieceTokenizer
    lower_case = self.casing(lower_case)
    if self.kind == WORDPIECE:
      return BertTokenizer(vocabulary=self.tokens, lower_case=lower_case,
                           name=name, **kwargs)
    if self.kind == BYTE_PAIR:
      return BytePairTokenizer(vocabulary=self.tokens, merges=self.merges,
                               source=self.source, name=name, **kwargs)
    return SentencePieceTokenizer(model=self.model, lower_case=lower_case,
                                  source=self.source, name=name, **kwargs)

  def casing(self, lower_case: Optional[bool]) -> bool:
    """`lower_case` checked for this kind: byte-level BPE has none (False;
    True is a DataError), None takes the file's or True."""
    if self.kind == BYTE_PAIR:
      if lower_case:
        raise DataError(f"lower_case=True: {self.source} is a byte-level BPE "
                        "vocabulary, which has no lower-casing")
      return False
    if lower_case is None:
      lower_case = True if self.lower_case is None else self.lower_case
    return bool(lower_case)

  # ------------------------------------------------------ serialisation
  def get_config(self) -> Union[list, dict]:
    """JSON-serialisable: a WordPiece vocabulary is its token list (as
    preprocessors have always saved it), the others a dict."""
    if self.kind == WORDPIECE:
      return list(self.tokens)
    config = dict(kind=self.kind)
    if self.kind == BYTE_PAIR:
      config.update(tokens=list(self.tokens), merges=list(self.merges))
    else:
      config.update(model=base64.b64encode(self.model).decode("ascii"))
    if self.lower_case is not None:
      config.update(lower_case=self.lower_case)
    return config

  @classmethod
  def of(cls, value, source: str = "vocabulary") -> "Vocabulary":
    """A Vocabulary from what a caller may hold: one, a file or folder path,
    a list of WordPiece tokens, or a `get_config()` dict."""
    if isinstance(value, Vocabulary):
      return value
    if isinstance(value, (str, os.PathLike)):
      return cls.from_file(os.fspath(value))
    if isinstance(value, dict):
      return cls.from_config(value, source)
    if isinstance(value, (list, tuple)):
      from bert.layers.bert_tokenizer import check_vocab  # pylint: disable=g-import-not-at-top
      return cls(WORDPIECE, tuple(check_vocab(list(value), source)),
                 source=source)
    raise DataError(f"{source}: expected a vocabulary file, a token list or "
                    f"a Vocabulary, got {type(value).__name__}")

  @classmethod
  def from_config(cls, config: dict, source: str = "vocabulary"
                  ) -> "Vocabulary":
    kind = config.get("kind")
    lower_case = config.get("lower_case")
    if kind == BYTE_PAIR:
      return _byte_pair(config.get("tokens"), config.get("merges"), source)
    if kind == SENTENCEPIECE:
      try:
        model = base64.b64decode(config.get("model", ""), validate=True)
      except (ValueError, TypeError):
        raise DataError(f"{source}: model is not base64") from None
      return _sentencepiece(model, source, lower_case)
    raise DataError(f"{source}: kind must be one of {', '.join(KINDS[1:])} "
                    f"(a WordPiece vocabulary is a token list), found {kind!r}")

  # ------------------------------------------------------------- files
  def write(self, folder: str) -> str:
    """Writes the vocabulary's own files into `folder` (vocab.txt;
    vocab.json and merges.txt; spiece.model) and returns the path that
    `from_file` reads back."""
    if self.kind == WORDPIECE:
      path = os.path.join(folder, VOCAB_TXT)
      with open(path, "w", encoding="utf-8") as f:
        f.write(self.vocab_txt())
    elif self.kind == BYTE_PAIR:
      path = os.path.join(folder, VOCAB_JSON)
      with open(path, "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(self.tokens)}, f,
                  ensure_ascii=False)
      with open(os.path.join(folder, MERGES_TXT), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(m + "\n" for m in self.merges))
    else:
      path = os.path.join(folder, SPIECE_MODEL)
      with open(path, "wb") as f:
        f.write(self.model)
    return path

  def vocab_txt(self) -> str:
    """A WordPiece vocabulary as the text of its vocab.txt: a token a line,
    in id order."""
    return "".join(t + "\n" for t in self.tokens)

  @classmethod
  def from_file(cls, path: str) -> "Vocabulary":
    """The vocabulary of a `vocab.txt`, a `vocab.json` (with the
    `merges.txt` beside it), a SentencePiece model, a `tokenizer.json`, or
    a folder holding one of them (in that order of preference). Errors are
    DataErrors naming the file."""
    if os.path.isdir(path):
      found = [f for f in FILES if os.path.isfile(os.path.join(path, f))]
      if not found:
        raise DataError(f"{path}: no vocabulary (expected one of "
                        f"{', '.join(FILES)})")
      path = os.path.join(path, found[0])
    if not os.path.isfile(path):
      raise DataError(f"{path}: no such vocabulary file")
    name = os.path.basename(path)
    return cls._from_file(path, name,
                          hf_tokenizer_files.tokenizer_config_casing(
                              os.path.dirname(path)))

  @classmethod
  def _from_file(cls, path, name, lower_case) -> "Vocabulary":
    if name.endswith(".json") and name != VOCAB_JSON:
      return _from_tokenizer_json(path, lower_case)
    if name.endswith(".json"):
      merges = os.path.join(os.path.dirname(path), MERGES_TXT)
      if not os.path.isfile(merges):
        raise DataError(f"{path}: a byte-level BPE vocabulary needs the "
                        f"{MERGES_TXT} beside it")
      vocab = read_vocab_json(path)
      return _byte_pair(sorted(vocab, key=vocab.get),
                        [f"{a} {b}" for a, b in read_merges(merges)], path)
    if name.endswith(".model"):
      with open(path, "rb") as f:
        data = f.read()
      return _sentencepiece(data, path, lower_case)
    from bert.layers.bert_tokenizer import read_vocab  # pylint: disable=g-import-not-at-top
    return cls(WORDPIECE, tuple(read_vocab(path)), source=path,
               lower_case=lower_case)


def _byte_pair(tokens, merges, source) -> Vocabulary:
  if (not isinstance(tokens, (list, tuple)) or not tokens
      or not all(isinstance(t, str) and t for t in tokens)):
    raise DataError(f"{source}: tokens must be a non-empty list of strings")
  if len(set(tokens)) != len(tokens):
    raise DataError(f"{source}: a token repeats")
  if (not isinstance(merges, (list, tuple))
      or not all(isinstance(m, str) and len(m.split(" ")) == 2
                 and all(m.split(" ")) for m in merges)):
    raise DataError(f"{source}: merges must be strings of two symbols "
                    "separated by one space")
  return Vocabulary(BYTE_PAIR, tuple(tokens), tuple(merges), source=source,
                    lower_case=False)


def _sentencepiece(data: bytes, source: str, lower_case: Optional[bool]
                   ) -> Vocabulary:
  proto = parse_model(data, source, number_comma_penalty=False)
  return Vocabulary(SENTENCEPIECE, tuple(p.piece for p in proto.pieces),
                    model=proto.SerializeToString(), source=source,
                    lower_case=lower_case)


def _from_tokenizer_json(path: str, lower_case: Optional[bool]) -> Vocabulary:
  """A tokenizer.json's WordPiece, BPE or Unigram model as a Vocabulary."""
  found = hf_tokenizer_files.read_tokenizer_json(path, lower_case)
  if found.type == hf_tokenizer_files.WORDPIECE_MODEL:
    from bert.layers.bert_tokenizer import check_vocab  # pylint: disable=g-import-not-at-top
    return Vocabulary(WORDPIECE, tuple(check_vocab(found.tokens, path)),
                      source=path, lower_case=found.lower_case,
                      clean_up_spaces=found.clean_up_spaces)
  if found.type == hf_tokenizer_files.BPE_MODEL:
    return _byte_pair(found.tokens, found.merges, path)
  return _sentencepiece(found.model, path, found.lower_case)
