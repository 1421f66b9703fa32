"""`SentencePieceTokenizer`: raw strings -> SentencePiece ids (ALBERT),
in-graph.

The reference is Hugging Face's `AlbertTokenizer` (fast) on the same
`spiece.model`:

1. Special tokens written in the text (`[CLS]`, `[SEP]`, `[MASK]`, ...) are
   matched first and never split.
2. Each stretch between them is normalised as the reference does: `` and
   '' become ", then (unless `keep_accents`) NFKD and combining marks
   removed, then (with `lower_case`) lower-cased.
3. `tensorflow_text.FastSentencepieceTokenizer` applies the model's own
   normalisation (its precompiled character map, whitespace clean-up) and
   segments each whitespace-separated word.

The reference's fast tokenizer also keeps a number from swallowing the comma
after it ("9," is "▁9" and ","): it lowers the score of every piece that
ends in a digit and a comma by 100. The same change is made to a copy of
the model here, so the segmentation is the reference's.
"""

import base64
from typing import Optional, Sequence, Union

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras

from bert.errors import DataError
from bert.layers.byte_pair_tokenizer import _WS, _interleave, _re2_escape, _table


def read_model(path: str, number_comma_penalty: bool = True) -> bytes:
  """The serialized SentencePiece model of `path`, with the reference's
  digit-comma scores; a DataError naming the file when it is not one."""
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError as e:
    raise DataError(f"{path}: cannot read ({e.strerror})") from None
  return parse_model(data, path, number_comma_penalty).SerializeToString()


def parse_model(data: bytes, source: str, number_comma_penalty: bool = True):
  """The ModelProto of serialized `data` (a DataError naming `source` when it
  is not a SentencePiece model), with the reference's digit-comma scores
  when `number_comma_penalty` (a model read from spiece.model; a
  tokenizer.json's scores have them already)."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top
  proto = sentencepiece_model_pb2.ModelProto()
  try:
    proto.ParseFromString(data)
  except Exception:  # protobuf raises its own DecodeError
    raise DataError(f"{source}: not a SentencePiece model") from None
  if not proto.pieces:
    raise DataError(f"{source}: not a SentencePiece model (no pieces)")
  if number_comma_penalty:
    for piece in proto.pieces:
      if number_comma(piece.piece):
        piece.score -= 100
  return proto


def number_comma(piece: str) -> bool:
  """A piece that ends in a digit and a comma ("▁9,"), which the reference
  scores 100 lower than the model does."""
  return len(piece) >= 2 and piece[-1] == "," and piece[-2].isdigit()


@tf_keras.utils.register_keras_serializable(package="bert")
class SentencePieceTokenizer(tf_keras.layers.Layer):
  """SentencePiece: string [batch] -> int32 ragged [batch, (tokens)].

  Args:
    model_file: the `spiece.model`; or
    model: a serialized model (bytes, or base64 text as `get_config` saves
      it), as spiece.model holds it (`Vocabulary.model`).
    lower_case: lower-case before segmenting (ALBERT: True).
    keep_accents: keep combining marks (ALBERT: False).
    special_tokens: tokens matched whole in the text, never split.
    lstrip_tokens: special tokens that take the whitespace on their left.
  """

  def __init__(self, model_file: Optional[str] = None, lower_case: bool = True,
               keep_accents: bool = False,
               special_tokens: Sequence[str] = ("[CLS]", "[SEP]", "<pad>",
                                                "<unk>", "[MASK]"),
               lstrip_tokens: Sequence[str] = (),
               model: Union[bytes, str, None] = None,
               source: Optional[str] = None, **kwargs):
    super().__init__(**kwargs)
    if (model_file is None) == (model is None):
      raise ValueError("SentencePieceTokenizer: give model_file or model, "
                       "not both")
    self.model_file = model_file
    self.lower_case = bool(lower_case)
    self.keep_accents = bool(keep_accents)
    self.special_tokens = tuple(special_tokens)
    self.lstrip_tokens = tuple(lstrip_tokens)
    if model_file is not None:
      model = read_model(model_file, number_comma_penalty=False)
      source = model_file
    elif isinstance(model, str):
      model = base64.b64decode(model)
    source = source or "SentencePiece model"
    object.__setattr__(self, "_model", bytes(model))
    model = parse_model(model, source).SerializeToString()
    self._sp = tf_text.FastSentencepieceTokenizer(model=model)
    import sentencepiece  # pylint: disable=g-import-not-at-top
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    object.__setattr__(self, "_processor", processor)
    ids = [processor.piece_to_id(t) for t in self.special_tokens]
    unknown = processor.unk_id()
    missing = [t for t, i in zip(self.special_tokens, ids)
               if i == unknown and t != "<unk>"]
    if missing:
      raise DataError(f"{source} has no {missing[0]} piece")
    object.__setattr__(self, "_special", dict(zip(self.special_tokens,
                                                  (int(i) for i in ids))))
    ordered = sorted(self.special_tokens, key=len, reverse=True)
    self._special_pattern = "|".join(
        f"[{_WS}]*{_re2_escape(t)}" if t in self.lstrip_tokens
        else _re2_escape(t) for t in ordered)
    self._special_ids = _table(ordered, [self._special[t] for t in ordered],
                               -1, tf.int64)

  @property
  def vocab_size(self) -> int:
    return self._processor.get_piece_size()

  @property
  def vocab(self):
    """The pieces in id order."""
    return [self._processor.id_to_piece(i)
            for i in range(self._processor.get_piece_size())]

  def token_to_id(self, token: str) -> int:
    return self._processor.piece_to_id(token)

  def get_special_tokens_dict(self):
    """Ids of the special tokens, named as BertTokenizer's."""
    ids = dict(padding_id=self._special["<pad>"],
               start_of_sequence_id=self._special["[CLS]"],
               end_of_segment_id=self._special["[SEP]"],
               unknown_id=self._processor.unk_id(),
               vocab_size=self._processor.get_piece_size())
    if "[MASK]" in self._special:
      ids["mask_id"] = self._special["[MASK]"]
    return ids

  # Words alone tokenize as inside a sentence (it splits on spaces).
  word_prefix = ""

  @staticmethod
  def packer_options():
    """ALBERT packs as BERT: `[CLS] a [SEP] b [SEP]`, segment type ids."""
    return {}

  def tokenize(self, texts, with_offsets: bool = False):
    """string [batch] -> ids [batch, (tokens)]."""
    if with_offsets:
      raise NotImplementedError("SentencePieceTokenizer has no offsets yet")
    return self.call(texts)

  def normalize(self, texts):
    texts = tf.strings.regex_replace(texts, "``|''", '"')
    if not self.keep_accents:
      texts = tf_text.normalize_utf8(texts, "NFKD")
      texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    if self.lower_case:
      texts = tf.strings.lower(texts, encoding="utf-8")
    return texts

  def call(self, texts):
    texts = tf.convert_to_tensor(texts, tf.string)
    pieces, _, _ = tf_text.regex_split_with_offsets(
        texts, self._special_pattern, self._special_pattern)
    flat = pieces.flat_values
    stripped = tf.strings.regex_replace(flat, f"^[{_WS}]+", "")
    special_ids = self._special_ids.lookup(stripped)
    is_special = tf.logical_and(special_ids >= 0, tf.strings.regex_full_match(
        flat, self._special_pattern))
    ids = self._sp.tokenize(self.normalize(flat))            # [piece, (ids)]
    ids = tf.cast(ids, tf.int64).with_row_splits_dtype(tf.int64)
    n_tokens = tf.where(is_special, tf.ones_like(ids.row_lengths()),
                        ids.row_lengths())
    keep = tf.repeat(tf.logical_not(is_special), ids.row_lengths())
    plain = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids.flat_values, keep),
        tf.where(is_special, tf.zeros_like(n_tokens), ids.row_lengths()))
    merged = _interleave(plain, special_ids, is_special, n_tokens)
    return tf.RaggedTensor.from_row_splits(
        tf.cast(merged, tf.int32),
        tf.gather(tf.concat([[0], tf.cumsum(n_tokens)], 0), pieces.row_splits))

  def get_config(self):
    config = super().get_config()
    if self.model_file is None:
      config.update(model=base64.b64encode(self._model).decode("ascii"))
    config.update(model_file=self.model_file, lower_case=self.lower_case,
                  keep_accents=self.keep_accents,
                  special_tokens=list(self.special_tokens),
                  lstrip_tokens=list(self.lstrip_tokens))
    return config
