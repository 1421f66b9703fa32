"""Fine-tuning and pre-training tasks: data, losses, metrics, post-processing."""

from bert.tasks.base import Task
from bert.tasks.classification import ClassificationTask
from bert.tasks.pretraining import (PretrainingTask, pretraining_losses,
                                    pretraining_stats)

__all__ = ["ClassificationTask", "PretrainingTask", "Task", "pretraining_losses",
           "pretraining_stats"]
