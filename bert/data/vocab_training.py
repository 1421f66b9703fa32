"""Training a family's vocabulary on raw text: BERT's WordPiece (for BERT,
DistilBERT and ELECTRA) and RoBERTa's byte-level BPE (both Hugging Face
`tokenizers`), ALBERT's SentencePiece unigram model (`sentencepiece`), with
each family's special tokens at the front. What `bert-train-vocab` runs; the files load with
`bert.layers.Vocabulary` and with transformers' tokenizers alike."""

import os
from typing import Optional, Sequence

from bert.data.errors import DataError
from bert.io import atomic_folder

# RoBERTa's specials, in id order (0 .. 4).
BYTE_PAIR_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
# ALBERT's: <pad> 0 and <unk> 1, then these control pieces.
SENTENCEPIECE_CONTROLS = ("[CLS]", "[SEP]", "[MASK]")
# BERT's, ids 0 .. 4 (the released vocab.txt has them at 0, 100-103 among
# [unusedN] slots; every tool finds them by name).
WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
KINDS = ("wordpiece", "byte_pair", "sentencepiece")
FILE_OF_KIND = {"wordpiece": "vocab.txt", "byte_pair": "vocab.json",
                "sentencepiece": "spiece.model"}


def train_vocab(kind: str, files: Sequence[str], output_dir: str,
                vocab_size: int, overwrite: bool = False,
                lower_case: Optional[bool] = None) -> str:
  """Trains a `kind` vocabulary of `vocab_size` tokens on the lines of
  `files` and writes it into `output_dir` (vocab.txt; vocab.json and
  merges.txt; or spiece.model), whole or not at all; returns the vocabulary
  file. `lower_case`: train on lower-cased text, as the family's tokenizer
  lower-cases before splitting (WordPiece uncased also strips accents); None
  is the family's default: uncased WordPiece (bert-base-uncased, ELECTRA),
  lower-cased SentencePiece (ALBERT), cased byte-level BPE (RoBERTa, which
  has no lower-casing)."""
  if kind not in KINDS:
    raise DataError(f"kind={kind!r}: expected one of {', '.join(KINDS)}")
  if lower_case is None:
    lower_case = kind != "byte_pair"
  if lower_case and kind == "byte_pair":
    raise DataError("lower_case=True: RoBERTa's byte-level BPE is cased (its "
                    "tokenizer never lower-cases)")
  if vocab_size < 300:
    raise DataError(f"vocab_size={vocab_size}: at least 300 (byte-level BPE "
                    "starts from 256 byte symbols)")
  for path in files:
    if not os.path.isfile(path):
      raise DataError(f"{path}: no such input file")

  def replaceable(path):
    # An empty folder, or with `overwrite` one of an earlier vocabulary
    # (atomic_folder then refuses one holding anything it did not write).
    if not os.path.isdir(path):
      return False
    names = set(os.listdir(path))
    return not names or (overwrite and bool(
        names & set(FILE_OF_KIND.values())))

  with atomic_folder(output_dir, replaceable, "a vocabulary folder",
                     DataError) as tmp:
    if kind == "wordpiece":
      _wordpiece(files, tmp, vocab_size, lower_case)
    elif kind == "byte_pair":
      _byte_pair(files, tmp, vocab_size)
    else:
      _sentencepiece(files, tmp, vocab_size, lower_case)
  return os.path.join(output_dir, FILE_OF_KIND[kind])


def _wordpiece(files, folder, vocab_size, lower_case):
  from tokenizers import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  trainer = BertWordPieceTokenizer(lowercase=lower_case,
                                   strip_accents=lower_case)
  trainer.train(list(files), vocab_size=vocab_size, min_frequency=2,
                special_tokens=list(WORDPIECE_SPECIALS), show_progress=False)
  trainer.save_model(folder)


def _byte_pair(files, folder, vocab_size):
  from tokenizers import ByteLevelBPETokenizer  # pylint: disable=g-import-not-at-top
  trainer = ByteLevelBPETokenizer()
  trainer.train(list(files), vocab_size=vocab_size, min_frequency=2,
                special_tokens=list(BYTE_PAIR_SPECIALS), show_progress=False)
  trainer.save_model(folder)


def _lines(files, lower_case):
  for path in files:
    with open(path, encoding="utf-8") as f:
      for line in f:
        yield line.lower() if lower_case else line


def _sentencepiece(files, folder, vocab_size, lower_case):
  import sentencepiece  # pylint: disable=g-import-not-at-top
  try:
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=_lines(files, lower_case),
        model_prefix=os.path.join(folder, "spiece"),
        vocab_size=vocab_size, model_type="unigram", pad_id=0, unk_id=1,
        bos_id=-1, eos_id=-1, control_symbols=list(SENTENCEPIECE_CONTROLS),
        input_sentence_size=1_000_000, shuffle_input_sentence=False,
        minloglevel=2)
  except RuntimeError as e:      # e.g. more pieces asked than the text has
    reason = str(e).strip().splitlines()[-1].split("] ")[-1]
    raise DataError(f"vocab_size={vocab_size}: sentencepiece cannot train on "
                    f"{', '.join(files)}: {reason}") from None
  os.remove(os.path.join(folder, "spiece.vocab"))
