"""Fine-tuning and pre-training tasks: data, losses, metrics, post-processing."""

from bert.tasks.base import Task, build_task
from bert.tasks.classification import ClassificationTask
from bert.tasks.distillation import DistillationTask
from bert.tasks.electra_pretraining import ElectraPretrainingTask
from bert.tasks.embedding import EmbeddingTask
from bert.tasks.finetuning import FinetuningTask
from bert.tasks.multiple_choice import MultipleChoiceTask
from bert.tasks.question_answering import QuestionAnsweringTask
from bert.losses import pretraining_losses, pretraining_stats
from bert.tasks.pretraining import PretrainingTask
from bert.tasks.token_classification import TokenClassificationTask

__all__ = ["ClassificationTask", "DistillationTask", "ElectraPretrainingTask",
           "EmbeddingTask",
           "FinetuningTask", "MultipleChoiceTask",
           "PretrainingTask", "QuestionAnsweringTask", "Task",
           "TokenClassificationTask", "build_task", "pretraining_losses", "pretraining_stats"]
