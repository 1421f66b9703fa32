"""The fine-tuning losses, as (numerator, denominator) sums of a batch.

One definition each, used by the task classes (`compute_stats`, for the
custom training loop, where the denominators are summed over the global
batch first) and by the task models' Keras `compile()` defaults (where the
loss of a batch is numerator / denominator). Shapes:
  classification  logits [batch, classes] (packed: [batch, k, classes]),
                  labels [batch] (packed: [batch, k]); regression: one logit.
  token tagging   logits [batch, seq, tags], label_ids [batch, seq] with -1
                  where no tag is predicted (padding, [CLS], [SEP], the
                  second and later wordpieces of a word).
  spans           start/end logits [batch, seq], positions [batch].
  multiple choice logits [batch, choices], labels [batch].
"""

from typing import Optional

import tensorflow as tf

from bert.tasks.base import Stats, softmax_stats


def classification_stats(logits, labels, weights: Optional[tf.Tensor] = None,
                         regression: bool = False) -> Stats:
  """Softmax cross-entropy and accuracy; squared error for regression."""
  if not regression:
    return softmax_stats(logits, labels, weights)
  weights = (tf.ones_like(labels, tf.float32) if weights is None
             else tf.cast(weights, tf.float32))
  error = logits[..., 0] - tf.cast(labels, tf.float32)
  return dict(loss=(tf.reduce_sum(tf.square(error) * weights),
                    tf.reduce_sum(weights)))


def token_weights(label_ids) -> tf.Tensor:
  """1 where a tag is predicted, 0 at positions labelled -1."""
  return tf.cast(tf.convert_to_tensor(label_ids) >= 0, tf.float32)


def token_stats(logits, label_ids) -> Stats:
  """Cross-entropy and accuracy over the tagged positions."""
  labels = tf.maximum(tf.cast(label_ids, tf.int32), 0)
  return softmax_stats(logits, labels, token_weights(label_ids))


def span_stats(start_logits, end_logits, start_positions, end_positions,
               input_mask) -> Stats:
  """google-research run_squad's loss: the mean of the start and end
  cross-entropies, with positions past the real tokens never answers."""
  mask = tf.cast(tf.convert_to_tensor(input_mask) > 0, tf.float32)
  n = tf.cast(tf.shape(start_logits)[0], tf.float32)
  total, accuracies = 0.0, {}
  for name, logits, positions in (("start", start_logits, start_positions),
                                  ("end", end_logits, end_positions)):
    stats = softmax_stats(logits + (1.0 - mask) * -10000.0, positions)
    total += stats["loss"][0]
    accuracies[f"{name}_accuracy"] = stats["accuracy"]
  return dict(loss=(total / 2.0, n), **accuracies)
