"""`bert.data.packing`: row grouping and the packed feature layout."""

import numpy as np
import pytest

from bert.data.packing import (choose_row_length, pack, pack_rows,
                               packing_summary)


@pytest.mark.parametrize("seed,max_per_row", [(0, 8), (1, 3), (2, 1)])
def test_rows_hold_every_example_once_within_limits(seed, max_per_row):
  rng = np.random.RandomState(seed)
  lengths = np.clip(rng.lognormal(3.0, 0.7, size=3000).astype(int), 1, 128)
  rows = pack_rows(lengths, 128, max_per_row)
  assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
  assert max(sum(lengths[i] for i in row) for row in rows) <= 128
  assert max(len(row) for row in rows) <= max_per_row
  if max_per_row == 1:
    assert len(rows) == len(lengths)
  else:   # close to the ideal: total tokens / row length
    ideal = np.ceil(lengths.sum() / 128)
    if max_per_row == 8:
      assert len(rows) <= 1.1 * ideal
    assert len(rows) < 0.6 * len(lengths)
  assert rows == pack_rows(lengths, 128, max_per_row)   # deterministic


def test_bad_lengths_name_the_example():
  with pytest.raises(ValueError, match="example 2 has length 9"):
    pack_rows([3, 4, 9], 8)
  with pytest.raises(ValueError, match="max_per_row"):
    pack_rows([3], 8, 0)


def test_packed_layout():
  seq = 8
  f = dict(input_word_ids=np.array([[5, 6, 7, 0, 0, 0, 0, 0],
                                    [8, 9, 0, 0, 0, 0, 0, 0],
                                    [1, 2, 3, 4, 5, 6, 0, 0]], np.int32),
           input_type_ids=np.array([[0, 1, 1, 0, 0, 0, 0, 0],
                                    [0, 1, 0, 0, 0, 0, 0, 0],
                                    [0, 0, 0, 1, 1, 1, 0, 0]], np.int32),
           label=np.array([10, 11, 12]),
           masked_lm_positions=np.array([[2, 0], [1, 0], [4, 5]], np.int32),
           masked_lm_weights=np.array([[1, 0], [1, 0], [1, 1]], np.float32))
  f["input_mask"] = (f["input_word_ids"] > 0).astype(np.int32)
  p = pack(f, seq, max_per_row=3)
  # Longest first (example 2, 6 tokens), then the longest that fits (1: 2).
  np.testing.assert_array_equal(p["packed_example_index"], [[2, 1, -1], [0, -1, -1]])
  np.testing.assert_array_equal(p["input_word_ids"][0], [1, 2, 3, 4, 5, 6, 8, 9])
  np.testing.assert_array_equal(p["input_type_ids"][0], [0, 0, 0, 1, 1, 1, 0, 1])
  np.testing.assert_array_equal(p["input_mask"], [[1, 1, 1, 1, 1, 1, 2, 2],
                                                  [1, 1, 1, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(p["input_positions"][0], [0, 1, 2, 3, 4, 5, 0, 1])
  np.testing.assert_array_equal(p["cls_positions"], [[0, 6, 0], [0, 0, 0]])
  np.testing.assert_array_equal(p["packed_example_mask"], [[1, 1, 0], [1, 0, 0]])
  np.testing.assert_array_equal(p["label"], [[12, 11, 0], [10, 0, 0]])
  # Positions shifted by each example's offset, concatenated per row.
  np.testing.assert_array_equal(p["masked_lm_positions"][0], [4, 5, 7, 6, 0, 0])
  np.testing.assert_array_equal(p["masked_lm_weights"][0], [1, 1, 1, 0, 0, 0])
  assert "3 examples into 2 rows of 8" in packing_summary([3, 2, 6], [[2, 1], [0]], 8)


def test_packed_rows_shorter_than_the_encoded_length():
  mask = np.array([[1] * 3 + [0] * 5, [1] * 2 + [0] * 6, [1] * 4 + [0] * 4])
  f = dict(input_word_ids=mask * 7, input_mask=mask, label=np.arange(3))
  p = pack(f, 8, row_length=6)
  assert p["input_word_ids"].shape == (2, 6)
  np.testing.assert_array_equal(p["input_mask"], [[1, 1, 1, 1, 2, 2],
                                                  [1, 1, 1, 0, 0, 0]])
  with pytest.raises(ValueError, match=r"example 2 has length 4, outside "
                     r"\[1, row length 3\]"):
    pack(f, 8, row_length=3)
  with pytest.raises(ValueError, match=r"row_length=9 must be in \[1, seq_length=8\]"):
    pack(f, 8, row_length=9)


@pytest.mark.parametrize("length,hidden,expected", [
    # 32 examples of 60: one per row of 64 or 96, two per row of 128: as
    # many positions in rows of 64 as of 128, and attention is cheaper.
    (60, 384, 64),
    # 33 tokens: 32 rows of 64, 16 of 96 (2 each), 11 of 128 (3 each).
    # Wide (H=384): positions dominate, 1408 x (6H+128) < 1536 x (6H+96).
    (33, 384, 128),
    # Narrow (H=8): attention weighs more, 1536 x 144 < 1408 x 176.
    (33, 8, 96),
])
def test_row_length_of_least_estimated_cost(length, hidden, expected):
  lengths = [length] * 32
  assert choose_row_length(lengths, (32, 64, 96, 128), hidden, 32) == expected


def test_row_length_holds_the_longest_example():
  lengths = [10] * 100 + [70]
  assert choose_row_length(lengths, (32, 64, 96, 128), 384, 32) >= 70
  assert choose_row_length([10] * 100, (32, 64, 96, 128), 384, 32) == 32
  with pytest.raises(ValueError, match=r"no candidate row length in \[32, 64\] "
                     r"holds the longest example \(70 tokens\)"):
    choose_row_length(lengths, (32, 64), 384)
