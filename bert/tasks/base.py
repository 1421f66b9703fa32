"""The interface between a task and the one training loop (`bert.training`).

A task owns its data, model, losses and metrics; the loop owns distribution,
optimisation, gradient accumulation, checkpoints and logging.

Losses and metrics are returned as *sums* with separate denominators so the
loop can normalise them over the whole global batch: all replicas and all
accumulated micro-batches. That is what makes N micro-batches of size B give
the same update as one batch of size N*B, and two workers give the same loss
as one worker with the same global batch.
"""

from typing import Dict, Mapping, Optional, Sequence

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from bert import checkpoints
from bert.losses import Stats
from bert.networks.bert_encoder import BertEncoder
from bert.validation import ConfigError


class Task:
  """Base class of pre-training and fine-tuning tasks.

  Subclasses implement `build_model`, `build_inputs` and `compute_stats`, and
  name in `loss_names` the stats whose ratios add up to the training loss.
  """

  # Stats that are summed (each as numerator / global denominator) into the
  # loss that is minimised. Every other stat is only reported.
  loss_names: Sequence[str] = ()
  # An epsilon added to a loss stat's denominator (see `bert.train_step`);
  # none unless a reference adds one (the masked-LM loss).
  loss_epsilons: Mapping[str, float] = {}
  # Every stat `compute_stats` returns (loss terms and metrics), in report
  # order; the loop creates one running sum per name up front.
  stat_names: Sequence[str] = ()

  def build_model(self) -> tf_keras.Model:
    raise NotImplementedError

  def build_inputs(self, input_context: Optional[tf.distribute.InputContext],
                   training: bool, start_step: int = 0) -> tf.data.Dataset:
    """Per-replica batches of a dict of features (inputs and labels).

    Training data must be a deterministic function of the task's seed and
    start with the batches of step `start_step` (the loop passes the restored
    global step), so a resumed run sees the same data as an uninterrupted one.
    """
    raise NotImplementedError

  def model_inputs(self, features: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The subset of `features` the model takes (default: its input names)."""
    raise NotImplementedError

  def compute_stats(self, features: Mapping[str, tf.Tensor],
                    outputs: Mapping[str, tf.Tensor]) -> Stats:
    """Loss and metric sums of one (micro-)batch; see the module doc."""
    raise NotImplementedError

  def loss_denominators(self, features: Mapping[str, tf.Tensor]
                        ) -> Dict[str, tf.Tensor]:
    """For each of `loss_names`, the denominator sum of a (micro-)batch.

    Depends on the features only (e.g. the number of real masked positions),
    so the loop can sum it over the global batch before any forward pass.
    """
    raise NotImplementedError

  def record_files(self) -> Sequence[str]:
    """The TFRecord files the task's pipelines read (every split); a run
    that hits a `tf.errors.DataLossError` (which names no file) reads them
    again to name the damaged one. Default: none (data held in memory)."""
    return ()

  def describe_batch(self, features: Mapping[str, tf.Tensor]) -> str:
    """Where a training batch's examples come from (files, lines), for
    errors such as a NaN loss; default: nothing known."""
    del features
    return "(this task does not record where its examples come from)"

  # The checkpoint the model starts from (a
  # `bert.checkpoints.CheckedCheckpoint`, read and checked when the task is
  # built, no variable made); None: random initial weights.
  initial_checkpoint = None

  def build_checkpoint(self) -> checkpoints.BertCheckpoint:
    """The encoder (with `self.config`) `build_model` wraps: built in the
    caller's distribution scope from `initial_checkpoint`
    (`bert.checkpoints.build`, the loader's own path, heads included when
    the task read it with them), or randomly initialised without one. The
    one place a task's model gets its checkpoint: nothing is copied later."""
    if self.initial_checkpoint is None:
      return checkpoints.BertCheckpoint(config=self.config,
                                        encoder=BertEncoder(self.config))
    return checkpoints.build(self.initial_checkpoint, config=self.config)

  def initialize(self, model: tf_keras.Model) -> None:
    """Sets the weights of a newly built model that `build_model` does not
    (run when no run checkpoint is restored); by default none:
    `build_checkpoint` gives the encoder its checkpoint's."""
    del model

  def eval_outputs(self, features: Mapping[str, tf.Tensor],
                   outputs: Mapping[str, tf.Tensor]
                   ) -> Optional[Dict[str, tf.Tensor]]:
    """Per-example tensors collected over a whole evaluation for
    `eval_metrics` (e.g. logits and labels); None: only the stat sums."""
    return None

  def eval_metrics(self, collected: Dict[str, np.ndarray]) -> Dict[str, float]:
    """Metrics of the whole evaluation from the collected `eval_outputs`."""
    return {}

  def num_train_steps(self) -> int:
    """The run length when RuntimeConfig.train_steps is not set."""
    raise ConfigError(f"{type(self).__name__}: set RuntimeConfig.train_steps")

  # The files `predict` writes into output_dir.
  prediction_files: Sequence[str] = ()

  def predict(self, model: tf_keras.Model, output_dir: str) -> str:
    """Writes predictions for the task's predict data; returns the path."""
    raise NotImplementedError(f"{type(self).__name__} has no predict mode")

  @property
  def global_batch_size(self) -> int:
    raise NotImplementedError

  def trained_model(self, model: tf_keras.Model):
    """(task, model) as a trained run of this task is served, exported and
    used as a teacher; a distillation run gives its student's."""
    return self, model


@gin.configurable
def build_task(task_class=None) -> Task:
  """The task of a gin-configured run: `build_task.task_class = @PretrainingTask`
  (its configs bound by concern, `EncoderSource.x = ...`: bert.tasks.configs)."""
  if task_class is None:
    raise ConfigError("build_task.task_class is not set (e.g. "
                      "build_task.task_class = @ClassificationTask, or use "
                      "--task)")
  if not (isinstance(task_class, type) and issubclass(task_class, Task)):
    raise ConfigError(f"build_task.task_class must be a task class, got "
                      f"{task_class!r}")
  return task_class()
