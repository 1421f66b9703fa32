"""Pre-training records: masked instances -> serialised tf.train.Examples.

Writing: `encode_instances` masks a batch of `pretraining_data.Instance`s and
lays them out as the reference's features (`bert.features.RECORD_FEATURES`:
int64 ids, masks and positions, float32 weights, fixed widths);
`encode_examples` then writes the `tf.train.Example` protobuf by hand, from
whole NumPy matrices rather than one proto object per instance, and it
parses to the same Example. Reading: `feature_spec` is the reference's
parsing spec of the same records.
"""

import collections
import itertools
from typing import Dict, List, Sequence

import numpy as np

from bert.data.pretraining_data import Instance, PretrainingDataConfig, mask_batch
from bert.data.vocab import Vocab
from bert.features import RECORD_FEATURES


def _varint(value: int) -> bytes:
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


# Varints of every length a record field can have: a list lookup instead of
# encoding each one in Python.
_VARINTS = [_varint(i) for i in range(1 << 16)]


def _packed_varints(matrix: np.ndarray) -> List[bytes]:
  """Each row of a non-negative int matrix (< 2**21) as packed varints."""
  v = matrix.astype(np.int64)
  if v.size and (v.min() < 0 or v.max() >= 1 << 21):
    raise ValueError("feature values must be in [0, 2**21)")
  parts = np.stack([(v & 0x7F) | np.where(v >= 1 << 7, 0x80, 0),
                    ((v >> 7) & 0x7F) | np.where(v >= 1 << 14, 0x80, 0),
                    v >> 14], axis=-1).astype(np.uint8)
  keep = np.stack([np.ones_like(v, bool), v >= 1 << 7, v >= 1 << 14], axis=-1)
  flat = parts[keep].tobytes()
  ends = np.cumsum(keep.reshape(len(v), -1).sum(axis=1))
  starts = np.concatenate([[0], ends[:-1]])
  return [flat[a:b] for a, b in zip(starts, ends)]


def _entry_prefix(name: str) -> bytes:
  """map entry key (field 1) and the value tag (field 2) of a feature."""
  key = name.encode()
  return b"\x0a" + _varint(len(key)) + key + b"\x12"


def _feature_entry(prefix: bytes, kind: bytes, payload: bytes) -> bytes:
  """One map<string, Feature> entry; kind b"\x1a" = int64_list, b"\x12" =
  float_list, each holding one packed `value` field."""
  values = b"\x0a" + _VARINTS[len(payload)] + payload
  feature = kind + _VARINTS[len(values)] + values
  entry = prefix + _VARINTS[len(feature)] + feature
  return b"\x0a" + _VARINTS[len(entry)] + entry


def encode_examples(features: Dict[str, np.ndarray]) -> List[bytes]:
  """Serialised tf.train.Examples, one per row, without building protos.

  int matrices become int64_list features (packed varints), float matrices
  float_list (packed little-endian float32). `tf.io.parse_single_example`
  reads them exactly as it reads `tf.train.Example.SerializeToString()`.
  """
  columns = []
  for name, matrix in features.items():
    prefix = _entry_prefix(name)
    if np.issubdtype(matrix.dtype, np.floating):
      rows = [r.tobytes() for r in matrix.astype("<f4")]
      columns.append([_feature_entry(prefix, b"\x12", r) for r in rows])
    else:
      columns.append([_feature_entry(prefix, b"\x1a", r)
                      for r in _packed_varints(matrix)])
  out = []
  for parts in zip(*columns):
    body = b"".join(parts)
    out.append(b"\x0a" + _VARINTS[len(body)] + body)
  return out


def encode_instances(instances: Sequence[Instance], config: PretrainingDataConfig,
                     vocab: Vocab, rng: np.random.Generator):
  """Masks a batch of instances and serialises them; returns (records,
  lengths, prediction counts): n bytes, int [n], int [n]."""
  n, width = len(instances), config.seq_length
  lengths = np.array([len(x.tokens) for x in instances])          # [n]
  mask = (np.arange(width)[np.newaxis, :] < lengths[:, np.newaxis])  # [n, seq]
  tokens = np.zeros((n, width), np.int32)                          # [n, seq]
  segments = np.zeros((n, width), np.int32)                        # [n, seq]
  # Row-major boolean assignment fills each row's first `length` slots.
  tokens[mask] = np.fromiter(itertools.chain.from_iterable(
      x.tokens for x in instances), np.int32, count=int(lengths.sum()))
  segments[mask] = np.fromiter(itertools.chain.from_iterable(
      x.segment_ids for x in instances), np.int32, count=int(lengths.sum()))
  positions, labels, count = mask_batch(tokens, lengths, config, vocab, rng)
  p = config.max_predictions_per_seq
  # positions, labels, weights: [n, P]; next_sentence: [n, 1].
  weights = (np.arange(p)[np.newaxis, :] < count[:, np.newaxis]).astype(np.float32)
  next_sentence = np.array([[int(x.is_random_next)] for x in instances])
  records = encode_examples(collections.OrderedDict(zip(RECORD_FEATURES, (
      tokens, mask.astype(np.int32), segments, positions, labels, weights,
      next_sentence))))
  return records, lengths, count


def feature_spec(seq_length: int, max_predictions_per_seq: int):
  """The reference's parsing spec (run_pretraining.input_fn_builder)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  widths = [seq_length] * 3 + [max_predictions_per_seq] * 3 + [1]
  return {name: tf.io.FixedLenFeature(
      [width], tf.float32 if name == "masked_lm_weights" else tf.int64)
          for name, width in zip(RECORD_FEATURES, widths)}
