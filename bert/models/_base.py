"""What the models that wrap one encoder and task heads share: construction,
the input signature, `from_pretrained` and serialisation (Keras training
comes from `_keras_training.KerasTraining`). Each model has one `call`."""

from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert import precision as precision_lib
from bert.io import AtomicSave
from bert.features import ENCODER_INPUTS
from bert.models._keras_training import KerasTraining
from bert.models.pretrained import load_pretrained
from bert.networks.encoder_scaffold import encoder_inputs
from bert.serving import frozen
from bert.validation import ConfigError, check_labels


def per_example(layer, pooled, training=None):
  """`layer` on pooled vectors [batch, hidden], or on packed rows' per-example
  vectors [batch, k, hidden] (flattened to [batch * k, hidden] and back, so
  the layer sees plain vectors either way)."""
  if pooled.shape.rank != 3:
    return layer(pooled, training=training)
  shape = tf.shape(pooled)
  out = layer(tf.reshape(pooled, [-1, pooled.shape[-1]]), training=training)
  return tf.reshape(out, tf.concat([shape[:2], tf.shape(out)[1:]], 0))


def copy_teacher_layers(student, teacher, layers: Sequence[int]) -> None:
  """Sets every weight of `student` (the teacher's model class, fewer
  blocks) from `teacher`: embeddings, blocks `layers` in order, pooler, and
  the task head (matched by layer name)."""
  s, t = student.encoder, teacher.encoder
  pairs = [(s.embedding_layer, t.embedding_layer)]
  if s.pooler_layer is not None:
    pairs.append((s.pooler_layer, t.pooler_layer))
  pairs += [(s.transformer_layers[i], t.transformer_layers[j])
            for i, j in enumerate(layers)]
  heads = {layer.name: layer for layer in teacher.layers if layer is not t}
  pairs += [(layer, heads[layer.name]) for layer in student.layers
            if layer is not s and layer.weights]
  copied = 0
  for mine, theirs in pairs:
    mine.set_weights(theirs.get_weights())
    copied += len(mine.weights)
  if copied != len(student.weights):
    raise AssertionError(f"copied {copied} of the student's "
                         f"{len(student.weights)} weights")


class EncoderModel(AtomicSave, KerasTraining, tf_keras.Model):
  """A model of one encoder (`self.encoder`) and task heads.

  Subclasses create their heads in `__init__`, call `self._built_with(
  heads)` to create the heads' weights, and implement `call(inputs,
  training=None)`: the one forward path, which takes plain and packed rows
  alike (see `EncoderScaffold`). `inputs` is the encoder's dict plus the
  keys in `extra_inputs` (e.g. `masked_lm_positions`).

  `_head_config` lists the constructor arguments `get_config` saves beside
  the encoder; `from_config` rebuilds the encoder first, so heads tied to
  its weights (the masked-LM head) are tied again.

  `save` and `save_weights` write atomically (`AtomicSave`): a failed save
  leaves the previous one, and a folder holding the user's files is never
  written into.
  """

  _head_config: Sequence[str] = ()
  extra_inputs: Sequence[str] = ()
  # Rank of each int input: [batch, seq]; multiple choice adds a choice axis.
  input_rank = 2

  def __init__(self, encoder, **kwargs):
    super().__init__(**kwargs)
    self.encoder = encoder

  @property
  def hidden_size(self) -> int:
    return self.encoder.hidden_size

  @property
  def initializer_range(self) -> float:
    """Stddev of the heads' initial weights: the encoder config's, or BERT's
    0.02 for an encoder built without a BertConfig."""
    return getattr(getattr(self.encoder, "config", None), "initializer_range",
                   0.02)

  def _built_with(self, heads: Dict[tf_keras.layers.Layer, Sequence]):
    """Builds each head for its input shape now, so every weight exists from
    construction on, and records the input signature a SavedModel traces."""
    for layer, input_shape in heads.items():
      if not layer.built:
        with tf.name_scope(layer.name):
          layer.build(input_shape)
    self.built = True
    self._set_save_spec(self.input_signature())

  def input_signature(self) -> Dict[str, tf.TensorSpec]:
    """int32 TensorSpecs of the plain inputs (the TF Hub names + extras)."""
    shape = [None] * self.input_rank
    return {k: tf.TensorSpec(shape, tf.int32, name=k)
            for k in tuple(ENCODER_INPUTS) + tuple(self.extra_inputs)}

  # While `call_with_internals` runs: where `_encode` leaves the encoder's
  # per-block outputs and attention probabilities.
  _internals = None

  def _encode(self, inputs, training, pooled_only=False):
    """The encoder on the encoder's entries of `inputs`."""
    missing = [k for k in self.extra_inputs if k not in inputs]
    if missing:
      raise ValueError(f"{self.name} expects inputs {missing} besides the "
                       f"encoder's; got {sorted(inputs)}")
    if self._internals is not None:
      # Every block in full (no [CLS]-only last block): distillation matches
      # all positions of every layer.
      out = self.encoder(encoder_inputs(inputs, self.name), training=training,
                         return_attention_probs=True)
      self._internals.update(encoder_outputs=out["encoder_outputs"],
                             attention_probs=out["attention_probs"])
      return out
    return self.encoder(encoder_inputs(inputs, self.name), training=training,
                        pooled_only=pooled_only)

  def call_with_internals(self, inputs, training=None):
    """(outputs, internals): the model's one forward path (`call`), and the
    encoder's `encoder_outputs` (per block, [batch, seq, hidden]) and
    `attention_probs` (per block, [batch, heads, seq, seq]) of that same pass,
    as knowledge distillation's intermediate losses need them."""
    internals = {}
    object.__setattr__(self, "_internals", internals)
    try:
      outputs = self(inputs, training=training)
    finally:
      object.__setattr__(self, "_internals", None)
    return outputs, internals

  def inference_outputs(self, batch):
    """The model's outputs on `batch` in inference mode (what `predict`
    decodes)."""
    return dict(self(batch, training=False))

  def inference_forward(self, features, method: str = "inference_outputs"):
    """The batch function that runs `method` (a method of this model taking
    one batch, in inference mode: `inference_outputs`, or a
    `TextEmbedder`'s `inference_embeddings`) over `features` (the model's
    int inputs, NumPy, all rows), as `predict` does. In bf16 the network is
    frozen once that pays, and kept while the weights are unchanged
    (`bert.serving.frozen.InferenceForward`)."""
    return frozen.InferenceForward.of(self, method).for_rows(
        int(np.sum(features["input_mask"])))

  # ----------------------------------------------------- from_pretrained
  # The preprocessor class `from_pretrained` attaches (None: none).
  preprocessor_class = None

  @classmethod
  def from_pretrained(cls, source, *, seq_length: Optional[int] = None,
                      labels=None, lower_case=None, preprocessor_args=None,
                      precision: Optional[str] = None, **head_args):
    """This model on a pretrained encoder, with its `preprocessor`.

    Args:
      source: a checkpoint folder in any format `bert.checkpoints.load`
        reads, or a preset name (`bert.pretrained.preset_names()`).
      seq_length: the longest input row, in word pieces (default 128; 384
        for the span labeler).
      labels: class (or tag) names in logit order; `num_classes` defaults
        to their number; `predict` returns them.
      lower_case: overrides the checkpoint's casing (when it states none).
      preprocessor_args: more arguments of the preprocessor (e.g. the span
        labeler's `doc_stride`, `max_answer_length`, `version_2`).
      precision: what the model computes in (`fp32`, `bf16`, `fp16`; the
        `bert.precision` vocabulary), or "auto" (the default, unless the
        environment variable BERT_PRECISION names another): bf16 where the
        CPU (AVX512_BF16/AMX with oneDNN) or GPU runs it fast, else fp32
        (`bert.precision.choose`; logged, and kept as `precision_choice`
        with the reason). `compile` then XLA-compiles `fit` when that
        choice is faster with XLA, unless given `jit_compile`.
      **head_args: the model's own arguments (e.g. `num_classes`,
        `dropout_rate`).
    """
    labels = cls._checked_labels(f"{cls.__name__}.from_pretrained", labels,
                                 head_args.get("num_classes"))
    if labels is None and cls.needs_labels:
      raise ConfigError(f"{cls.__name__}.from_pretrained needs labels=[...], "
                        "the names of the classes (e.g. the tags)")
    ckpt, model = load_pretrained(
        source, lambda c: cls._from_checkpoint(c, labels=labels, **head_args),
        owner=f"{cls.__name__}.from_pretrained", precision=precision,
        with_heads=cls._needs_pretraining_heads)
    if cls.preprocessor_class is not None:
      kwargs = dict(preprocessor_args or {})
      if lower_case is not None:
        kwargs["lower_case"] = lower_case
      if labels is not None:
        kwargs["labels"] = list(labels)
      if seq_length is not None:
        kwargs["seq_length"] = seq_length
      model.attach_preprocessor(cls.preprocessor_class.from_checkpoint(
          ckpt, **kwargs))
    return model

  _needs_pretraining_heads = False
  # The fewest class names `labels` may give (the classifier: 2), and
  # whether `from_pretrained` needs them (the tagger's preprocessor does).
  min_labels = 1
  needs_labels = False

  @classmethod
  def _checked_labels(cls, owner: str, labels, num_classes=None):
    """`labels` as a list of distinct names, one per class of the head
    (`num_classes` when given); a ConfigError naming `owner` otherwise."""
    if labels is None:
      return None
    if "num_classes" not in cls._head_config:
      raise ConfigError(f"{owner}: a {cls.__name__} has no classes to name; "
                        f"labels={labels!r} is not one of its arguments")
    labels = check_labels(owner, labels)
    if len(labels) < cls.min_labels:
      raise ConfigError(f"{owner}: labels={labels!r} names {len(labels)} "
                        f"class(es); a {cls.__name__} needs at least "
                        f"{cls.min_labels}" + (" (num_classes=1, without "
                        "labels, is a regression)" if cls.min_labels > 1
                                               else ""))
    if num_classes is not None and num_classes != len(labels):
      raise ConfigError(f"{owner}: labels={labels!r} names {len(labels)} "
                        f"classes but num_classes={num_classes!r}")
    return labels

  @classmethod
  def _from_checkpoint(cls, checkpoint, labels=None, **head_args):
    if labels is not None and "num_classes" in cls._head_config:
      head_args.setdefault("num_classes", len(labels))
    return cls(checkpoint.encoder, **head_args)

  @classmethod
  def from_teacher(cls, teacher, layers: Sequence[int]):
    """A smaller model of this class taken from a trained `teacher` of it
    (DistilBERT's initialisation): the teacher's embeddings, its blocks
    `layers` (0-based, in that order), pooler and task head, with its
    preprocessor. A student to distil into (`fit(..., teacher=teacher)`;
    `bert-train --task=distill`: `student="teacher_layers:0,2,4"`)."""
    import dataclasses  # pylint: disable=g-import-not-at-top
    from bert import distillation as distil  # pylint: disable=g-import-not-at-top
    from bert.networks.bert_encoder import BertEncoder  # pylint: disable=g-import-not-at-top
    if not isinstance(teacher, cls):
      raise ValueError(f"{cls.__name__}.from_teacher: the teacher is a "
                       f"{type(teacher).__name__}")
    config = getattr(teacher.encoder, "config", None)
    if config is None:
      raise ValueError(f"{cls.__name__}.from_teacher: the teacher's encoder is "
                       "not a BertEncoder")
    layers = distil.check_blocks(f"{cls.__name__}.from_teacher: layers",
                                 layers, config.num_hidden_layers)
    with precision_lib.policy_scope(teacher.dtype_policy.name):
      student = cls(BertEncoder(dataclasses.replace(
          config, num_hidden_layers=len(layers))),
                    **{k: getattr(teacher, k) for k in cls._head_config})
    object.__setattr__(student, "precision_choice", teacher.precision_choice)
    copy_teacher_layers(student, teacher, layers)
    if teacher.preprocessor is not None:
      student.attach_preprocessor(type(teacher.preprocessor).from_config(
          teacher.preprocessor.get_config()))
    return student

  preprocessor = None
  # How `from_pretrained` chose the compute precision (None: built otherwise).
  precision_choice = None

  def attach_preprocessor(self, preprocessor) -> None:
    """Sets `preprocessor` (saved through `get_config`, not as a tracked
    layer: it has no weights, and its tokenizer is rebuilt from the
    vocabulary on load). It must be of this model's `preprocessor_class`,
    with one label per class."""
    owner = f"{self.name}.attach_preprocessor"
    wanted = self.preprocessor_class
    if wanted is not None and not isinstance(preprocessor, wanted):
      raise ConfigError(f"{owner}: a {type(self).__name__} takes a "
                        f"{wanted.__name__}, not {type(preprocessor).__name__}")
    labels = getattr(preprocessor, "labels", None)
    if labels:
      self._checked_labels(owner, labels, getattr(self, "num_classes", None))
    object.__setattr__(self, "preprocessor", preprocessor)

  def export(self, path: str, precision: Optional[str] = None, gate=None,
             runtime=None) -> dict:
    """Writes this model's serving SavedModel on raw strings (what
    `bert-export` writes for a `bert-train` run of the same task) at
    `precision` (fp32, bf16, int8, or auto: the default, see
    `bert.export.write_serving`), checked by the accuracy `gate` when
    reduced (`bert.serving.gate`), the network run by `runtime` (None:
    TensorFlow, TFLite for int8, every runtime measured for auto with a
    gate; "openvino"); needs the `preprocessor`
    (`from_pretrained`, or the model `run_experiment` returns). Returns the
    export's manifest."""
    raise NotImplementedError(f"{type(self).__name__} has no serving export "
                              "(classifiers, taggers and span labelers do)")

  def _needs_preprocessor(self, what: str):
    if self.preprocessor is None:
      raise ValueError(f"{self.name}.{what} needs the preprocessor (vocabulary, "
                       f"casing, seq_length): build the model with "
                       f"{type(self).__name__}.from_pretrained(...)")
    return self.preprocessor

  def get_config(self):
    config = dict(encoder=tf_keras.layers.serialize(self.encoder), name=self.name,
                  trainable=self.trainable)
    config.update({k: getattr(self, k) for k in self._head_config})
    if self.preprocessor is not None:
      config["preprocessor"] = tf_keras.layers.serialize(self.preprocessor)
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    encoder = tf_keras.layers.deserialize(config.pop("encoder"),
                                          custom_objects=custom_objects)
    preprocessor = config.pop("preprocessor", None)
    model = cls(encoder, **config)
    if preprocessor is not None:
      model.attach_preprocessor(tf_keras.layers.deserialize(
          preprocessor, custom_objects=custom_objects))
    return model
