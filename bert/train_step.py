"""The one training step, taken by `fit` (`KerasTraining.train_step`) and
by the custom loop (`bert.training.Trainer`).

The loss. A task's losses and metrics are stats: (numerator, denominator)
sums of a batch (`bert.losses`). The loss minimised is

  sum over the loss stats k of  numerator_k / (denominator_k + epsilon_k)

with every denominator summed over the *global* batch first (all replicas
and all accumulated micro-batches, `global_sums`): N micro-batches of B
rows make the step of one batch of N * B, and two replicas the step of one
replica with both their rows. epsilon_k is 0 (a zero denominator, a batch
with nothing to predict, then gives 0, as `tf.math.divide_no_nan`) unless
the stat sets one: the masked-LM loss adds 1e-5, as google-research's
`run_pretraining` does (`bert.losses.PRETRAINING_EPSILONS`); every other
loss is a plain mean, as the references compute it (google-research's
classifiers, Hugging Face's heads).

The update. The gradients of that loss (times the loss scale under
mixed_float16), zero for weights the loss does not reach (the pooler under
a token head: weight decay still applies), are summed over the replicas,
unscaled, clipped to global norm `clip_norm` and applied once.

The report. A stat over several steps is sum(numerators) /
sum(denominators) (`StatMean`): an epoch's loss is the loss of its
examples, not a mean of batch means.
"""

from typing import Callable, Dict, Mapping, Optional, Sequence

import tensorflow as tf
import tf_keras

from bert.losses import Stats


def loss_scaled(optimizer) -> bool:
  """Whether `optimizer` scales the loss (mixed_float16)."""
  return isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)


def replica_sum(values):
  """`values` (a nest of tensors) summed over the replicas of the step; on
  one replica, or outside a replica context, `values` themselves.

  Every sum over replicas in a step goes through here. In a traced step,
  `ReplicaContext.all_reduce` registers a custom gradient in TensorFlow's
  global registry, and that gradient holds the step's graph, with every
  variable it captures, for the life of the process (tensorflow#62854): on
  one replica, where the sum is the value, it is not called."""
  ctx = tf.distribute.get_replica_context()
  if ctx is None or ctx.num_replicas_in_sync == 1:
    return values
  return ctx.all_reduce(tf.distribute.ReduceOp.SUM, values)


def global_sums(values: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """`values` as float32, summed over the replicas of the step."""
  return replica_sum({k: tf.cast(v, tf.float32) for k, v in values.items()})


def loss(stats: Stats, denominators: Mapping[str, tf.Tensor],
         names: Sequence[str],
         epsilons: Optional[Mapping[str, float]] = None) -> tf.Tensor:
  """The loss to minimise (see the module doc): the loss stats `names` of
  `stats`, each numerator over its global `denominators` entry plus its
  `epsilons` entry (default 0)."""
  epsilons = epsilons or {}
  terms = []
  for name in names:
    numerator = stats[name][0]
    denominator = tf.stop_gradient(denominators[name])
    epsilon = epsilons.get(name, 0.0)
    terms.append(numerator / (denominator + epsilon) if epsilon else
                 tf.math.divide_no_nan(numerator, denominator))
  return tf.add_n(terms)


def gradients(tape: tf.GradientTape, loss_value: tf.Tensor, variables,
              optimizer, dense: bool = True) -> list:
  """The gradients of `loss_value` (recorded by `tape`) as `apply_gradients`
  takes them: of the loss times the loss scale under mixed_float16, zero
  for variables the loss does not reach; dense tensors, or with
  `dense=False` the IndexedSlices of embedding lookups with each row once
  (`summed_rows`), which spares two passes over the word table when nothing
  sums them before the update (one replica, one micro-batch)."""
  scale = (tf.cast(optimizer.loss_scale, loss_value.dtype)
           if loss_scaled(optimizer) else None)
  # The gradients of loss * scale, as `get_scaled_loss` would give them.
  grads = tape.gradient(loss_value, variables, output_gradients=scale)
  return [tf.zeros_like(v) if g is None
          else tf.convert_to_tensor(g) if dense else summed_rows(g)
          for g, v in zip(grads, variables)]


def apply_gradients(optimizer, grads, variables, clip_norm: float = 0.0,
                    observe: Optional[Callable[[tf.Tensor], None]] = None
                    ) -> None:
  """The update of a step: `grads` (from `gradients`) summed over replicas,
  unscaled (mixed_float16), clipped to global norm `clip_norm` (0: not
  clipped), then applied once.

  observe: called, before the update, with the global norm of the summed
    and unscaled gradients (NaN or Inf: an overflow, a step the
    LossScaleOptimizer skips), e.g. to count skipped steps.
  """
  grads = replica_sum(grads)
  if loss_scaled(optimizer):
    grads = optimizer.get_unscaled_gradients(grads)
  if clip_norm or observe is not None:
    # One pass over the gradients serves both: a NaN/Inf gradient makes
    # the norm non-finite (and clipping then makes every gradient NaN, so
    # the LossScaleOptimizer skips the step).
    norm = tf.linalg.global_norm(grads)
    if observe is not None:
      observe(norm)
    if clip_norm:
      grads, _ = tf.clip_by_global_norm(grads, clip_norm, use_norm=norm)
  # Dense for the fused Adam update.
  grads = [tf.convert_to_tensor(g) for g in grads]
  optimizer.apply_gradients(zip(grads, variables),
                            experimental_aggregate_gradients=False)


def summed_rows(grad):
  """`grad` with each row of an IndexedSlices once (repeated ids summed), so
  its values' norm is the norm of the dense gradient."""
  if not isinstance(grad, tf.IndexedSlices):
    return grad
  rows, slot = tf.unique(grad.indices)
  values = tf.math.unsorted_segment_sum(grad.values, slot, tf.size(rows))
  return tf.IndexedSlices(values, rows, grad.dense_shape)


# ------------------------------------------------------------------ report
@tf_keras.utils.register_keras_serializable(package="bert")
class StatMean(tf_keras.metrics.Metric):
  """One stat over the steps since the last reset: the sum of its
  numerators over the sum of its denominators (0 before any)."""

  def __init__(self, name: str = "stat", **kwargs):
    super().__init__(name=name, **kwargs)
    self.numerator = self.add_weight("numerator", initializer="zeros")
    self.denominator = self.add_weight("denominator", initializer="zeros")

  def update_state(self, numerator, denominator):
    self.numerator.assign_add(tf.cast(numerator, tf.float32))
    self.denominator.assign_add(tf.cast(denominator, tf.float32))

  def result(self):
    return tf.math.divide_no_nan(self.numerator, self.denominator)


def stat_means(names: Sequence[str]) -> Dict[str, StatMean]:
  """A running `StatMean` per stat name."""
  return {name: StatMean(name=name) for name in names}


def record(means: Mapping[str, StatMean], stats: Stats,
           skip: Sequence[str] = ()) -> None:
  """Adds a batch's `stats` (but those in `skip`) to their `means`."""
  for name, (numerator, denominator) in stats.items():
    if name in skip:
      continue
    if name not in means:
      raise KeyError(f"the stats of a batch include {name!r}, which is not "
                     f"among the stat names {list(means)}")
    means[name].update_state(numerator, denominator)
