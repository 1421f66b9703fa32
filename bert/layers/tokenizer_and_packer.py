"""Builds a BertTokenizer and the BertPackInputs that packs with its ids.

Every path from raw strings to encoder inputs (the TF Hub-style preprocessing
model, the serving exports, offline `bert.data.Tokenizer.encode`) builds the
pair here, so the packer's [CLS]/[SEP]/[PAD] ids always come from the
tokenizer's own vocabulary.
"""

import os
from typing import Optional, Sequence, Tuple, Union

from bert.layers.bert_pack_inputs import BertPackInputs
from bert.layers.bert_tokenizer import BertTokenizer


def tokenizer_and_packer(
    vocab: Union[str, os.PathLike, Sequence[str]], lower_case: bool,
    seq_length: int, tokenizer_name: Optional[str] = None,
    packer_name: Optional[str] = None) -> Tuple[BertTokenizer, BertPackInputs]:
  """(tokenizer, packer) for `vocab`: a vocab.txt path, or the tokens in id
  order (a model's `preprocessor` carries them rather than a file).

  The packer pads to `seq_length` unless a call passes its own. The names
  default to Keras' unique ones; give them where a saved model's layers are
  looked up by name.
  """
  if isinstance(vocab, (str, os.PathLike)):
    tokenizer = BertTokenizer(vocab, lower_case=lower_case, name=tokenizer_name)
  else:
    tokenizer = BertTokenizer(vocabulary=list(vocab), lower_case=lower_case,
                              name=tokenizer_name)
  packer = BertPackInputs(seq_length, tokenizer.get_special_tokens_dict(),
                          name=packer_name)
  return tokenizer, packer
