"""The harness's own tests: it passes a correct layer and model, and each of
its checks catches the bug it is there for (negative controls)."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert.tasks import Task
import harness

X = np.random.RandomState(0).randn(3, 5, 8).astype(np.float32)


@tf_keras.utils.register_keras_serializable(package="harness_test")
class Scaled(tf_keras.layers.Layer):
  """A correct layer: dense, dropout, times a constant."""

  def __init__(self, units, scale=1.0, dropout_rate=0.0, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.scale = scale
    self.dropout_rate = dropout_rate
    self.dense = tf_keras.layers.Dense(units, name="dense")
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def build(self, input_shape):
    self.dense.build(input_shape)
    super().build(input_shape)

  def call(self, x, training=None):
    return self.dropout(self.dense(x), training=training) * self.scale

  def get_config(self):
    config = super().get_config()
    config.update(units=self.units, scale=self.scale,
                  dropout_rate=self.dropout_rate)
    return config


@tf_keras.utils.register_keras_serializable(package="harness_test")
class ForgetsDropout(Scaled):
  """get_config drops an argument that inference outputs do not show."""

  def get_config(self):
    config = super().get_config()
    del config["dropout_rate"]
    return config


@tf_keras.utils.register_keras_serializable(package="harness_test")
class StaticBatchBranch(Scaled):
  """Only right while the batch size is static: a Python branch on it."""

  def call(self, x, training=None):
    y = super().call(x, training=training)
    return y if x.shape[0] is not None else 2.0 * y


@tf_keras.utils.register_keras_serializable(package="harness_test")
class ReversedGradient(Scaled):
  """Forward right, gradient of the wrong sign (a broken custom gradient)."""

  def call(self, x, training=None):

    @tf.custom_gradient
    def reverse(y):
      return tf.identity(y), lambda dy: -dy

    return reverse(super().call(x, training=training))


@tf_keras.utils.register_keras_serializable(package="harness_test")
class UnusedWeight(Scaled):
  """A trainable weight the outputs never use."""

  def build(self, input_shape):
    self.unused = self.add_weight("unused", shape=[3])
    super().build(input_shape)


@tf_keras.utils.register_keras_serializable(package="harness_test")
class LowPrecisionWeights(Scaled):
  """Creates its weights in the compute dtype: no float32 master weights."""

  def build(self, input_shape):
    self.bias2 = self.add_weight("bias2", shape=[self.units],
                                 dtype=self.compute_dtype)
    super().build(input_shape)

  def call(self, x, training=None):
    return super().call(x, training=training) + self.bias2


@tf_keras.utils.register_keras_serializable(package="harness_test")
class AlwaysFloat32(Scaled):
  """Ignores the policy: float32 outputs where bfloat16 is expected."""

  def call(self, x, training=None):
    return tf.cast(super().call(x, training=training), tf.float32)


@tf_keras.utils.register_keras_serializable(package="harness_test")
class TinyModel(tf_keras.Model):
  """A correct model: a dict in, a dict out, one `Scaled` inside."""

  def __init__(self, units=4, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.body = Scaled(units, scale=0.5, name="body")

  def call(self, inputs, training=None):
    return dict(out=self.body(inputs["x"], training=training))

  def get_config(self):
    return dict(units=self.units, name=self.name)


def with_offset(obj):
  """Sets state after construction that neither config nor weights hold."""
  call = obj.call
  obj.call = lambda *a, **k: tf.nest.map_structure(lambda t: t + 3.0,
                                                   call(*a, **k))
  return obj


# ------------------------------------------------------------ positive
def test_a_correct_layer_passes_every_check():
  out = harness.run_layer_test(
      Scaled, dict(units=4, scale=2.0, dropout_rate=0.1), X,
      expected_output_shape=(3, 5, 4),
      mixed_precision_policy=("mixed_bfloat16", "mixed_float16"))
  assert out.shape == (3, 5, 4)


def test_a_correct_model_passes_every_check():
  harness.run_model_test(TinyModel, dict(units=6), dict(x=X))


def test_unknown_check_names_are_rejected():
  with pytest.raises(ValueError, match="unknown checks"):
    harness.run_layer_test(Scaled, dict(units=4), X, checks=("configg",))


# ------------------------------------------------- negative controls
def test_config_check_catches_a_dropped_argument():
  with pytest.raises(AssertionError,
                     match=r"ForgetsDropout \[config\].*lacks.*'dropout_rate'"):
    harness.run_layer_test(ForgetsDropout, dict(units=4, dropout_rate=0.3), X,
                           checks=("config",))


def test_config_check_catches_state_outside_the_config():
  with pytest.raises(AssertionError,
                     match=r"\[config\]: from_config clone.*differs by 3"):
    harness.check_config_round_trip(with_offset(Scaled(4)), X)


def test_config_check_catches_an_unregistered_class():

  class Unregistered(Scaled):
    pass

  with pytest.raises(AssertionError, match=r"\[config\]: .*not registered"):
    harness.check_config_round_trip(Unregistered(4), X)


def test_config_check_catches_a_frozen_part_coming_back_trainable():
  model = TinyModel()
  model.body.trainable = False           # TinyModel's config does not say so
  with pytest.raises(AssertionError,
                     match=r"\[config\]: the clone has 2 trainable weights, "
                           r"the original 0"):
    harness.check_config_round_trip(model, dict(x=X))


def test_plain_saved_model_check_catches_static_shape_assumptions():
  with pytest.raises(AssertionError,
                     match=r"\[saved_model/plain\]: plain SavedModel.*differs"):
    harness.run_layer_test(StaticBatchBranch, dict(units=4), X,
                           checks=("saved_model",))


def test_keras_saved_model_check_catches_lost_state():
  model = with_offset(TinyModel())
  with pytest.raises(
      AssertionError,
      match=r"\[saved_model/keras\]: tf_keras.models.load_model"):
    harness.check_saved_model(model, dict(x=X), mode="keras")


def test_training_check_catches_a_gradient_of_the_wrong_sign():
  with pytest.raises(AssertionError, match=r"\[training\].*did not lower"):
    harness.run_layer_test(ReversedGradient, dict(units=4), X,
                           checks=("training",))


def test_training_check_catches_a_weight_without_gradient():
  with pytest.raises(AssertionError,
                     match=r"\[training\]: no gradient reaches.*unused"):
    harness.run_layer_test(UnusedWeight, dict(units=4), X, checks=("training",))
  # Unless the test says that weight is unused on purpose.
  harness.run_layer_test(UnusedWeight, dict(units=4), X, checks=("training",),
                         no_gradient=("unused",))


def test_mixed_precision_check_catches_low_precision_variables():
  with pytest.raises(AssertionError, match=r"variables not float32.*bias2"):
    harness.run_layer_test(LowPrecisionWeights, dict(units=4), X,
                           checks=("mixed_precision",))
  assert tf_keras.mixed_precision.global_policy().name == "float32"


def test_mixed_precision_check_catches_wrong_output_dtype():
  with pytest.raises(AssertionError, match="is float32, expected bfloat16"):
    harness.run_layer_test(AlwaysFloat32, dict(units=4), X,
                           checks=("mixed_precision",))
  # ... which is right when the test expects float32 outputs.
  harness.run_layer_test(AlwaysFloat32, dict(units=4), X,
                         checks=("mixed_precision",),
                         expected_mixed_output_dtype="float32")


def test_mixed_precision_check_catches_overflow_and_restores_the_policy():
  big = X * 1e5          # beyond float16's range once multiplied out
  with pytest.raises(AssertionError, match=r"mixed_float16.*not finite"):
    harness.run_layer_test(Scaled, dict(units=4, scale=10.0), big,
                           checks=("mixed_precision",),
                           mixed_precision_policy="mixed_float16")
  assert tf_keras.mixed_precision.global_policy().name == "float32"


def test_mixed_precision_restores_the_policy_when_building_raises():

  @tf_keras.utils.register_keras_serializable(package="harness_test")
  class FailsUnderMixed(Scaled):

    def build(self, input_shape):
      if self.compute_dtype != "float32":
        raise RuntimeError("cannot build in " + self.compute_dtype)
      super().build(input_shape)

  with pytest.raises(RuntimeError, match="cannot build in bfloat16"):
    harness.run_layer_test(FailsUnderMixed, dict(units=4), X,
                           checks=("mixed_precision",))
  assert tf_keras.mixed_precision.global_policy().name == "float32"


def test_golden_check_catches_a_wrong_value():
  outputs = dict(y=tf.constant([[0.1, 0.2, 0.3]]))
  golden = {"y[0]": (lambda o: o["y"][0], [0.1, 0.2, 0.3])}
  harness.check_golden_values(outputs, golden, atol=1e-6)
  wrong = {"y[0]": (lambda o: o["y"][0], [0.1, 0.2, 0.3002])}
  with pytest.raises(AssertionError, match=r"golden y\[0\]: differs by 0.0002"):
    harness.check_golden_values(outputs, wrong, atol=1e-4)


# ------------------------------------------------------------- task checks
class RowsTask(Task):
  """The smallest task the loop trains: rows of 8 random ids, labelled by
  whether id 1 is among them, an embedding, dropout and a dense head.

  Its flaws are switched on one at a time: `mean` (the loss numerator is
  the batch mean, not the sum), `wrong_denominator` (the loop divides by
  another count than the stat's), `extra_stat` (a stat not in stat_names),
  `ignores_start_step` (a resumed run starts its data from the beginning)."""

  loss_names = ("loss",)
  stat_names = ("loss", "accuracy")
  global_batch_size = 4

  def __init__(self, **flaws):
    self.flaws = flaws
    rng = np.random.RandomState(0)
    self.ids = rng.randint(0, 20, size=(64, 8)).astype(np.int32)
    self.labels = (self.ids == 1).any(1).astype(np.int32)

  def build_model(self):
    ids = tf_keras.Input([8], dtype=tf.int32, name="input_word_ids")
    x = tf_keras.layers.Embedding(20, 8)(ids)
    x = tf_keras.layers.Dropout(0.2)(tf_keras.layers.GlobalAveragePooling1D()(x))
    return tf_keras.Model(ids, dict(logits=tf_keras.layers.Dense(2)(x)))

  def build_inputs(self, input_context, training, start_step=0):
    del input_context, training
    ds = tf.data.Dataset.from_tensor_slices(
        dict(input_word_ids=self.ids, label=self.labels)).batch(4).repeat()
    return ds if self.flaws.get("ignores_start_step") else ds.skip(start_step)

  def model_inputs(self, features):
    return {"input_word_ids": features["input_word_ids"]}

  def loss_denominators(self, features):
    n = tf.cast(tf.shape(features["label"])[0], tf.float32)
    return dict(loss=n + 1.0 if self.flaws.get("wrong_denominator") else n)

  def compute_stats(self, features, outputs):
    logits, labels = outputs["logits"], features["label"]
    n = tf.cast(tf.shape(labels)[0], tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                               labels), tf.float32)
    loss = tf.reduce_mean(losses) if self.flaws.get("mean") else tf.reduce_sum(losses)
    stats = dict(loss=(loss, n), accuracy=(tf.reduce_sum(correct), n))
    if self.flaws.get("extra_stat"):
      stats["confidence"] = (tf.reduce_sum(tf.reduce_max(logits, -1)), n)
    return stats


def test_stats_check_passes_sums_and_catches_what_lies():
  stats = harness.check_task_stats(RowsTask())
  assert stats["loss"][1] == 4.0 and 0 <= stats["accuracy"][0] <= 4
  with pytest.raises(AssertionError, match=r"RowsTask \[stats\].*a mean, not a sum"):
    harness.check_task_stats(RowsTask(mean=True))
  with pytest.raises(AssertionError, match=r"the loop divides by 5.0, the stat's own"):
    harness.check_task_stats(RowsTask(wrong_denominator=True))
  with pytest.raises(AssertionError, match=r"compute_stats gives .*confidence"):
    harness.check_task_stats(RowsTask(extra_stat=True))


@pytest.mark.heavy
def test_resume_check_passes_a_resumable_task_and_catches_data_from_step_0(
    tmp_path):
  harness.check_resume(RowsTask, tmp_path / "good")
  with pytest.raises(AssertionError, match=r"RowsTask \[determinism\]: resumed "
                     r"at step 2, the run ends .* from the uninterrupted one"):
    harness.check_resume(lambda: RowsTask(ignores_start_step=True),
                         tmp_path / "bad")


@pytest.mark.heavy
def test_task_checks_catch_a_fit_predict_and_export_that_differ(tmp_path):
  """A real task (classification) whose Keras path, predictions or export
  are compared against something else than what they should equal."""
  from tasks._tasks import CLASSIFIER, SMALL, make_task  # pylint: disable=g-import-not-at-top
  make = lambda: make_task(tmp_path, inputs=SMALL)
  whole = str(tmp_path / "whole")
  harness.train_run(make(), whole, 4, 2)
  # fit on other labels than the loop's lands elsewhere.
  with pytest.raises(AssertionError, match=r"\[fit\]: 4 fit steps end"):
    harness.check_fit_parity(make, whole, 4, targets=lambda f: 1 - f["label"])
  answers = CLASSIFIER
  task = make()
  # The task's predictions read in another order.
  with pytest.raises(AssertionError, match=r"\[predict\]: answer 0: Keras"):
    harness.check_predictions(
        task, whole, lambda t, d: answers["read_predictions"](t, d)[::-1],
        answers["raw_inputs"], answers["keras_answers"])
  model = harness.check_predictions(task, whole, answers["read_predictions"],
                                    answers["raw_inputs"],
                                    answers["keras_answers"])
  # The export asked about the texts in another order.
  with pytest.raises(AssertionError, match=r"\[export\]: answer 0: the export"):
    harness.check_export(model, tmp_path, lambda t: dict(text=t[::-1]),
                         answers["served_answers"], answers["keras_answers"],
                         answers["raw_inputs"](task))
