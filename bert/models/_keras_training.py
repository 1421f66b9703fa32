"""Keras training of the task models: `compile` with the library's
fine-tuning recipe, `fit`/`evaluate`/`predict` on raw text through the
model's preprocessor, and the training step `bert-train` also takes
(`bert.train_step`)."""

import math
from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert import distillation as distil
from bert import train_step as step
from bert.models import _keras_raw as raw_inputs
from bert.validation import ConfigError


class KerasTraining:
  """Mixed into `EncoderModel` (before `tf_keras.Model`, whose `compile`,
  `fit`, ... these extend). Subclasses give `objective`, `stat_names` and
  `default_metrics`; `preprocessor` comes from `EncoderModel`."""

  # The task's loss and metrics as (numerator, denominator) sums of a batch
  # (`bert.losses`, shared with the custom training loop); None: `compile`
  # needs an explicit loss.
  def objective(self, x, y, outputs):
    del x, y, outputs
    return None

  # The names of the objective's stats; those that make the loss, and their
  # denominators' epsilons (`bert.train_step.loss`).
  stat_names: Sequence[str] = ()
  loss_names: Sequence[str] = ("loss",)
  loss_epsilons: Mapping[str, float] = {}

  def default_metrics(self):
    """Keras metrics on `outputs[main_output]` beyond the objective's."""
    return []

  main_output = "logits"
  # Whether `fit` on raw inputs needs targets `y` (an embedder's ranking
  # loss learns from the pairing of its texts alone).
  needs_y = True

  def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
    """Keras `compile` with the library's fine-tuning recipe as defaults.

    optimizer: "auto" (or an `OptimizerConfig`): AdamW with lr 5e-5, weight
      decay 0.01 except LayerNorm weights and biases, 10% linear warmup and
      linear decay to 0 over the steps the first `fit` runs, global-norm
      clipping 1.0 (`bert.optimization.OptimizerConfig`, the recipe
      `bert-train` and `run_experiment` use); or any Keras optimizer (then
      clipping is off unless its own).
    loss: "auto": the task's loss (`bert.losses`); or a Keras loss applied
      to `outputs[main_output]`.
    metrics: "auto": the task's metrics (the objective's, e.g. accuracy,
      plus `default_metrics()`, e.g. F1 for two classes); or a list of
      Keras metrics on `outputs[main_output]` (the objective's are still
      reported).
    jit_compile (in kwargs): as Keras; by default what
      `from_pretrained(precision="auto")` chose (fp32: XLA; bf16: none),
      else off.
    """
    from bert.optimization import (  # pylint: disable=g-import-not-at-top
        OptimizerConfig)
    self._recipe, self.clip_norm = None, 0.0
    if isinstance(optimizer, str) and optimizer == "auto":
      optimizer = OptimizerConfig()
    if isinstance(optimizer, OptimizerConfig):
      # Built by `fit`, which knows how many steps the schedule spans.
      self._recipe, self.clip_norm = optimizer, optimizer.clip_norm
      optimizer = tf_keras.optimizers.legacy.SGD()
    self._task_loss = isinstance(loss, str) and loss == "auto"
    if self._task_loss and not self._has_objective():
      raise ValueError(f"{type(self).__name__} has no default loss; pass "
                       "compile(loss=...)")
    if isinstance(metrics, str) and metrics == "auto":
      metrics = self.default_metrics()
    self._output_metrics = bool(metrics)
    choice = getattr(self, "precision_choice", None)
    if kwargs.get("jit_compile") is None and choice is not None:
      kwargs["jit_compile"] = choice.jit_compile
    super().compile(optimizer=optimizer, loss=None if self._task_loss else loss,
                    metrics=metrics, **kwargs)
    if not hasattr(self, "_stat_metrics"):
      # Not tracked as the model's own (their sums are no weights of the
      # model); `metrics` lists them, so Keras reports and resets them.
      object.__setattr__(self, "_stat_metrics",
                         step.stat_means(self.stat_names))

  def check_targets(self, x, y) -> None:
    """Checks in-memory targets `y` of the encoder's int inputs `x` (a
    dict) once, before Keras' steps (e.g. class ids in range)."""
    del x, y

  def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
    """Keras `evaluate`; raw inputs (see `preprocessor`) are tokenized and
    batched by length bucket."""
    raw, x = raw_inputs.raw(self, x)
    if raw:
      x, y = raw_inputs.dataset(self, x, y, batch_size, "evaluate"), None
      batch_size = None
    else:
      raw_inputs.check_keras_targets(self, x, y)
    return super().evaluate(x, y, batch_size=batch_size, **kwargs)

  def predict(self, x, batch_size=None, **kwargs):
    """Keras `predict`; on raw inputs, what the task means (e.g. labels and
    probabilities, one tag per word; see the preprocessor's `decode`)."""
    raw, x = raw_inputs.raw(self, x)
    if not raw:
      return super().predict(x, batch_size=batch_size, **kwargs)
    batch_size = raw_inputs.batch_size(self, "predict", batch_size, 64)
    features = raw_inputs.features(self, x, None, "predict", needs_y=False)
    outputs = self.preprocessor.predict_features(
        self.inference_forward(features), features, batch_size)
    return self.preprocessor.decode(outputs, features, x)

  def fit(self, x=None, y=None, batch_size=None, epochs=1,
          validation_data=None, shuffle=True, teacher=None, distillation=None,
          **kwargs):
    """Keras `fit`. Raw inputs (see `preprocessor`) are tokenized once and
    fed as `bert-train` feeds them (`length_buckets.training_batches`:
    seeded shuffle, anew each pass; batches of one length bucket), one
    epoch being `ceil(rows / batch_size)` steps: the same global seed
    (`tf_keras.utils.set_random_seed`) gives the same batches, head and
    dropout masks as `bert-train` with `RuntimeConfig.seed`. With the
    recipe optimizer (`compile()`), the first call builds it with its
    schedule spanning the steps this call runs.

    Knowledge distillation: with `teacher` (a trained model of this task,
    same vocabulary), this model learns from the teacher's outputs on `x`,
    computed once before the first step, as `DistillationTask` does:
    soft targets at temperature T against the labels `y`, weighed by alpha
    (`distillation`, a `bert.distillation.DistillationConfig`; default
    T = 2, alpha = 0.5). `y` may be None (unlabeled text: soft targets only).
    The inner-layer (TinyBERT) losses need the teacher in every step:
    `bert-train --task=distill`.
    """
    dropout_generators(self)     # where run_experiment creates them
    raw, x = raw_inputs.raw(self, x)
    if teacher is not None and not raw:
      raise ValueError(f"{self.name}.fit(teacher=...) takes raw inputs (text, "
                       "through the preprocessor), which the teacher reads too")
    if raw:
      from bert.data import length_buckets as lb  # pylint: disable=g-import-not-at-top
      batch_size = raw_inputs.batch_size(self, "fit", batch_size, 32)
      features = raw_inputs.features(self, x, y, "fit",
                                     needs_y=teacher is None and self.needs_y)
      if teacher is not None:
        targets = self._distillation_targets(teacher, distillation, features, y)
      else:
        targets = self.preprocessor.targets(features)
      kwargs.setdefault("steps_per_epoch", lb.steps_per_epoch(
          self.preprocessor.num_rows(features), batch_size))
      x = self.preprocessor.dataset(features, targets, batch_size,
                                    training=True, shuffle=shuffle)
      y = None
    else:
      raw_inputs.check_keras_targets(self, x, y)
    validation_data = raw_inputs.validation_data(self, validation_data,
                                                 batch_size)
    if raw:
      batch_size = None
    if getattr(self, "_recipe", None) is not None:
      from bert.optimization import (  # pylint: disable=g-import-not-at-top
          build_optimizer)
      steps = _fit_steps(x, batch_size, epochs, kwargs.get("steps_per_epoch"),
                         kwargs.get("initial_epoch", 0))
      self.optimizer = build_optimizer(self._recipe.with_steps(steps))
      self._recipe = None
    # Traced anew: a step with or without a teacher's targets.
    self.train_function = None
    try:
      return super().fit(x, y, batch_size=batch_size, epochs=epochs,
                         validation_data=validation_data, shuffle=shuffle,
                         **kwargs)
    finally:
      if teacher is not None:
        self.train_function = None
        for name in ("soft_loss", "hard_loss"):
          self._stat_metrics.pop(name, None)

  def _distillation_targets(self, teacher, config, features, y):
    """The targets of a distillation `fit`: the labels (placeholders without
    `y`), `has_label`, and the teacher's outputs (`bert.distillation.
    teacher_columns`), after the checks `DistillationTask` makes too."""
    config = config or distil.DistillationConfig()
    if not isinstance(config, distil.DistillationConfig):
      raise ConfigError(f"{self.name}.fit: distillation must be a "
                        f"DistillationConfig, got {type(config).__name__}")
    if config.on_the_fly:
      raise ConfigError(f"{self.name}.fit(teacher=...) learns from the "
                        "teacher's outputs, computed once; the hidden-state and "
                        "attention losses and masking (an on-the-fly teacher) "
                        "are bert-train --task=distill's (DistillationTask)")
    kind = distil.teacher_kind(teacher, f"{self.name}.fit: the teacher",
                               student=self)
    mine, theirs = self.preprocessor, getattr(teacher, "preprocessor", None)
    if theirs is not None:
      distil.check_same_vocab(
          f"{self.name}.fit",
          (mine.vocabulary, mine.lower_case, "this model's preprocessor"),
          (theirs.vocabulary, theirs.lower_case, "the teacher's preprocessor"))
    targets = distil.teacher_columns(kind, mine.predict_features(
        teacher.inference_forward(features), features, 64))
    n, labeled = len(features["input_word_ids"]), y is not None
    targets["has_label"] = np.full([n], float(labeled), np.float32)
    if kind == "tokens":
      targets["word_start"] = features["word_start"]
      targets["label_ids"] = features["label_ids"]
    elif kind == "spans":
      for k in distil.LABELS[kind]:
        targets[k] = features[k] if labeled else np.zeros([n], np.int32)
    elif labeled:
      targets["label"] = mine.targets(features)
    else:
      targets["label"] = np.full([n], -1 if kind == "classification" else 0,
                                 np.int32 if kind == "classification" else np.float32)
    for name in ("soft_loss", "hard_loss"):
      self._stat_metrics.setdefault(name, step.StatMean(name=name))
    object.__setattr__(self, "_distillation", (kind, config))
    return targets

  def _has_objective(self) -> bool:
    return type(self).objective is not KerasTraining.objective

  def _step_stats(self, x, y, outputs, sample_weight):
    """The objective's stats of a batch, and this replica's share of the
    loss to minimise (`bert.train_step.loss` over the global batch)."""
    names, epsilons = self.loss_names, self.loss_epsilons
    if isinstance(y, dict) and "has_label" in y:   # a distillation fit
      kind, config = self._distillation
      stats = distil.loss_stats(
          kind, config, outputs, distil.teacher_outputs(kind, y),
          dict(y, input_mask=x["input_mask"]))
      stats["loss"] = stats.pop("prediction_loss")
      names, epsilons = ("loss",), {}
      if not self._task_loss:
        raise ValueError(f"{self.name}.fit(teacher=...) needs the task's loss: "
                         "compile(loss='auto')")
    else:
      stats = self.objective(x, y, outputs) if self._has_objective() else {}
    ctx = tf.distribute.get_replica_context()
    replicas = ctx.num_replicas_in_sync if ctx else 1
    if self._task_loss:
      if sample_weight is not None:
        raise ValueError(f"{self.name}: sample_weight needs a Keras loss in "
                         "compile(loss=...); the task's loss weighs examples "
                         "itself (e.g. -1 labels)")
      denominators = step.global_sums({k: stats[k][1] for k in names})
      loss = step.loss(stats, denominators, names, epsilons)
    else:   # each replica's share of the mean over the global batch
      loss = self.compiled_loss(y, outputs[self.main_output],
                                sample_weight) / replicas
    if self.losses:
      loss += tf.add_n(self.losses) / replicas
    return stats, loss

  def _metrics_of_step(self, y, outputs, sample_weight, stats):
    # Keras' own tracker reports a compiled loss.
    step.record(self._stat_metrics, stats,
                skip=() if self._task_loss else ("loss",))
    if self._output_metrics:
      if isinstance(y, dict) and "has_label" in y:   # a distillation fit
        if "label" not in y:
          return self.get_metrics_result()   # (their metrics read labels)
        y, sample_weight = y["label"], y["has_label"]
      self.compiled_metrics.update_state(y, outputs[self.main_output],
                                         sample_weight)
    return self.get_metrics_result()

  @property
  def metrics(self):
    return super().metrics + list(getattr(self, "_stat_metrics", {}).values())

  def train_step(self, data):
    """One step of `bert.train_step`, as the custom loop takes it."""
    x, y, sample_weight = tf_keras.utils.unpack_x_y_sample_weight(data)
    variables = self.trainable_variables
    with tf.GradientTape() as tape:
      outputs = self(x, training=True)
      stats, loss = self._step_stats(x, y, outputs, sample_weight)
    ctx = tf.distribute.get_replica_context()
    one_replica = ctx is None or ctx.num_replicas_in_sync == 1
    grads = step.gradients(tape, loss, variables, self.optimizer,
                           dense=not one_replica)
    step.apply_gradients(self.optimizer, grads, variables, self.clip_norm)
    return self._metrics_of_step(y, outputs, sample_weight, stats)

  def test_step(self, data):
    x, y, sample_weight = tf_keras.utils.unpack_x_y_sample_weight(data)
    outputs = self(x, training=False)
    stats, _ = self._step_stats(x, y, outputs, sample_weight)
    return self._metrics_of_step(y, outputs, sample_weight, stats)


def dropout_generators(model):
  """The tf.random.Generators of `model`'s dropout layers, created now, in
  the order of `model.submodules`.

  Each draws its seed from the global seed when created, so both training
  paths (`fit`, `run_experiment`) create them at the same point, before the
  first step, and so draw the same masks. A generator made in a strategy's
  scope folds the replica id into every draw; with one replica they are
  made outside it, so that `bert-train`'s OneDeviceStrategy and `fit`'s
  default strategy draw the same masks. tf_keras does not track them;
  `run_experiment` checkpoints them, so a resumed run continues the masks.
  """
  strategy = model.distribute_strategy
  if strategy.num_replicas_in_sync > 1:
    with strategy.scope():
      return _make_dropout_generators(model)
  return _make_dropout_generators(model)


def _make_dropout_generators(model):
  generators = []
  for layer in model.submodules:
    rng = getattr(layer, "_random_generator", None)
    if rng is None or not hasattr(rng, "_maybe_init"):
      continue
    rng._maybe_init()   # pylint: disable=protected-access
    if getattr(rng, "_generator", None) is not None:
      generators.append(rng._generator)   # pylint: disable=protected-access
  return generators


def _fit_steps(x, batch_size, epochs, steps_per_epoch, initial_epoch) -> int:
  """How many optimizer steps `fit` will run."""
  epochs = epochs - initial_epoch
  if steps_per_epoch:
    return int(steps_per_epoch) * epochs
  if isinstance(x, tf.data.Dataset):
    n = int(x.cardinality())
    if n < 0:
      raise ValueError("fit: the dataset's length is unknown (infinite or "
                       "filtered); pass steps_per_epoch so the learning-rate "
                       "schedule knows its length")
    return n * epochs
  first = tf.nest.flatten(x)[0]
  return math.ceil(len(first) / (batch_size or 32)) * epochs
