"""The FLOP accounting behind `bench.real_lengths`' ceiling column: it must
agree with `bench.run`'s formula, count the [CLS]-only last layer right, and
charge Hugging Face for exactly its padding."""

import numpy as np

from bench import real_lengths
from bench import run


def test_forward_flops_equal_bench_run_formula_without_pooler():
  h = real_lengths.MINILM["hidden"]
  for length in (1, 25, 128, 384):
    expected = run.flops_per_sequence("minilm_l6", length, "infer") - 2 * h * h
    assert real_lengths.forward_flops(length) == expected


def test_cls_only_last_layer_saves_query_output_and_ffn_work_of_other_rows():
  s = real_lengths.MINILM
  h, i, length = s["hidden"], s["intermediate"], 100
  saved = real_lengths.forward_flops(length) - real_lengths.forward_flops(length, True)
  # Q, attention output and both FFN matmuls, plus scores and context, for
  # the 99 rows that are not [CLS]; K and V are still computed for all rows.
  assert saved == (length - 1) * (2 * (2 * h * h + 2 * h * i) + 4 * length * h)


def test_flops_per_real_token_charge_hf_for_its_padding_only():
  # Equal lengths: no padding, so HF's FLOPs per real token are the least.
  hf, least = real_lengths.flops_per_real_token(np.full(64, 40), False, "infer")
  assert hf == least == real_lengths.forward_flops(40) / 40
  # File-order batches of 32: one of lengths 10 (padded to 50 by one long
  # row), one of 50s.
  lengths = np.array([10] * 31 + [50] + [50] * 32)
  hf, least = real_lengths.flops_per_real_token(lengths, False, "infer")
  real = lengths.sum()
  assert np.isclose(hf, 64 * real_lengths.forward_flops(50) / real)
  assert np.isclose(least, (31 * real_lengths.forward_flops(10)
                            + 33 * real_lengths.forward_flops(50)) / real)
  assert hf > least
