"""Knowledge distillation: a student fine-tuned on a trained teacher's outputs.

The teacher is a `bert-train` run of a classifier (or regressor, or
multiple-choice model), a tagger or a span labeler. Its run gives the task:
the data, labels, vocabulary and casing. The student is the same task on
another encoder:

  teacher_layers:0,2,4   the teacher's embeddings, those blocks, pooler and
                         head (DistilBERT's initialisation; same width)
  a checkpoint folder    any format `bert.checkpoints.load` reads, or a preset
  or a preset name       name (`bert_mini`: the released weights); its vocab
                         must be the teacher's
  shape:bert_mini        a preset's shape with random weights and the
                         teacher's vocab

The student learns from soft targets at temperature T against the gold
labels, weighed by alpha (`DistillationConfig`), optionally from the
teacher's inner layers (TinyBERT), on the task's training set plus optional
unlabeled transfer text (Turc et al. 2019). The teacher's outputs are
computed once and carried with the examples (cached) unless it must run in
every step (on the fly). The trained run is the student's: `bert-export`,
evaluation and prediction see the student task.
"""

import dataclasses
import logging
from typing import Dict, List, Optional, Sequence, Tuple

import gin
import numpy as np
import tensorflow as tf

from bert import checkpoints
from bert import distillation as distil
from bert.config import BertConfig
from bert.distillation import DistillationConfig
from bert.layers.token_masking import TokenMasking
from bert.models._base import copy_teacher_layers
from bert.models.distiller import Distiller
from bert.tasks.base import Task
from bert.tasks.configs import (EncoderSource, FinetuningInputs, HeadConfig,
                                ScheduleConfig, SquadData, or_default)
from bert.tasks.encoded_inputs import EncodedInputs
from bert.tasks import trained_run
from bert.tasks import transfer_text
from bert.tasks.question_answering import QuestionAnsweringTask
from bert.validation import ConfigError, check_str

TEACHER_LAYERS = "teacher_layers:"
SHAPE = "shape:"


def parse_teacher_layers(spec: str, teacher_layers: int) -> Tuple[int, ...]:
  """The teacher blocks of `teacher_layers:0,2,4`, checked."""
  try:
    taken = tuple(int(x) for x in spec[len(TEACHER_LAYERS):].split(","))
  except ValueError:
    raise ConfigError(f"DistillationTask.student={spec!r}: expected "
                      "teacher_layers: and comma-separated block indices, "
                      "e.g. teacher_layers:0,2,4") from None
  return distil.check_blocks(f"DistillationTask.student={spec!r}", taken,
                             teacher_layers)


@gin.configurable
class DistillationTask(Task):
  """Fine-tunes a student on a trained teacher's outputs.

  Args:
    teacher: a `bert-train` run folder (its operative_config.gin and newest
      checkpoint) of a classification, regression, multiple-choice, tagging
      or QA task.
    student: `teacher_layers:I,J,...`, a checkpoint folder or preset name,
      or `shape:<preset>` (see the module doc).
    distillation: a `DistillationConfig` (T, alpha, intermediate losses,
      cached or on-the-fly teacher).
    transfer_files: unlabeled text the teacher labels for the student, added
      to the training set: one example per line (sentence pairs: the two
      texts tab-separated; tagging: whitespace-separated words).
    data_dir: where the teacher's data now lives, when it has moved (its
      `data_dir`); None: where the teacher read it.
    inputs, head, schedule: the student's (see `FinetuningTask`); not the
      teacher's.
  """

  def __init__(self, teacher: Optional[str] = None,
               student: Optional[str] = None,
               distillation: Optional[DistillationConfig] = None,
               transfer_files: Sequence[str] = (),
               data_dir: Optional[str] = None,
               inputs: Optional[FinetuningInputs] = None,
               head: Optional[HeadConfig] = None,
               schedule: Optional[ScheduleConfig] = None):
    owner = "DistillationTask"
    for name, value in (("teacher", teacher), ("student", student)):
      if value is None:
        raise ConfigError(f"{owner}.{name} is not set (teacher: a bert-train "
                          "run folder; student: teacher_layers:0,2,4, a "
                          "checkpoint folder or preset name, or "
                          "shape:<preset>)")
      check_str(owner, name, value)
    check_str(owner, "data_dir", data_dir, optional=True)
    if isinstance(transfer_files, str):
      transfer_files = (transfer_files,)
    self.transfer_files = tuple(transfer_files)
    for path in self.transfer_files:
      check_str(owner, "transfer_files", path)
    self.distillation = or_default(owner, "distillation", distillation,
                                   DistillationConfig)
    self.teacher_dir, self.student_spec = teacher, student
    (self.teacher_task, self.teacher_model,
     self.teacher_checkpoint) = trained_run.load_trained_run(teacher)
    self.kind = distil.teacher_kind(self.teacher_model,
                                    f"{owner}.teacher={teacher!r}")
    inputs = or_default(owner, "inputs", inputs, FinetuningInputs)
    if inputs.pack:
      raise ConfigError(f"{owner}: FinetuningInputs.pack=True is not supported "
                        "for distillation")
    self.taken = None
    self.student_task = self._student_task(inputs, head, schedule, data_dir)
    st, tt = self.student_task, self.teacher_task
    distil.check_same_vocab(
        owner, (st.tokenizer.vocabulary, st.tokenizer.lower_case,
                f"{st.vocab_file}, student={student!r}"),
        (tt.tokenizer.vocabulary, tt.tokenizer.lower_case,
         f"{tt.vocab_file}, teacher run {teacher}"))
    self.config = st.config
    self.initial_checkpoint = st.initial_checkpoint
    self.layer_map = distil.inner_layer_map(self.distillation, st.config,
                                            tt.config)
    self.loss_names = self.distillation.loss_names
    self.stat_names = self.loss_names + ("soft_loss", "hard_loss") + (
        ("accuracy",) if self.kind in ("classification", "tokens") else ())
    self.pipeline = EncodedInputs(self.encode, st.inputs, st.seq_length,
                                  st.length_buckets, {}, owner,
                                  st.config.hidden_size)
    self._transfer_origins: List[str] = []
    logging.info(
        "%s: teacher %s (%s, %s), student %s (%d layers, hidden %d); T=%g, "
        "alpha=%g; teacher outputs %s", owner, self.teacher_checkpoint,
        type(self.teacher_task).__name__, self.kind, student,
        self.config.num_hidden_layers, self.config.hidden_size,
        self.distillation.temperature, self.distillation.alpha,
        "computed in every step" if self.distillation.on_the_fly
        else "computed once before training")

  # --------------------------------------------------------------- student
  def _student_task(self, inputs, head, schedule, data_dir):
    """The teacher's task (its data and labels) on the student's encoder."""
    teacher = self.teacher_task
    data = teacher.data
    if data_dir is not None:
      data = dataclasses.replace(data, data_dir=data_dir)
    if isinstance(data, SquadData) and data.split_seed is None:
      # The teacher's article split, or its held-out articles leak.
      data = dataclasses.replace(data, split_seed=teacher.inputs.seed)
    kwargs = dict(data=data, encoder=self._student_encoder(), inputs=inputs,
                  head=head, schedule=schedule)
    if isinstance(teacher, QuestionAnsweringTask):
      kwargs["answers"] = teacher.answers
    student = type(teacher)(**kwargs)
    mine, theirs = getattr(student, "labels", None), getattr(teacher, "labels", None)
    if mine != theirs:
      raise ConfigError(f"DistillationTask: the student's labels {mine} are not "
                        f"the teacher's {theirs} (teacher run {self.teacher_dir})")
    return student

  def _student_encoder(self) -> EncoderSource:
    spec, teacher = self.student_spec, self.teacher_task
    same_vocab = dict(vocab_file=teacher.vocab_file,
                      lower_case=teacher.tokenizer.lower_case)
    if spec.startswith(TEACHER_LAYERS):
      self.taken = parse_teacher_layers(spec, teacher.config.num_hidden_layers)
      config = dataclasses.replace(teacher.config,
                                   num_hidden_layers=len(self.taken))
      return EncoderSource(bert_config=config, **same_vocab)
    if spec.startswith(SHAPE):
      name = spec[len(SHAPE):]
      if name not in BertConfig.preset_names():
        raise ConfigError(f"DistillationTask.student={spec!r}: no shape "
                          f"{name!r}; known: {', '.join(BertConfig.preset_names())}")
      config = BertConfig.preset(name, vocab_size=teacher.config.vocab_size)
      return EncoderSource(bert_config=config, **same_vocab)
    # A checkpoint that records no casing (a pre-training run, a TF1 folder
    # whose name does not say) reads the teacher's pieces with the teacher's
    # casing; one that records it keeps it, and `check_same_vocab` refuses
    # a mismatch.
    lower_case = checkpoints.load(spec).lower_case
    if lower_case is None:
      lower_case = teacher.tokenizer.lower_case
    return EncoderSource(init_checkpoint=spec, lower_case=lower_case)

  def trained_model(self, model):
    return self.student_task, model.student

  # ------------------------------------------------------------------ data
  @property
  def global_batch_size(self) -> int:
    return self.student_task.global_batch_size

  def num_train_steps(self) -> int:
    return self.pipeline.num_train_steps(
        self.student_task.schedule.num_train_epochs)

  def features(self, split: str) -> Dict[str, np.ndarray]:
    return self.pipeline.features(split)

  def encode(self, split):
    """The student task's rows of `split` (training: plus the transfer
    text's), `has_label`, and the teacher's outputs when cached."""
    data = dict(self.student_task.features(split))
    n = len(data["input_word_ids"])
    data["has_label"] = np.ones([n], np.float32)
    if split == "train" and self.transfer_files:
      data, self._transfer_origins = transfer_text.with_transfer_rows(
          data, self.transfer_files, self.student_task, self.kind)
    if not self.distillation.on_the_fly and split != "predict":
      data.update(self._teacher_columns(data))
    return data

  def _teacher_columns(self, data) -> Dict[str, np.ndarray]:
    """The teacher's outputs on `data`'s rows (`distil.teacher_columns`)."""
    inputs = self.student_task.model_inputs(data)
    return distil.teacher_columns(self.kind, self.student_task.pipeline.outputs(
        self.teacher_model, inputs, self.student_task.sequence_outputs))

  def record_files(self):
    return self.student_task.record_files()

  def describe_batch(self, features) -> str:
    n = len(self.student_task.features("train")["input_word_ids"])
    rows = [int(r) for r in np.asarray(features["example_row"]).reshape(-1)]
    task_rows = [r for r in rows if r < n]
    parts = []
    if task_rows:
      parts.append(self.student_task.describe_batch(
          dict(example_row=np.asarray(task_rows))))
    parts += [self._transfer_origins[r - n] for r in rows if r >= n][:10]
    return "; ".join(parts)

  def build_inputs(self, input_context, training, start_step=0):
    return self.pipeline.dataset(input_context, training, start_step)

  def model_inputs(self, features):
    return self.student_task.model_inputs(features)

  # ----------------------------------------------------------------- model
  def build_model(self):
    d = self.distillation
    teacher = None
    if d.on_the_fly:
      # Built here, in the strategy's scope, from the teacher's checkpoint.
      teacher = self.teacher_task.build_model()
      tf.train.Checkpoint(model=teacher).restore(
          self.teacher_checkpoint).expect_partial()
      teacher = self.teacher_task.trained_model(teacher)[1]
    masking = None
    if d.mask_rate:
      special = self.student_task.tokenizer.get_special_tokens_dict()
      masking = TokenMasking(d.mask_rate, special["mask_id"],
                             keep_ids=(special["start_of_sequence_id"],
                                       special["end_of_segment_id"]),
                             name="token_masking")
    return Distiller(self.student_task.build_model(), teacher,
                     layer_map=self.layer_map, hidden=d.hidden_weight > 0,
                     attention=d.attention_weight > 0, masking=masking)

  def initialize(self, model):
    if self.taken is not None:
      copy_teacher_layers(model.student, self.teacher_model, self.taken)
    else:
      self.student_task.initialize(model.student)

  def preprocessor(self):
    return self.student_task.preprocessor()

  # ---------------------------------------------------------------- losses
  def loss_denominators(self, features):
    rows = tf.cast(tf.shape(features["has_label"])[0], tf.float32)
    if self.kind == "tokens":
      first = tf.cast(features["word_start"] > 0, tf.float32)
      dens = dict(prediction_loss=tf.reduce_sum(first))
    else:
      dens = dict(prediction_loss=rows)
    tokens = tf.reduce_sum(tf.cast(features["input_mask"] > 0, tf.float32))
    for name in self.loss_names[1:]:
      dens[name] = tokens
    return dens

  def compute_stats(self, features, outputs):
    if self.distillation.on_the_fly:
      teacher = {k: outputs[f"teacher_{k}"] for k in distil.TAUGHT[self.kind]}
    else:
      teacher = distil.teacher_outputs(self.kind, features)
    return distil.loss_stats(self.kind, self.distillation, outputs, teacher,
                             features)

  # ------------------------------------------- evaluation, predict, export
  def eval_outputs(self, features, outputs):
    return self.student_task.eval_outputs(features, outputs)

  def eval_metrics(self, collected):
    return self.student_task.eval_metrics(collected)

  def serving_gate(self, max_drop=None):
    return self.student_task.serving_gate(max_drop)

  @property
  def prediction_files(self):
    return self.student_task.prediction_files

  def predict(self, model, output_dir):
    return self.student_task.predict(model.student, output_dir)
