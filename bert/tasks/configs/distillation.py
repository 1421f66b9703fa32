"""How a student learns from its teacher: the one config of knowledge
distillation, shared by `DistillationTask` (bert-train, gin) and the Keras
path (`model.fit(..., teacher=...)`)."""

from typing import Optional, Tuple

import gin

from bert.tasks.configs.common import config_class, set_field
from bert.validation import ConfigError, check_choice, check_float, check_int

TEACHER_OUTPUTS = ("auto", "cached", "on_the_fly")


@gin.configurable
@config_class
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
      set_field(self, "layer_map", tuple(self.layer_map))
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
    owner = type(self).__name__
    mapping = self.layer_map or tuple(
        (i + 1) * teacher_layers // student_layers - 1
        for i in range(student_layers))
    if len(mapping) != student_layers:
      raise ConfigError(f"{owner}.layer_map={list(mapping)} names "
                        f"{len(mapping)} teacher layers for a student of "
                        f"{student_layers}")
    if max(mapping) >= teacher_layers:
      raise ConfigError(f"{owner}.layer_map={list(mapping)}: the teacher has "
                        f"layers 0..{teacher_layers - 1}")
    return tuple(mapping)
