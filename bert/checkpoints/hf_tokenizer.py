"""A Hugging Face folder's vocabulary from its tokenizer.json.

Folders saved by recent `transformers` (and so by sentence-transformers)
hold the fast tokenizer's tokenizer.json and no vocab.txt, vocab.json or
spiece.model. The tokenizer.json is read and checked by
`Vocabulary.from_file`, as every vocabulary file is (its errors come back
as CheckpointErrors, the same one line naming the file). A WordPiece
vocabulary is written once as a vocab.txt into the cache
(`bert.pretrained.default_cache_dir()`/vocab/<sha256>.txt), never into the
checkpoint's folder, and that file is the checkpoint's `vocab_file` (TF Hub
exports carry a vocab.txt asset). A byte-level BPE or Unigram tokenizer.json
is itself the `vocab_file`.
"""

import hashlib
import os
from typing import Optional, Tuple

from bert.checkpoints.errors import CheckpointError
from bert.errors import DataError
from bert.io.output_file import atomic_file
from bert.layers.vocabulary import TOKENIZER_JSON, WORDPIECE, Vocabulary
from bert.pretrained.cache import default_cache_dir


def vocabulary_file(folder: str) -> Tuple[Optional[str], Optional[bool]]:
  """(vocabulary file, lowercase or None) of `folder`'s tokenizer.json: the
  cached vocab.txt of a WordPiece one and the casing its files say
  (tokenizer_config.json's, else its normalizer's), the tokenizer.json
  itself for BPE or Unigram; (None, None) without one."""
  path = os.path.join(folder, TOKENIZER_JSON)
  if not os.path.isfile(path):
    return None, None
  try:
    vocabulary = Vocabulary.from_file(path)
  except DataError as e:
    raise CheckpointError(str(e)) from None
  if vocabulary.kind != WORDPIECE:
    return path, None
  text = vocabulary.vocab_txt()
  digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
  out = os.path.join(default_cache_dir(), "vocab", digest + ".txt")
  if not os.path.isfile(out):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with atomic_file(out) as f:
      f.write(text)
  return out, vocabulary.lower_case
