"""What a task is configured with: frozen dataclasses grouped by concern.

Each concern is one gin-configurable class, checked once in its
`__post_init__`:

  EncoderSource     where the encoder comes from (checkpoint, config, vocab)
  FinetuningInputs  sequence length, batches, length buckets, packing, seed
  ScheduleConfig    how long fine-tuning runs (epochs)
  HeadConfig        the task head (dropout)
  *Data             the task's files and how to read them
  EmbedderConfig    a sentence embedder's pooling and contrastive loss
  AnswerConfig      SQuAD answer search (post-processing)
  DistillationConfig  a student's losses against its teacher
  PretrainingInputs the pre-training records and how they are read and masked

A task takes one object per concern (`ClassificationTask(data=..., encoder=
..., inputs=...)`); a concern not given is built from its gin bindings
(`FinetuningInputs.seq_length = 128`), so gin and Python set the same fields
and `operative_config.gin` lists every field of every concern a run used.
Checks that relate two concerns (a sequence length against the encoder's
positions) are the task's.
"""

from bert.tasks.configs.common import (Encoder, EncoderSource, FinetuningInputs,
                                       HeadConfig, ScheduleConfig, or_default)
from bert.tasks.configs.data import (AnswerConfig, ClassificationData,
                                     DataFiles, MultipleChoiceData,
                                     PretrainingInputs, SquadData, TaggingData)
from bert.tasks.configs.embedding import EmbedderConfig, EmbeddingData
from bert.distillation import DistillationConfig

__all__ = ["AnswerConfig", "ClassificationData", "DataFiles", "DistillationConfig",
           "EmbedderConfig", "EmbeddingData", "Encoder",
           "EncoderSource", "FinetuningInputs", "HeadConfig",
           "MultipleChoiceData", "PretrainingInputs", "ScheduleConfig",
           "SquadData", "TaggingData", "or_default"]
