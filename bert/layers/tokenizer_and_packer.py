"""Builds a vocabulary's tokenizer and the BertPackInputs that packs its ids.

Every path from raw strings to encoder inputs (the TF Hub-style preprocessing
model, the serving exports, offline `bert.data.Tokenizer.encode`) builds the
pair here, so the packer's special ids and template (BERT's
`[CLS] a [SEP] b [SEP]`, RoBERTa's `<s> a </s></s> b </s>`) always come from
the tokenizer's own vocabulary.
"""

from typing import Optional, Tuple

from bert.layers.bert_pack_inputs import BertPackInputs
from bert.layers.vocabulary import Vocabulary


def tokenizer_and_packer(
    vocab, lower_case: Optional[bool], seq_length: int,
    tokenizer_name: Optional[str] = None,
    packer_name: Optional[str] = None,
    **tokenizer_options) -> Tuple[object, BertPackInputs]:
  """(tokenizer, packer) for `vocab`: a `Vocabulary`, a vocabulary file
  (vocab.txt, vocab.json, spiece.model, tokenizer.json), or WordPiece tokens
  in id order (a model's `preprocessor` carries them rather than a file).

  lower_case: None takes what the vocabulary's files say (else True);
    byte-level BPE has no casing.
  The packer pads to `seq_length` unless a call passes its own. The names
  default to Keras' unique ones; give them where a saved model's layers are
  looked up by name. `tokenizer_options`: more arguments of the tokenizer
  layer (e.g. WordPiece's `special_tokens`).
  """
  tokenizer = Vocabulary.of(vocab).tokenizer(lower_case, name=tokenizer_name,
                                             **tokenizer_options)
  packer = BertPackInputs(seq_length, tokenizer.get_special_tokens_dict(),
                          name=packer_name, **tokenizer.packer_options())
  return tokenizer, packer
