"""The one training step (`bert.train_step`): its loss-normalisation rule,
its report, and the update it applies."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import losses, train_step
from bert.models import BertPretrainer
from bert.tasks import PretrainingTask, Task


def test_loss_is_each_numerator_over_its_global_denominator():
  stats = dict(a=(tf.constant(6.0), tf.constant(3.0)),
               b=(tf.constant(4.0), tf.constant(2.0)),
               c=(tf.constant(5.0), tf.constant(0.0)))
  dens = dict(a=tf.constant(6.0), b=tf.constant(8.0), c=tf.constant(0.0))
  # Over the global denominators, not the batch's own (3 and 2).
  assert float(train_step.loss(stats, dens, ("a", "b"))) == 6 / 6 + 4 / 8
  # A stat with nothing to count adds 0, not NaN.
  assert float(train_step.loss(stats, dens, ("a", "c"))) == 1.0
  # An epsilon only where a stat sets one (the masked-LM loss).
  got = float(train_step.loss(stats, dens, ("a", "b"), dict(a=1e-5)))
  assert got == pytest.approx(6 / (6 + 1e-5) + 4 / 8, rel=1e-7)
  assert got != float(train_step.loss(stats, dens, ("a", "b")))   # control


def test_the_masked_lm_epsilon_is_one_setting_of_both_paths():
  assert losses.PRETRAINING_EPSILONS == dict(masked_lm_loss=1e-5)
  assert PretrainingTask.loss_epsilons is losses.PRETRAINING_EPSILONS
  assert BertPretrainer.loss_epsilons is losses.PRETRAINING_EPSILONS
  assert PretrainingTask.loss_names == BertPretrainer.loss_names
  assert Task.loss_epsilons == {}


def test_stat_mean_is_summed_numerators_over_summed_denominators():
  mean = train_step.StatMean(name="loss")
  assert float(mean.result()) == 0.0
  for num, den in ((3.0, 1.0), (2.0, 4.0)):
    mean.update_state(num, den)
  assert float(mean.result()) == pytest.approx(5 / 5)   # a mean of means: 1.75
  mean.reset_state()
  assert float(mean.result()) == 0.0
  means = train_step.stat_means(("loss",))
  with pytest.raises(KeyError, match="'accuracy'"):
    train_step.record(means, dict(accuracy=(1.0, 1.0)))
  train_step.record(means, dict(loss=(2.0, 1.0), accuracy=(1.0, 1.0)),
                    skip=("accuracy",))
  assert float(means["loss"].result()) == 2.0


def _one_update(optimizer, clip_norm, sparse):
  table = tf.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
  unused = tf.Variable([7.0])
  variables = [table, unused]
  with tf.GradientTape() as tape:
    # Row 1 is looked up twice: its gradient rows must be summed.
    value = tf.reduce_sum(tf.gather(table, [1, 1, 2]) * 10.0)
  grads = train_step.gradients(tape, value, variables, optimizer,
                               dense=not sparse)
  if sparse:
    assert isinstance(grads[0], tf.IndexedSlices)
    assert sorted(grads[0].indices.numpy()) == [1, 2]
  train_step.apply_gradients(optimizer, grads, variables, clip_norm)
  return table.numpy(), unused.numpy()


@pytest.mark.parametrize("sparse", [False, True])
def test_update_clips_the_norm_of_the_summed_gradient(sparse):
  table, unused = _one_update(tf_keras.optimizers.legacy.SGD(1.0), 1.0, sparse)
  # Gradient rows: 0, 20 (twice 10), 10: global norm sqrt(2 * 400 + 2 * 100).
  norm = np.sqrt(1000.0)
  expected = np.array([[1, 2], [3 - 20 / norm, 4 - 20 / norm],
                       [5 - 10 / norm, 6 - 10 / norm]])
  np.testing.assert_allclose(table, expected, rtol=1e-6)
  np.testing.assert_array_equal(unused, [7.0])     # a zero gradient
  # Negative control: unclipped, the step is the raw gradient.
  table, _ = _one_update(tf_keras.optimizers.legacy.SGD(1.0), 0.0, sparse)
  np.testing.assert_allclose(table[1], [-17, -16])


def test_loss_scaled_gradients_are_unscaled_before_the_clip():
  scaled = tf_keras.mixed_precision.LossScaleOptimizer(
      tf_keras.optimizers.legacy.SGD(1.0), dynamic=False, initial_scale=1024.0)
  plain, _ = _one_update(tf_keras.optimizers.legacy.SGD(1.0), 0.0, False)
  got, _ = _one_update(scaled, 0.0, False)
  np.testing.assert_allclose(got, plain, rtol=1e-6)
