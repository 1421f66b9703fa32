"""A Hugging Face folder's vocabulary from its tokenizer.json.

Folders saved by recent `transformers` (and so by sentence-transformers)
hold the fast tokenizer's tokenizer.json and no vocab.txt, vocab.json or
spiece.model. A WordPiece vocabulary is written once as a vocab.txt into
the cache (`bert.pretrained.default_cache_dir()`/vocab/<sha256>.txt), never
into the checkpoint's folder, and that file is the checkpoint's
`vocab_file` (TF Hub exports carry a vocab.txt asset). A byte-level BPE or
Unigram tokenizer.json is itself the `vocab_file`: `Vocabulary.from_file`
reads it.
"""

import hashlib
import os
from typing import Optional, Tuple

from bert.checkpoints.errors import CheckpointError
from bert.io.output_file import atomic_file
from bert.pretrained.cache import default_cache_dir
from bert.untrusted import kind, read_json

TOKENIZER_JSON = "tokenizer.json"


def vocabulary_file(folder: str) -> Tuple[Optional[str], Optional[bool]]:
  """(vocabulary file, lowercase or None) of `folder`'s tokenizer.json: the
  cached vocab.txt of a WordPiece one, the tokenizer.json itself for BPE or
  Unigram; (None, None) without one."""
  path = os.path.join(folder, TOKENIZER_JSON)
  if not os.path.isfile(path):
    return None, None
  data = read_json(path, CheckpointError)
  model = data.get("model")
  if isinstance(model, dict) and model.get("type") in ("BPE", "Unigram"):
    return path, None
  return _wordpiece_vocab(path, data)


def _wordpiece_vocab(path: str, data: dict
                     ) -> Tuple[Optional[str], Optional[bool]]:
  """(vocab.txt path, lowercase or None) of the tokenizer.json `path`, read
  as `data`, when it is a WordPiece tokenizer; another model type is a
  CheckpointError."""
  model = data.get("model")
  if not isinstance(model, dict) or model.get("type") != "WordPiece":
    found = model.get("type") if isinstance(model, dict) else kind(model)
    raise CheckpointError(f"{path}: the tokenizer model is {found!r}; "
                          "expected WordPiece, BPE or Unigram")
  vocab = model.get("vocab")
  if not isinstance(vocab, dict) or not vocab:
    raise CheckpointError(f"{path}: model.vocab must be an object of token ids")
  ids = sorted(vocab.values()) if all(
      isinstance(i, int) and not isinstance(i, bool) for i in vocab.values()
  ) else None
  if ids != list(range(len(vocab))):
    raise CheckpointError(f"{path}: model.vocab's ids must be 0 .. "
                          f"{len(vocab) - 1}, each once")
  tokens = [""] * len(vocab)
  for token, i in vocab.items():
    if "\n" in token or not token.strip():
      raise CheckpointError(f"{path}: vocab token {token!r} cannot be a line "
                            "of a vocab.txt")
    tokens[i] = token
  text = "".join(t + "\n" for t in tokens)
  digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
  out = os.path.join(default_cache_dir(), "vocab", digest + ".txt")
  if not os.path.isfile(out):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with atomic_file(out) as f:
      f.write(text)
  return out, _lowercase(data)


def _lowercase(data: dict) -> Optional[bool]:
  normalizer = data.get("normalizer")
  if isinstance(normalizer, dict) and normalizer.get("type") == "BertNormalizer":
    value = normalizer.get("lowercase")
    return value if isinstance(value, bool) else None
  return None
