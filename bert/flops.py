"""Matmul FLOP counts of BERT encoder passes, for throughput and utilization
figures (the benchmarks' GFLOP/s and "least FLOPs" columns).

Counted: the dense layers (2 FLOPs per multiply-add) and the two attention
products; not counted: softmax, layer norms, activations and embeddings,
which are a few percent at BERT's shapes. A training step is 3x the forward
pass (the backward pass computes two matmuls per forward matmul).
"""

from typing import Sequence, Tuple

import numpy as np

TRAIN_FACTOR = 3


def encoder_flops(config, length: int, pooled_only: bool = False) -> int:
  """FLOPs of one forward pass over a row of `length` positions.

  `config` has `num_hidden_layers`, `hidden_size` and `intermediate_size`
  (a BertConfig). `pooled_only`: the last layer computes the [CLS] row only
  (queries, attention output and feed-forward for one row; keys and values
  still for every position). The pooler is not included (`pooler_flops`).
  """
  h, i = config.hidden_size, config.intermediate_size

  def layer(rows):
    return (2 * rows * (2 * h * h + 2 * h * i)   # Q, attention output, FFN
            + 2 * length * 2 * h * h            # K, V: every position
            + 4 * rows * length * h)            # scores and context
  return ((config.num_hidden_layers - 1) * layer(length)
          + layer(1 if pooled_only else length))


def pooler_flops(config) -> int:
  """FLOPs of the pooler's dense layer on the [CLS] vector."""
  return 2 * config.hidden_size * config.hidden_size


def flops_per_real_token(config, lengths: Sequence[int], batch_size: int,
                         pooled_only: bool = False,
                         random_batches: int = 0) -> Tuple[float, float]:
  """(padded, least) forward FLOPs per real token over examples of
  `lengths`: padded, when each batch of `batch_size` is padded to its
  longest row (batches in order, or with `random_batches` > 0 the mean over
  that many batches drawn at random with seed 0, as a training run draws
  them); least, when every example runs at its own length. Training is
  `TRAIN_FACTOR` x both, so the ratio holds for training too."""
  lengths = np.asarray(lengths)
  if random_batches:
    rng = np.random.default_rng(0)
    batches = [lengths[rng.integers(0, len(lengths), batch_size)]
               for _ in range(random_batches)]
  else:
    batches = [lengths[i:i + batch_size]
               for i in range(0, len(lengths), batch_size)]
  padded = sum(len(b) * encoder_flops(config, int(b.max())) for b in batches)
  real = sum(int(b.sum()) for b in batches)
  least = sum(encoder_flops(config, int(n), pooled_only)
              for b in batches for n in b)
  return padded / real, least / real
