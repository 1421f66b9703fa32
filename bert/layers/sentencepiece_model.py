"""SentencePiece model files (ALBERT's `spiece.model`): reading and parsing
the serialized ModelProto, with the scores the reference tokenizer gives
number-comma pieces. `SentencePieceTokenizer` segments with the model;
`Vocabulary` carries it.
"""

from bert.errors import DataError


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
