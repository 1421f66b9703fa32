"""Hugging Face's tokenizer files, as far as a `Vocabulary` needs them: the
WordPiece, byte-level BPE or Unigram model of a `tokenizer.json` (recent
`transformers` save nothing else), and the casing a `tokenizer_config.json`
states. What is read here is checked as far as the file format goes; the
`Vocabulary` built from it checks the tokens as it checks every file's.
"""

import base64
import dataclasses
import json
import os
from typing import Any, Optional, Sequence

from bert import untrusted
from bert.errors import DataError
from bert.io import read_text
from bert.untrusted import read_json
from bert.layers.sentencepiece_model import number_comma

# The model types of a tokenizer.json read here (tokenizers' names).
WORDPIECE_MODEL, BPE_MODEL, UNIGRAM_MODEL = "WordPiece", "BPE", "Unigram"


@dataclasses.dataclass(frozen=True)
class TokenizerModel:
  """A tokenizer.json's model: its `type` (WordPiece, BPE or Unigram), the
  `tokens` in id order (WordPiece, BPE), the `merges` ("left right", by
  rank; BPE: as the file has them, which `Vocabulary` checks), the
  serialized SentencePiece `model` (Unigram), the casing (None: the file
  does not say) and WordPiece's decoder `clean_up_spaces`."""
  type: str
  tokens: Sequence[str] = ()
  merges: Any = ()
  model: bytes = b""
  lower_case: Optional[bool] = None
  clean_up_spaces: bool = True


def tokenizer_config_casing(folder: str) -> Optional[bool]:
  """do_lower_case of a transformers tokenizer_config.json beside the file,
  when it says."""
  path = os.path.join(folder, "tokenizer_config.json")
  if not os.path.isfile(path):
    return None
  try:
    value = json.loads(read_text(path)).get("do_lower_case")
  except (ValueError, AttributeError):
    return None
  return value if isinstance(value, bool) else None


def read_tokenizer_json(path: str, lower_case: Optional[bool]
                        ) -> TokenizerModel:
  """The WordPiece, BPE or Unigram model of the tokenizer.json `path`;
  `lower_case` (None: the file's) is the casing it is read with."""
  data = read_json(path, DataError)
  model = data.get("model")
  kind = model.get("type") if isinstance(model, dict) else untrusted.kind(model)
  if kind == WORDPIECE_MODEL:
    vocab = _id_map(model.get("vocab"), path)
    # A WordPiece vocabulary is a vocab.txt's lines (a checkpoint's is
    # written as one): a token must be one line, not blank.
    bad = next((t for t in vocab if "\n" in t or not t.strip()), None)
    if bad is not None:
      raise DataError(f"{path}: model.vocab token {bad!r} cannot be a line "
                      "of a vocab.txt")
    normalizer = _section(data, "normalizer")
    if lower_case is None and normalizer.get("type") == "BertNormalizer":
      value = normalizer.get("lowercase")
      lower_case = value if isinstance(value, bool) else None
    decoder = _section(data, "decoder")
    cleanup = decoder.get("cleanup") if decoder.get("type") == "WordPiece" else None
    return TokenizerModel(kind, vocab, lower_case=lower_case,
                          clean_up_spaces=cleanup if isinstance(cleanup, bool)
                          else True)
  if kind == BPE_MODEL:
    pre = _section(data, "pre_tokenizer")
    if pre.get("type") != "ByteLevel":
      raise DataError(f"{path}: a BPE tokenizer without the ByteLevel "
                      "pre-tokenizer (RoBERTa's) is not supported")
    merges = model.get("merges")
    if isinstance(merges, list):
      merges = [" ".join(m) if isinstance(m, list) else m for m in merges]
    return TokenizerModel(kind, _id_map(model.get("vocab"), path), merges)
  if kind == UNIGRAM_MODEL:
    return TokenizerModel(kind, model=_unigram_model(data, model, path),
                          lower_case=_unigram_casing(data, lower_case))
  raise DataError(f"{path}: the tokenizer model is {kind!r}; expected "
                  "WordPiece, BPE or Unigram")


def _id_map(vocab, path) -> list:
  """Tokens in id order of a {token: id} object."""
  if not isinstance(vocab, dict) or not vocab:
    raise DataError(f"{path}: model.vocab must be an object of token ids")
  ids = sorted(vocab.values()) if all(
      isinstance(i, int) and not isinstance(i, bool) for i in vocab.values()
  ) else None
  if ids != list(range(len(vocab))):
    raise DataError(f"{path}: model.vocab's ids must be 0 .. "
                    f"{len(vocab) - 1}, each once")
  return sorted(vocab, key=vocab.get)


def _section(data: dict, key: str) -> dict:
  """The object `data[key]`; {} when absent or not an object."""
  value = data.get(key)
  return value if isinstance(value, dict) else {}


def _normalizer_steps(data: dict) -> list:
  """The normalizer's steps that are objects: a Sequence's, or itself."""
  normalizer = _section(data, "normalizer")
  steps = normalizer.get("normalizers", [normalizer])
  return [s for s in steps if isinstance(s, dict)] if isinstance(
      steps, list) else []


def _unigram_casing(data, lower_case):
  if lower_case is not None:
    return lower_case
  return any(s.get("type") == "Lowercase" for s in _normalizer_steps(data))


def _unigram_model(data: dict, model: dict, path: str) -> bytes:
  """A SentencePiece ModelProto equal to a tokenizer.json's Unigram model:
  the pieces and scores, the unknown piece, the added special tokens as
  control pieces, and the precompiled normalisation map. transformers wrote
  the scores of number-comma pieces 100 lower than spiece.model's; they are
  given back, as `SentencePieceTokenizer` lowers them itself."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top
  vocab = model.get("vocab")
  if (not isinstance(vocab, list) or not vocab or not all(
      isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
      and isinstance(v[1], (int, float)) for v in vocab)):
    raise DataError(f"{path}: model.vocab must be a list of [piece, score]")
  unk_id = model.get("unk_id")
  if not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
    raise DataError(f"{path}: model.unk_id must be an id of model.vocab")
  added = data.get("added_tokens")
  special = {t.get("content") for t in (added if isinstance(added, list) else [])
             if isinstance(t, dict) and t.get("special")
             and isinstance(t.get("content"), str)}
  proto = sentencepiece_model_pb2.ModelProto()
  proto.trainer_spec.model_type = sentencepiece_model_pb2.TrainerSpec.UNIGRAM
  proto.trainer_spec.unk_id = unk_id
  proto.trainer_spec.bos_id = proto.trainer_spec.eos_id = -1
  proto.trainer_spec.pad_id = -1
  piece_type = sentencepiece_model_pb2.ModelProto.SentencePiece
  for i, (piece, score) in enumerate(vocab):
    p = proto.pieces.add()
    p.piece, p.score = piece, float(score) + (100 if number_comma(piece) else 0)
    p.type = (piece_type.UNKNOWN if i == unk_id else
              piece_type.CONTROL if piece in special else piece_type.NORMAL)
  spec = proto.normalizer_spec
  spec.name = "precompiled"
  spec.add_dummy_prefix = True
  spec.remove_extra_whitespaces = True
  spec.escape_whitespaces = True
  for step in _normalizer_steps(data):
    if step.get("type") == "Precompiled":
      try:
        spec.precompiled_charsmap = base64.b64decode(
            step.get("precompiled_charsmap") or "", validate=True)
      except (ValueError, TypeError):
        raise DataError(f"{path}: precompiled_charsmap is not base64") from None
  return proto.SerializeToString()

