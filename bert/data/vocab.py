"""`Vocab`: a WordPiece vocabulary as the ids that masked-LM data needs.

Static masking (`pretraining_data.mask_batch`) and dynamic masking
(`DynamicMasker`) both draw with it, so the two can never disagree about
which ids are special or which pieces continue a word. Reading and checking
the file stays with the tokenizer that defines the format
(`bert.layers.bert_tokenizer.read_vocab`).
"""

from typing import List, Sequence

import numpy as np

from bert.data.errors import DataError
from bert.layers.bert_tokenizer import read_vocab

# Masking frames an instance with [CLS]/[SEP] and writes [MASK]; read_vocab
# already requires [CLS]/[SEP] (and [UNK]/[PAD]), but not [MASK].
_NEEDED = ("[CLS]", "[SEP]", "[MASK]")


class Vocab:
  """Tokens (id = index) and the ids masking uses.

  Attributes:
    tokens: the tokens in id order.
    size: len(tokens); random replacement ids are drawn from [0, size).
    cls, sep, mask: ids of [CLS], [SEP], [MASK].
    is_continuation: bool [size]; True for "##" pieces, which whole-word
      masking keeps with the piece before them.
  """

  def __init__(self, tokens: Sequence[str], vocab_file: str):
    index = {t: i for i, t in enumerate(tokens)}
    for needed in _NEEDED:
      if needed not in index:
        raise DataError(f"vocab file {vocab_file} has no {needed} token, "
                        "which pre-training data needs")
    self.tokens: List[str] = list(tokens)
    self.size = len(self.tokens)
    self.cls, self.sep, self.mask = index["[CLS]"], index["[SEP]"], index["[MASK]"]
    self.is_continuation = np.array([t.startswith("##") for t in self.tokens],
                                    dtype=bool)

  @classmethod
  def from_file(cls, vocab_file: str) -> "Vocab":
    """The vocab of a vocab.txt, checked by `read_vocab` (errors name the
    file and line) and for the tokens masking needs."""
    return cls(read_vocab(vocab_file), vocab_file)
