"""`bert.flops`: the FLOP counts behind the benchmarks' GFLOP/s and "least
FLOPs" columns, against closed forms, the [CLS]-only saving, and the
padding a batch pays for."""

import numpy as np

from bert.config import BertConfig
from bert.flops import encoder_flops, flops_per_real_token, pooler_flops

MINILM = BertConfig.preset("all_minilm_l6_v2")


def test_forward_pass_equals_the_closed_form():
  # Per layer: Q, K, V, attention output (4 h x h) and the FFN (2 h x i)
  # matmuls over every position, plus scores and context (2 x L x L x h).
  for config in (MINILM, BertConfig.preset("bert_base")):
    h, i = config.hidden_size, config.intermediate_size
    for length in (1, 25, 128, 384):
      expected = config.num_hidden_layers * (
          2 * length * (4 * h * h + 2 * h * i) + 4 * length * length * h)
      assert encoder_flops(config, length) == expected
    assert pooler_flops(config) == 2 * h * h


def test_cls_only_last_layer_saves_query_output_and_ffn_work_of_other_rows():
  h, i, length = MINILM.hidden_size, MINILM.intermediate_size, 100
  saved = encoder_flops(MINILM, length) - encoder_flops(MINILM, length, True)
  # Q, attention output and both FFN matmuls, plus scores and context, for
  # the 99 rows that are not [CLS]; K and V are still computed for all rows.
  assert saved == (length - 1) * (2 * (2 * h * h + 2 * h * i) + 4 * length * h)


def test_flops_per_real_token_charge_padding_only():
  forward = lambda n: encoder_flops(MINILM, n)
  # Equal lengths: no padding, so padded and least are the same.
  padded, least = flops_per_real_token(MINILM, np.full(64, 40), 32)
  assert padded == least == forward(40) / 40
  # Batches of 32 in order: one of lengths 10 (padded to 50 by one long
  # row), one of 50s.
  lengths = np.array([10] * 31 + [50] + [50] * 32)
  padded, least = flops_per_real_token(MINILM, lengths, 32)
  real = lengths.sum()
  assert np.isclose(padded, 64 * forward(50) / real)
  assert np.isclose(least, (31 * forward(10) + 33 * forward(50)) / real)
  assert padded > least
  # Random batches (training) of unequal lengths pay for padding too.
  padded, least = flops_per_real_token(MINILM, lengths, 32, random_batches=50)
  assert padded > least
