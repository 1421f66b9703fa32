"""`Distiller`: a student task model trained against a frozen teacher.

Training wrapper only: the student (`distiller.student`, a model of the
teacher's class) is what is checkpointed as the run's model, exported and
served; the teacher is held outside Keras' tracking, so it is never trained
and never written into the student's checkpoints.
"""

from typing import Optional, Sequence

import tensorflow as tf
import tf_keras

from bert import distillation as distil
from bert.io import AtomicSave
from bert.layers._util import initializer
from bert.validation import ConfigError


class Distiller(AtomicSave, tf_keras.Model):
  """The student's outputs, and what the distillation losses compare them to.

  call(inputs, training) -> the student's outputs (e.g. `logits`), plus with
  a `teacher` its outputs as `teacher_<name>` (e.g. `teacher_logits`), and
  with the intermediate losses on:
    student_hidden / teacher_hidden: per student layer [batch, seq, width
      of the teacher], the student's through `hidden_projection` when the
      widths differ, the teacher's of the mapped layer (`layer_map`);
    student_attention / teacher_attention: per student layer [batch, heads,
      seq, seq].

  Args:
    student: a task model (`EncoderModel`).
    teacher: a task model of the same class, or None when its outputs come
      with the data (cached).
    layer_map: for each student layer, the teacher layer it learns from.
    hidden, attention: which intermediate losses are on.
    masking: a `TokenMasking` applied to the inputs of both while training
      (dynamically masked transfer data), or None.
  """

  def __init__(self, student, teacher=None,
               layer_map: Optional[Sequence[int]] = None, hidden: bool = False,
               attention: bool = False, masking=None, **kwargs):
    kwargs.setdefault("name", "distiller")
    _check_pair(student, teacher, layer_map, hidden or attention)
    super().__init__(**kwargs)
    if (hidden or attention or masking is not None) and teacher is None:
      raise ConfigError("Distiller: the intermediate losses and masking need "
                        "the teacher")
    self.masking = masking
    self.student = student
    # Frozen and untracked: not in trainable_variables, not in checkpoints.
    object.__setattr__(self, "teacher", teacher)
    if teacher is not None:
      teacher.trainable = False
    self.layer_map = tuple(layer_map or ())
    self.hidden = hidden
    self.attention = attention
    self.hidden_projection = None
    if hidden and student.hidden_size != teacher.hidden_size:
      # TinyBERT's W_h: one learned map of the student's width onto the
      # teacher's, shared by all layers; trained, never exported.
      self.hidden_projection = tf_keras.layers.Dense(
          teacher.hidden_size, name="hidden_projection",
          kernel_initializer=initializer(student.initializer_range))
      with tf.name_scope(self.hidden_projection.name):
        self.hidden_projection.build([None, None, student.hidden_size])
    self.built = True

  @property
  def intermediate(self) -> bool:
    return self.hidden or self.attention

  def call(self, inputs, training=None):
    if self.masking is not None:
      inputs = self.masking(inputs, training=training)
    if self.intermediate:
      outputs, inner = self.student.call_with_internals(inputs, training)
    else:
      outputs, inner = self.student(inputs, training=training), None
    outputs = dict(outputs)
    if self.teacher is None:
      return outputs
    if self.intermediate:
      taught, teacher_inner = self.teacher.call_with_internals(inputs, False)
    else:
      taught = self.teacher(inputs, training=False)
    outputs.update({f"teacher_{k}": tf.stop_gradient(v)
                    for k, v in taught.items()})
    if self.hidden:
      project = self.hidden_projection or (lambda x: x)
      outputs["student_hidden"] = [project(h) for h in inner["encoder_outputs"]]
      outputs["teacher_hidden"] = [
          tf.stop_gradient(teacher_inner["encoder_outputs"][j])
          for j in self.layer_map]
    if self.attention:
      outputs["student_attention"] = list(inner["attention_probs"])
      outputs["teacher_attention"] = [
          tf.stop_gradient(teacher_inner["attention_probs"][j])
          for j in self.layer_map]
    return outputs

  # The student is what is served: its preprocessor and export.
  @property
  def preprocessor(self):
    return self.student.preprocessor

  def attach_preprocessor(self, preprocessor) -> None:
    self.student.attach_preprocessor(preprocessor)

  def export(self, path: str, precision: Optional[str] = None, gate=None,
             runtime=None) -> dict:
    """The student's serving export (see its `export`)."""
    return self.student.export(path, precision=precision, gate=gate,
                               runtime=runtime)


def _check_pair(student, teacher, layer_map, intermediate: bool) -> None:
  """A student task model, a teacher of its class, and (for the
  intermediate losses) one teacher block per student block."""
  if not hasattr(student, "call_with_internals"):   # an EncoderModel
    raise ConfigError(f"Distiller.student must be a task model (e.g. a "
                      f"BertClassifier), got {type(student).__name__}")
  if teacher is None:
    return
  distil.teacher_kind(teacher, "Distiller.teacher", student=student)
  if intermediate:
    distil.check_layer_map("Distiller.layer_map", layer_map or (),
                           len(student.encoder.transformer_layers),
                           len(teacher.encoder.transformer_layers))
