"""Each task's data: its files and how they are read (and, for SQuAD, how
answers are searched; for pre-training, how records are read and masked)."""

import dataclasses
import os
from typing import Dict, Optional, Tuple

import gin

from bert.data.squad_config import SquadConfig, check_fields
from bert.tasks.configs.common import config_class, set_field
from bert.validation import (ConfigError, check_bool, check_float, check_int,
                             check_labels, check_str)


@config_class
class DataFiles:
  """A task's files: `train_file`, `eval_file`, `predict_file`, each under
  `data_dir` when relative ("" = not given)."""
  data_dir: str = ""
  train_file: str = ""
  eval_file: str = ""
  predict_file: str = ""

  def __post_init__(self):
    for name in ("data_dir", "train_file", "eval_file", "predict_file"):
      check_str(type(self).__name__, name, getattr(self, name))

  def paths(self) -> Dict[str, str]:
    """split ("train", "eval", "predict") -> its path ("" if not given)."""
    return {split: os.path.join(self.data_dir, name) if name else ""
            for split, name in (("train", self.train_file),
                                ("eval", self.eval_file),
                                ("predict", self.predict_file))}


@gin.configurable
@config_class
class ClassificationData(DataFiles):
  """Sentence (pair) classification data: a GLUE task, or generic files.

  Attributes:
    glue_task: a GLUE task name (cola, sst-2, mrpc, qqp, sts-b, mnli, qnli,
      rte, wnli): reads `data_dir`/train.tsv, dev.tsv (MNLI: dev_matched.tsv),
      test.tsv. Or None, with the files and columns below (`read_generic`).
    text_a_column, text_b_column, label_column: generic files' columns
      (text_b_column None: single sentences).
    labels: class names of generic data; None for GLUE (fixed) or regression.
    regression: generic data with one real-valued label.
    max_train_examples: use only the first N training examples (0 = all).
  """
  glue_task: Optional[str] = None
  text_a_column: str = "sentence"
  text_b_column: Optional[str] = None
  label_column: str = "label"
  labels: Optional[Tuple[str, ...]] = None
  regression: bool = False
  max_train_examples: int = 0

  def __post_init__(self):
    super().__post_init__()
    owner = type(self).__name__
    check_str(owner, "glue_task", self.glue_task, optional=True)
    check_str(owner, "text_a_column", self.text_a_column)
    check_str(owner, "text_b_column", self.text_b_column, optional=True)
    check_str(owner, "label_column", self.label_column)
    check_bool(owner, "regression", self.regression)
    check_int(owner, "max_train_examples", self.max_train_examples, minimum=0)
    labels = check_labels(owner, self.labels)
    set_field(self, "labels", None if labels is None else tuple(labels))
    if self.glue_task is None and not self.regression and not self.labels:
      raise ConfigError(f"{owner}: give labels (class names) or "
                        "regression=True for generic data (or a glue_task)")


@gin.configurable
@config_class
class TaggingData(DataFiles):
  """Token classification (NER) data: CoNLL-style files.

  Attributes:
    labels: the tag set, "O" first by convention; None: the tags of the
      training file, in order of appearance.
  """
  labels: Optional[Tuple[str, ...]] = None

  def __post_init__(self):
    super().__post_init__()
    labels = check_labels(type(self).__name__, self.labels)
    set_field(self, "labels", None if labels is None else tuple(labels))


@gin.configurable
@config_class
class SquadData(DataFiles):
  """SQuAD json files and how questions and contexts are windowed.

  Attributes:
    train_fraction: when train_file == eval_file, the fraction of its articles
      to train on; evaluation uses the others.
    split_seed: the seed of that article split; None: the inputs' seed
      (`FinetuningInputs.seed`). A distilled student keeps its teacher's split,
      so the teacher never trained on the student's held-out articles.
    version_2, doc_stride, max_query_length: `SquadConfig`'s (defaults and
      checks there): the task's `squad` is made of these, `AnswerConfig`
      and `FinetuningInputs.seq_length`.
  """
  train_fraction: float = 0.8
  split_seed: Optional[int] = None
  version_2: bool = SquadConfig.version_2
  doc_stride: int = SquadConfig.doc_stride
  max_query_length: int = SquadConfig.max_query_length

  def __post_init__(self):
    super().__post_init__()
    owner = type(self).__name__
    check_float(owner, "train_fraction", self.train_fraction, 0, 1,
                min_open=True, max_open=True)
    check_int(owner, "split_seed", self.split_seed, minimum=0, optional=True)
    check_fields(owner, version_2=self.version_2, doc_stride=self.doc_stride,
                 max_query_length=self.max_query_length)


@gin.configurable
@config_class
class AnswerConfig:
  """SQuAD answer search over the windows of a question: `SquadConfig`'s
  n_best_size, max_answer_length, null_score_diff_threshold (defaults and
  checks there)."""
  n_best_size: int = SquadConfig.n_best_size
  max_answer_length: int = SquadConfig.max_answer_length
  null_score_diff_threshold: float = SquadConfig.null_score_diff_threshold

  def __post_init__(self):
    check_fields(type(self).__name__, **dataclasses.asdict(self))


@gin.configurable
@config_class
class MultipleChoiceData(DataFiles):
  """SWAG-style multiple choice files.

  Attributes:
    num_choices: endings per question.
  """
  num_choices: int = 4

  def __post_init__(self):
    super().__post_init__()
    check_int(type(self).__name__, "num_choices", self.num_choices, minimum=2)


@gin.configurable
@config_class
class PretrainingInputs:
  """The pre-training records and how they are read and masked.

  Attributes:
    train_files, eval_files: TFRecord file patterns (comma-separated globs) of
      `create_pretraining_data` records.
    seq_length, max_predictions_per_seq: the records' shapes.
    global_batch_size, eval_batch_size: sequences per step and per evaluation
      batch (None: global_batch_size).
    seed: the shuffle (and dynamic masks); None: unseeded.
    shuffle_buffer: records shuffled at a time.
    dynamic_masking: new masks for every batch (RoBERTa) instead of the
      records' fixed ones; needs the vocab (`EncoderSource`).
    masked_lm_prob, do_whole_word_mask: how dynamic masks are drawn.
  """
  train_files: str = ""
  eval_files: str = ""
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  global_batch_size: int = 32
  eval_batch_size: Optional[int] = None
  seed: Optional[int] = 42
  shuffle_buffer: int = 10_000
  dynamic_masking: bool = False
  masked_lm_prob: float = 0.15
  do_whole_word_mask: bool = False

  def __post_init__(self):
    owner = type(self).__name__
    for name in ("seq_length", "max_predictions_per_seq", "global_batch_size",
                 "shuffle_buffer"):
      check_int(owner, name, getattr(self, name), minimum=1)
    check_int(owner, "eval_batch_size", self.eval_batch_size, minimum=1,
              optional=True)
    check_int(owner, "seed", self.seed, minimum=0, optional=True)
    check_float(owner, "masked_lm_prob", self.masked_lm_prob, 0, 1,
                min_open=True)
    check_bool(owner, "dynamic_masking", self.dynamic_masking)
    check_bool(owner, "do_whole_word_mask", self.do_whole_word_mask)
    check_str(owner, "train_files", self.train_files)
    check_str(owner, "eval_files", self.eval_files)
    if self.max_predictions_per_seq > self.seq_length:
      raise ConfigError(f"{owner}.max_predictions_per_seq="
                        f"{self.max_predictions_per_seq} exceeds seq_length="
                        f"{self.seq_length}")
