"""Knowledge distillation, written once for both paths: `fit(teacher=...)`
(`KerasTraining`, `Distiller`) and `bert-train --task=distill`
(`DistillationTask`).

Here: the config (`DistillationConfig`, gin-configurable), the checks of a
student and its teacher (what the teacher predicts, one vocabulary, which
teacher blocks a student takes or learns from), the teacher's outputs as
columns carried with the examples, and the loss of a batch.
"""

import dataclasses
from typing import Dict, Mapping, Optional, Sequence, Tuple

import gin
import numpy as np
import tensorflow as tf

from bert import losses
from bert.losses import Stats
from bert.validation import ConfigError, check_choice, check_float, check_int

TEACHER_OUTPUTS = ("auto", "cached", "on_the_fly")

# The model outputs a teacher hands down, and the gold labels of a batch,
# per kind of task (a model's `distillation_kind`).
TAUGHT = dict(classification=("logits",), regression=("logits",),
              tokens=("logits",), spans=("start_logits", "end_logits"))
LABELS = dict(classification=("label",), regression=("label",),
              tokens=("label_ids",), spans=("start_positions", "end_positions"))


@gin.configurable
@dataclasses.dataclass(frozen=True)
class DistillationConfig:
  """The distillation losses and where the teacher's outputs come from.

  Attributes:
    temperature: T of the soft targets, softmax(logits / T) of teacher and
      student; the soft loss is scaled by T^2 (Hinton et al. 2015). The
      defaults (T = 2, alpha = 0.5) are the recipe of the README's runs.
    alpha: the weight of the soft (teacher) loss; the gold labels' loss
      weighs 1 - alpha. Rows without a label (transfer text) add the soft
      term only. alpha = 0 is plain fine-tuning.
    hidden_weight: weight of TinyBERT's hidden-state loss (the mean squared
      difference of mapped layers' outputs; through a learned projection
      when the widths differ). 0: off.
    attention_weight: weight of the attention loss (KL divergence of mapped
      layers' attention distributions; needs equal head counts). 0: off.
    layer_map: for each student layer, the teacher layer (0-based) it learns
      from in the intermediate losses; None: evenly spaced, the last on the
      last (student layer i <- teacher layer (i + 1) * L_teacher / L_student
      - 1, as TinyBERT): each student block learns the work of the teacher
      blocks up to its mapped one.
    mask_rate: augmented transfer data by dynamic masking: in each training
      step this fraction of each row's real word pieces becomes [MASK], anew
      every step, for teacher and student alike, so the student learns the
      teacher's outputs on many variants of each example (needs the teacher
      on the fly). 0: off.
    teacher_outputs: "cached": the teacher runs once over the data before
      training and its outputs travel with the examples, so student steps
      never run it; "on_the_fly": the frozen teacher runs inside every step
      (for changing inputs, and needed by the intermediate losses: every
      layer's states of every example would not fit in memory); "auto":
      on_the_fly when an intermediate loss or masking is on, else cached.
  """
  temperature: float = 2.0
  alpha: float = 0.5
  hidden_weight: float = 0.0
  attention_weight: float = 0.0
  layer_map: Optional[Tuple[int, ...]] = None
  mask_rate: float = 0.0
  teacher_outputs: str = "auto"

  def __post_init__(self):
    owner = type(self).__name__
    check_float(owner, "temperature", self.temperature, 0, min_open=True)
    check_float(owner, "alpha", self.alpha, 0, 1)
    check_float(owner, "hidden_weight", self.hidden_weight, 0)
    check_float(owner, "attention_weight", self.attention_weight, 0)
    check_float(owner, "mask_rate", self.mask_rate, 0, 1, max_open=True)
    check_choice(owner, "teacher_outputs", self.teacher_outputs, TEACHER_OUTPUTS)
    if self.layer_map is not None:
      if isinstance(self.layer_map, (str, bytes)) or not hasattr(
          self.layer_map, "__iter__"):
        raise ConfigError(f"{owner}.layer_map must be a list of teacher layer "
                          f"indices, got {self.layer_map!r}")
      for i in self.layer_map:
        check_int(owner, "layer_map", i, minimum=0)
      # Frozen: the checked tuple replaces the given list.
      object.__setattr__(self, "layer_map", tuple(self.layer_map))
    if ((self.intermediate or self.mask_rate)
        and self.teacher_outputs == "cached"):
      raise ConfigError(f"{owner}: hidden_weight, attention_weight and "
                        "mask_rate need the teacher in every step: set "
                        "teacher_outputs='on_the_fly' (or 'auto')")

  @property
  def intermediate(self) -> bool:
    """Whether a loss on the inner layers is on."""
    return self.hidden_weight > 0 or self.attention_weight > 0

  @property
  def on_the_fly(self) -> bool:
    """Whether the teacher runs inside the training step."""
    return (self.teacher_outputs == "on_the_fly"
            or (self.teacher_outputs == "auto"
                and (self.intermediate or self.mask_rate > 0)))

  def student_layer_map(self, student_layers: int, teacher_layers: int
                        ) -> Tuple[int, ...]:
    """The teacher layer of each student layer (see `layer_map`), checked."""
    mapping = self.layer_map or tuple(
        (i + 1) * teacher_layers // student_layers - 1
        for i in range(student_layers))
    return check_layer_map(f"{type(self).__name__}.layer_map", mapping,
                           student_layers, teacher_layers)

  @property
  def loss_names(self) -> Tuple[str, ...]:
    """The stats whose sum is minimised (`loss_stats`)."""
    return ("prediction_loss",) + tuple(
        name for name, weight in (("hidden_loss", self.hidden_weight),
                                  ("attention_loss", self.attention_weight))
        if weight)


# ------------------------------------------------------------------ checks
def teacher_kind(teacher, where: str, student=None) -> str:
  """What `teacher` predicts (its `distillation_kind`): classification (also
  multiple choice), regression, tokens or spans. With `student`, the
  teacher must be a model of the student's class. `where` names the
  teacher in errors (e.g. "Distiller.teacher")."""
  if student is not None and not isinstance(teacher, type(student)):
    raise ConfigError(f"{where} must be a {type(student).__name__} like the "
                      f"student, got {type(teacher).__name__}")
  kind = getattr(teacher, "distillation_kind", None)
  if kind is None:
    raise ConfigError(f"{where}: a {type(teacher).__name__} cannot teach; "
                      "classification, regression, multiple choice, token "
                      "classification and QA models can")
  return kind


def check_same_vocab(owner: str, student, teacher) -> None:
  """One encoding feeds both: the student must read the teacher's word
  pieces with its casing. student, teacher: (tokens in id order,
  lower_case, where they come from)."""
  (s_vocab, s_lower, s_from), (t_vocab, t_lower, t_from) = student, teacher
  s_kind, t_kind = (getattr(v, "kind", "wordpiece") for v in (s_vocab, t_vocab))
  if s_kind != t_kind:
    raise ConfigError(f"{owner}: the student's vocab ({s_from}) is a {s_kind} "
                      f"vocabulary, the teacher's ({t_from}) a {t_kind} one; "
                      "student and teacher must share one vocabulary")
  same_contents = s_vocab == t_vocab
  s_vocab, t_vocab = list(s_vocab), list(t_vocab)
  if s_vocab == t_vocab and not same_contents:
    raise ConfigError(f"{owner}: the student's vocab ({s_from}) has the "
                      f"teacher's ({t_from}) tokens but other merges or "
                      "scores; student and teacher must share one vocabulary")
  if s_vocab != t_vocab:
    if len(s_vocab) != len(t_vocab):
      how = f"{len(s_vocab)} tokens against {len(t_vocab)}"
    else:
      line = next(i for i, (a, b) in enumerate(zip(s_vocab, t_vocab)) if a != b)
      how = f"line {line + 1} is {s_vocab[line]!r} against {t_vocab[line]!r}"
    raise ConfigError(f"{owner}: the student's vocab ({s_from}) is not the "
                      f"teacher's ({t_from}): {how}; student and teacher must "
                      "share one vocabulary")
  if bool(s_lower) != bool(t_lower):
    raise ConfigError(f"{owner}: the student's casing (lower_case={s_lower}"
                      f", {s_from}) is not the teacher's (lower_case="
                      f"{t_lower}, {t_from})")


def check_blocks(where: str, blocks: Sequence[int], teacher_blocks: int
                 ) -> Tuple[int, ...]:
  """The teacher blocks a student is made of (DistilBERT's initialisation):
  distinct, at least one, each in 0..teacher_blocks - 1."""
  blocks = tuple(blocks)
  if (not blocks or len(set(blocks)) != len(blocks) or any(
      isinstance(i, bool) or not isinstance(i, (int, np.integer))
      or not 0 <= i < teacher_blocks for i in blocks)):
    raise ConfigError(f"{where} must name distinct blocks of the teacher's "
                      f"0..{teacher_blocks - 1}, got {list(blocks)}")
  return tuple(int(i) for i in blocks)


def check_layer_map(where: str, mapping: Sequence[int], student_blocks: int,
                    teacher_blocks: int) -> Tuple[int, ...]:
  """The teacher block each student block learns from (the intermediate
  losses): one per student block, each in 0..teacher_blocks - 1."""
  mapping = tuple(mapping)
  if len(mapping) != student_blocks or any(
      isinstance(j, bool) or not isinstance(j, (int, np.integer))
      or not 0 <= j < teacher_blocks for j in mapping):
    raise ConfigError(f"{where} must give each of the student's "
                      f"{student_blocks} blocks a teacher block in "
                      f"0..{teacher_blocks - 1}, got {list(mapping)}")
  return tuple(int(j) for j in mapping)


def inner_layer_map(config: DistillationConfig, student, teacher
                    ) -> Tuple[int, ...]:
  """The layer map of the intermediate losses (() when off) between the
  encoders of BertConfigs `student` and `teacher`."""
  if not config.intermediate:
    return ()
  if config.attention_weight and (student.num_attention_heads
                                  != teacher.num_attention_heads):
    raise ConfigError(
        f"DistillationConfig.attention_weight={config.attention_weight}: the "
        f"student has {student.num_attention_heads} attention heads, the "
        f"teacher {teacher.num_attention_heads}; the attention loss needs "
        "equal head counts")
  return config.student_layer_map(student.num_hidden_layers,
                                  teacher.num_hidden_layers)


# ------------------------------------------------------- teacher's outputs
def teacher_columns(kind: str, outputs: Mapping[str, np.ndarray]
                    ) -> Dict[str, np.ndarray]:
  """The teacher's `outputs` on a set of rows as columns carried with the
  examples, `teacher_<output>`; token logits as [rows, tags, seq], so the
  sequence axis is the last one and batches cut it to their length bucket
  like every other column."""
  columns = {f"teacher_{k}": np.asarray(outputs[k], np.float32)
             for k in TAUGHT[kind]}
  if kind == "tokens":
    columns["teacher_logits"] = np.ascontiguousarray(
        columns["teacher_logits"].transpose(0, 2, 1))
  return columns


def teacher_outputs(kind: str, batch: Mapping[str, tf.Tensor]
                    ) -> Dict[str, tf.Tensor]:
  """A batch's `teacher_columns` in the model's layout."""
  out = {k: batch[f"teacher_{k}"] for k in TAUGHT[kind]}
  if kind == "tokens":
    out["logits"] = tf.transpose(out["logits"], [0, 2, 1])
  return out


# -------------------------------------------------------------------- loss
def loss_stats(kind: str, config: DistillationConfig,
               outputs: Mapping[str, tf.Tensor],
               teacher: Mapping[str, tf.Tensor],
               batch: Mapping[str, tf.Tensor]) -> Stats:
  """The distillation stats of a batch: `prediction_loss` (alpha * soft +
  (1 - alpha) * hard, `bert.losses.distillation_stats`), `soft_loss`,
  `hard_loss` and `accuracy` where the task has one; with the intermediate
  losses on, `hidden_loss` and `attention_loss`, weighted.

  outputs: the student's (with the intermediate losses, the `Distiller`'s
    `student_hidden`, `teacher_hidden`, ... too); teacher: the teacher's
    outputs (`TAUGHT[kind]`); batch: `has_label`, `input_mask`, the labels
    (`LABELS[kind]`) and for tokens `word_start`.
  """
  mask = batch["input_mask"]
  stats = losses.distillation_stats(
      kind, outputs, teacher, {k: batch[k] for k in LABELS[kind]},
      batch["has_label"], config.temperature, config.alpha, input_mask=mask,
      word_start=batch.get("word_start"))
  if config.hidden_weight:
    num, den = losses.hidden_state_stats(
        outputs["student_hidden"], outputs["teacher_hidden"], mask)["hidden_loss"]
    stats["hidden_loss"] = (config.hidden_weight * num, den)
  if config.attention_weight:
    num, den = losses.attention_stats(
        outputs["student_attention"], outputs["teacher_attention"],
        mask)["attention_loss"]
    stats["attention_loss"] = (config.attention_weight * num, den)
  return stats
