"""`Vocab`: a vocabulary as the ids that masked-LM data needs.

Static masking (`pretraining_data.mask_batch`) and dynamic masking
(`DynamicMasker`) both draw with it, so the two can never disagree about
which ids are special or which pieces continue a word. Every family's
vocabulary works (`bert.layers.Vocabulary`): BERT's [CLS]/[SEP]/[MASK] and
"##" continuations, RoBERTa's <s>/</s>/<mask> and byte-level pieces that
continue a word unless they start with the folded space "Ġ", ALBERT's
SentencePiece pieces that continue a word unless they start with "▁".
"""

from typing import List

import numpy as np

from bert.data.errors import DataError
from bert.layers.vocabulary import (BYTE_PAIR, SENTENCEPIECE, WORDPIECE,
                                    Vocabulary)

# The start and end of a sequence and the mask, per vocabulary kind.
_SPECIAL = {WORDPIECE: ("[CLS]", "[SEP]", "[MASK]"),
            BYTE_PAIR: ("<s>", "</s>", "<mask>"),
            SENTENCEPIECE: ("[CLS]", "[SEP]", "[MASK]")}
# What a piece that starts a word begins with (WordPiece: what one that
# continues a word begins with).
_WORD_START = {BYTE_PAIR: "\u0120", SENTENCEPIECE: "\u2581"}


class Vocab:
  """Tokens (id = index) and the ids masking uses.

  Attributes:
    tokens: the tokens in id order.
    size: len(tokens); random replacement ids are drawn from [0, size).
    cls, sep, mask: ids of the sequence start ([CLS], <s>), the segment end
      ([SEP], </s>) and the mask ([MASK], <mask>).
    is_continuation: bool [size]; True for pieces that continue the word of
      the piece before them, which whole-word masking keeps together.
    kind: the vocabulary's kind (wordpiece, byte_pair, sentencepiece).
  """

  def __init__(self, vocabulary, vocab_file: str = "vocabulary"):
    vocabulary = Vocabulary.of(vocabulary, vocab_file)
    self.kind = vocabulary.kind
    index = {t: i for i, t in enumerate(vocabulary)}
    for needed in _SPECIAL[self.kind]:
      if needed not in index:
        raise DataError(f"vocab file {vocab_file} has no {needed} token, "
                        "which pre-training data needs")
    self.tokens: List[str] = list(vocabulary)
    self.size = len(self.tokens)
    self.cls, self.sep, self.mask = (index[t] for t in _SPECIAL[self.kind])
    if self.kind == WORDPIECE:
      continuation = [t.startswith("##") for t in self.tokens]
    else:
      special = set(vocabulary.special_tokens)
      start = _WORD_START[self.kind]
      continuation = [not t.startswith(start) and t not in special
                      for t in self.tokens]
    self.is_continuation = np.array(continuation, dtype=bool)

  @classmethod
  def from_file(cls, vocab_file: str) -> "Vocab":
    """The vocab of a vocabulary file (`Vocabulary.from_file`: errors name
    the file and line), checked for the tokens masking needs."""
    return cls(Vocabulary.from_file(vocab_file), vocab_file)
