"""Dynamic masking: masked-LM predictions drawn in the tf.data pipeline.

Static records fix each instance's masks at creation (`dupe_factor` copies
with different masks). With dynamic masking every pass over the data draws new
masks, with the same rules as `pretraining_data.mask_batch` (the reference's):
num_to_predict = min(max_predictions_per_seq, max(1, round(length * prob)))
with [CLS]/[SEP] counted in the length but never masked; candidate words (a
piece, or with whole-word masking a piece and its "##" continuations) visited
in random order and taken while they fit; each chosen position [MASK] 80%,
unchanged 10%, a random id 10%.

Any pre-training record works as input: the masks already in a record are
undone first (its `masked_lm_ids` put back at `masked_lm_positions`), so
records written for static masking, ours or the reference's, can be re-masked.
Draws are stateless, keyed by (seed, batch index): deterministic, different
every epoch, and a resumed run (which continues the batch index) draws what an
uninterrupted one would.
"""

from typing import Dict

import tensorflow as tf

from bert.data.vocab import Vocab
from bert.validation import check_float, check_int


class DynamicMasker:
  """Re-masks batches of pre-training features (TF Hub input names).

  Args:
    vocab_file: the vocab the records were written with.
    max_predictions_per_seq: P, the width of the masked_lm_* features.
    masked_lm_prob: fraction of tokens to predict.
    do_whole_word_mask: mask all pieces of a word together.
    seed: with the batch index, determines every draw.
  """

  def __init__(self, vocab_file: str, max_predictions_per_seq: int = 20,
               masked_lm_prob: float = 0.15, do_whole_word_mask: bool = False,
               seed: int = 0):
    check_float("DynamicMasker", "masked_lm_prob", masked_lm_prob, 0, 1,
                min_open=True, max_open=True)
    check_int("DynamicMasker", "max_predictions_per_seq",
              max_predictions_per_seq, minimum=1)
    vocab = Vocab.from_file(vocab_file)
    self.cls, self.sep, self.mask = vocab.cls, vocab.sep, vocab.mask
    self.vocab_size = vocab.size
    # A NumPy array, not a tensor: building the masker must not start
    # TensorFlow's runtime (a multi-worker strategy is configured after it).
    self.is_continuation = vocab.is_continuation
    self.max_predictions_per_seq = max_predictions_per_seq
    self.masked_lm_prob = masked_lm_prob
    self.do_whole_word_mask = do_whole_word_mask
    self.seed = seed

  def unmask(self, features) -> tf.Tensor:
    """input_word_ids with a record's static masks undone: int32 [B, S]."""
    ids = features["input_word_ids"]
    if "masked_lm_positions" not in features:
      return ids
    seq = tf.shape(ids)[1]
    real = tf.cast(features["masked_lm_weights"] > 0, tf.int32)     # [B, P]
    hot = tf.one_hot(features["masked_lm_positions"], seq,
                     dtype=tf.int32) * real[..., None]               # [B, P, S]
    restored = tf.reduce_sum(hot * features["masked_lm_ids"][..., None], 1)
    return tf.where(tf.reduce_max(hot, 1) > 0, restored, ids)

  def __call__(self, features: Dict[str, tf.Tensor],
               batch_index: tf.Tensor) -> Dict[str, tf.Tensor]:
    ids = self.unmask(features)                                      # [B, S]
    batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
    p = self.max_predictions_per_seq
    seeds = tf.random.experimental.stateless_split(
        tf.stack([tf.cast(self.seed, tf.int64), tf.cast(batch_index, tf.int64)]),
        num=3)
    lengths = tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), 1)
    candidate = ((features["input_mask"] > 0) & (ids != self.cls)
                 & (ids != self.sep))
    # float64 and half-to-even rounding, like the reference's Python round().
    num_to_predict = tf.minimum(p, tf.maximum(1, tf.cast(tf.round(
        tf.cast(lengths, tf.float64) * self.masked_lm_prob), tf.int32)))
    cand_int = tf.cast(candidate, tf.int32)
    if self.do_whole_word_mask:
      continuation = tf.gather(self.is_continuation, ids)
      starts = candidate & ~(continuation & (tf.cumsum(cand_int, 1) > 1))
    else:
      starts = candidate
    word = tf.where(candidate, tf.cumsum(tf.cast(starts, tf.int32), 1) - 1, -1)
    word_length = tf.reduce_sum(tf.one_hot(word, seq, dtype=tf.int32), 1)  # [B, W]
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32), 1)
    # Visit words in random order; take each that still fits.
    keys = tf.random.stateless_uniform([batch, seq], seeds[0])
    keys = tf.where(tf.range(seq)[None, :] >= num_words[:, None], 2.0, keys)
    order = tf.argsort(keys, axis=1, stable=True)
    length_in_order = tf.gather(word_length, order, batch_dims=1)

    def visit(count, length_k):
      fits = (length_k > 0) & (count + length_k <= num_to_predict)
      return count + tf.where(fits, length_k, 0)

    counts = tf.scan(visit, tf.transpose(length_in_order),
                     initializer=tf.zeros([batch], tf.int32))         # [W, B]
    before = tf.concat([tf.zeros([1, batch], tf.int32), counts[:-1]], 0)
    fits_in_order = tf.transpose(counts > before)                    # [B, W]
    taken = tf.gather(fits_in_order, tf.argsort(order, axis=1), batch_dims=1)
    chosen = candidate & tf.gather(taken, tf.maximum(word, 0), batch_dims=1)
    # 80% [MASK], 10% unchanged, 10% random id.
    draw = tf.random.stateless_uniform([batch, seq], seeds[1])
    random_ids = tf.random.stateless_uniform(
        [batch, seq], seeds[2], minval=0, maxval=self.vocab_size, dtype=tf.int32)
    masked = tf.where(chosen & (draw < 0.8), self.mask, ids)
    masked = tf.where(chosen & (draw >= 0.9), random_ids, masked)
    # Predicted positions in ascending order, padded to P.
    first = tf.argsort(tf.cast(~chosen, tf.int32), axis=1, stable=True)[:, :p]
    has = tf.gather(chosen, first, batch_dims=1)
    out = dict(features)
    out["input_word_ids"] = masked
    out["masked_lm_positions"] = tf.where(has, first, 0)
    out["masked_lm_ids"] = tf.where(has, tf.gather(ids, first, batch_dims=1), 0)
    out["masked_lm_weights"] = tf.cast(has, tf.float32)
    return out
