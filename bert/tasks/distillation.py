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
from bert.config import BertConfig
from bert.data import ner_data
from bert.data._io import text_lines
from bert.layers.token_masking import TokenMasking
from bert.models._base import copy_teacher_layers
from bert.models.distiller import Distiller
from bert import losses
from bert.tasks.base import Task
from bert.tasks.configs import (DistillationConfig, EncoderSource,
                                FinetuningInputs, HeadConfig, ScheduleConfig,
                                SquadData, or_default)
from bert.tasks.finetuning_inputs import EncodedInputs
from bert.tasks.multiple_choice import MultipleChoiceTask
from bert.tasks.question_answering import QuestionAnsweringTask
from bert.data.errors import DataError
from bert.validation import ConfigError, check_str

TEACHER_LAYERS = "teacher_layers:"
SHAPE = "shape:"

# The gold labels each kind reads from the features.
_LABELS = dict(classification=("label",), regression=("label",),
               tokens=("label_ids",), spans=("start_positions", "end_positions"))


def teacher_kind(model, teacher_dir: str) -> str:
  """What a teacher model predicts (its `distillation_kind`, the attribute
  `fit(teacher=...)` reads too): classification (also multiple choice),
  regression, tokens or spans."""
  kind = getattr(model, "distillation_kind", None)
  if kind is None:
    raise ConfigError(f"DistillationTask.teacher={teacher_dir!r}: a "
                      f"{type(model).__name__} cannot teach; classification, "
                      "regression, multiple choice, token classification and "
                      "QA runs can")
  return kind


def parse_teacher_layers(spec: str, teacher_layers: int) -> Tuple[int, ...]:
  """The teacher blocks of `teacher_layers:0,2,4`, checked."""
  text = spec[len(TEACHER_LAYERS):]
  try:
    taken = tuple(int(x) for x in text.split(","))
  except ValueError:
    raise ConfigError(f"DistillationTask.student={spec!r}: expected "
                      "teacher_layers: and comma-separated block indices, "
                      "e.g. teacher_layers:0,2,4") from None
  bad = [i for i in taken if not 0 <= i < teacher_layers]
  if bad or not taken:
    raise ConfigError(f"DistillationTask.student={spec!r}: the teacher has "
                      f"blocks 0..{teacher_layers - 1}")
  if len(set(taken)) != len(taken):
    raise ConfigError(f"DistillationTask.student={spec!r}: a block is taken "
                      "twice")
  return taken


def check_same_vocab(student_task, teacher_task, student_spec: str,
                     teacher_dir: str) -> None:
  """The student must read the teacher's word pieces with its casing: one
  encoding feeds both."""
  s_file, t_file = student_task.vocab_file, teacher_task.vocab_file
  s_vocab, t_vocab = student_task.tokenizer.vocab, teacher_task.tokenizer.vocab
  if list(s_vocab) != list(t_vocab):
    if len(s_vocab) != len(t_vocab):
      how = f"{len(s_vocab)} tokens against {len(t_vocab)}"
    else:
      line = next(i for i, (a, b) in enumerate(zip(s_vocab, t_vocab)) if a != b)
      how = (f"line {line + 1} is {s_vocab[line]!r} against "
             f"{t_vocab[line]!r}")
    raise ConfigError(f"DistillationTask: the student's vocab {s_file} "
                      f"(student={student_spec!r}) is not the teacher's "
                      f"{t_file} (teacher run {teacher_dir}): {how}; student "
                      "and teacher must share one vocabulary")
  if student_task.tokenizer.lower_case != teacher_task.tokenizer.lower_case:
    raise ConfigError(f"DistillationTask: the student's casing "
                      f"(do_lower_case={student_task.tokenizer.lower_case}, "
                      f"{s_file}) is not the teacher's ({t_file}: "
                      f"do_lower_case={teacher_task.tokenizer.lower_case})")


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
    from bert.training import trained_run  # pylint: disable=g-import-not-at-top
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
    self.kind = teacher_kind(self.teacher_model, teacher)
    inputs = or_default(owner, "inputs", inputs, FinetuningInputs)
    if inputs.pack:
      raise ConfigError(f"{owner}: FinetuningInputs.pack=True is not supported "
                        "for distillation")
    self.taken = None
    self.student_task = self._student_task(inputs, head, schedule, data_dir)
    check_same_vocab(self.student_task, self.teacher_task, student, teacher)
    self.config = self.student_task.config
    self.initial_checkpoint = self.student_task.initial_checkpoint
    self.layer_map = self._layer_map()
    self.loss_names = ("prediction_loss",) + tuple(
        name for name, weight in (
            ("hidden_loss", self.distillation.hidden_weight),
            ("attention_loss", self.distillation.attention_weight)) if weight)
    self.stat_names = self.loss_names + ("soft_loss", "hard_loss") + (
        ("accuracy",) if self.kind in ("classification", "tokens") else ())
    st = self.student_task
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
                      do_lower_case=teacher.tokenizer.lower_case)
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
    lower_case = checkpoints.load(spec).do_lower_case
    if lower_case is None:
      lower_case = teacher.tokenizer.lower_case
    return EncoderSource(init_checkpoint=spec, do_lower_case=lower_case)

  def _layer_map(self) -> Tuple[int, ...]:
    d = self.distillation
    if not d.intermediate:
      return ()
    student, teacher = self.config, self.teacher_task.config
    if d.attention_weight and (student.num_attention_heads
                               != teacher.num_attention_heads):
      raise ConfigError(
          f"DistillationConfig.attention_weight={d.attention_weight}: the "
          f"student has {student.num_attention_heads} attention heads, the "
          f"teacher {teacher.num_attention_heads}; the attention loss needs "
          "equal head counts")
    return d.student_layer_map(student.num_hidden_layers,
                               teacher.num_hidden_layers)

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
      data = self._with_transfer_rows(data)
    if not self.distillation.on_the_fly and split != "predict":
      data.update(self._teacher_columns(data))
    return data

  def _teacher_columns(self, data) -> Dict[str, np.ndarray]:
    """The teacher's outputs on `data`'s rows, as `teacher_<output>` columns;
    token logits as [rows, tags, seq], so the sequence axis is the last one
    and batches cut it to their length bucket like every other column."""
    names = losses.TAUGHT[self.kind]
    inputs = self.student_task.model_inputs(data)
    out = self.student_task.pipeline.outputs(self.teacher_model, inputs,
                                             self.student_task.sequence_outputs)
    columns = {f"teacher_{k}": np.asarray(out[k], np.float32) for k in names}
    if self.kind == "tokens":
      columns["teacher_logits"] = np.ascontiguousarray(
          columns["teacher_logits"].transpose(0, 2, 1))
    return columns

  def teacher_outputs(self, features) -> Dict[str, tf.Tensor]:
    """The cached teacher outputs of a batch, in the model's layout."""
    out = {k: features[f"teacher_{k}"] for k in losses.TAUGHT[self.kind]}
    if self.kind == "tokens":
      out["logits"] = tf.transpose(out["logits"], [0, 2, 1])
    return out

  # --------------------------------------------------------- transfer text
  def _with_transfer_rows(self, data):
    """`data` plus the transfer files' rows, unlabeled (`has_label` 0)."""
    rows, origins = self._encode_transfer()
    n = len(rows["input_word_ids"])
    if not n:
      raise DataError(f"DistillationTask.transfer_files: no text in "
                      f"{', '.join(self.transfer_files)}")
    rows["has_label"] = np.zeros([n], np.float32)
    fill = dict(label=-1, label_ids=-1)
    merged = {}
    for key, column in data.items():
      extra = rows.get(key)
      if extra is None:
        extra = np.full((n,) + column.shape[1:], fill.get(key, 0), column.dtype)
      merged[key] = np.concatenate([column, np.asarray(extra, column.dtype)])
    self._transfer_origins = origins
    logging.info("DistillationTask: %d training rows of the task, %d of "
                 "transfer text (%s)", len(data["input_word_ids"]), n,
                 ", ".join(self.transfer_files))
    return merged

  def _encode_transfer(self):
    st = self.student_task
    if self.kind == "spans" or isinstance(st, MultipleChoiceTask):
      raise ConfigError("DistillationTask.transfer_files: transfer text is "
                        "read for classification and tagging teachers (a QA "
                        "or multiple-choice example is more than a line)")
    lines = []
    for path in self.transfer_files:
      lines += [(path, number, line.rstrip("\r\n"))
                for number, line in text_lines(path) if line.strip()]
    origins = [f"{path}: line {number}" for path, number, _ in lines]
    if self.kind == "tokens":
      sentences = [ner_data.Sentence(words=text.split(), tags=None, line=number)
                   for _, number, text in lines]
      rows = ner_data.encode_sentences(sentences, st.tokenizer, st.seq_length)
      return rows, [origins[i] for i in rows["sentence_id"]]
    pairs = st.preprocessor().text_pairs
    texts_a, texts_b = [], []
    for path, number, text in lines:
      parts = text.split("\t")
      if len(parts) != (2 if pairs else 1):
        raise DataError(f"{path}:{number}: expected "
                        f"{'two tab-separated texts' if pairs else 'one text (no tab)'}"
                        f" for this {'sentence-pair' if pairs else 'single-sentence'} "
                        f"teacher, got {len(parts)} field(s)")
      texts_a.append(parts[0])
      if pairs:
        texts_b.append(parts[1])
    rows = st.tokenizer.encode(texts_a, texts_b if pairs else None,
                               st.seq_length)
    return rows, origins

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
    d = self.distillation
    if d.on_the_fly:
      teacher = {k: outputs[f"teacher_{k}"] for k in losses.TAUGHT[self.kind]}
    else:
      teacher = self.teacher_outputs(features)
    stats = losses.distillation_stats(
        self.kind, outputs, teacher,
        {k: features[k] for k in _LABELS[self.kind]}, features["has_label"],
        d.temperature, d.alpha, input_mask=features["input_mask"],
        word_start=features.get("word_start"))
    mask = features["input_mask"]
    if d.hidden_weight:
      num, den = losses.hidden_state_stats(
          outputs["student_hidden"], outputs["teacher_hidden"], mask)["hidden_loss"]
      stats["hidden_loss"] = (d.hidden_weight * num, den)
    if d.attention_weight:
      num, den = losses.attention_stats(
          outputs["student_attention"], outputs["teacher_attention"],
          mask)["attention_loss"]
      stats["attention_loss"] = (d.attention_weight * num, den)
    return stats

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
