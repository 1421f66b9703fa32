"""`BertClassifier`: an encoder and a classification/regression head."""

from typing import Optional

import tf_keras

from bert.layers.classification_head import ClassificationHead
from bert.models import inputs
from bert.models._base import EncoderModel, per_example
from bert.models.pretrained import load_pretrained
from bert.models.preprocessors import TextClassifierPreprocessor
from bert.networks.encoder_scaffold import EncoderScaffold
from bert.validation import check_float, check_int


@tf_keras.utils.register_keras_serializable(package="bert")
class BertClassifier(EncoderModel):
  """Sentence(-pair) classification or regression on `pooled_output`.

  Inputs: the encoder's dict (`input_word_ids`, `input_mask`,
  `input_type_ids`). Output: float32 `logits` [batch, num_classes]
  (num_classes = 1 for regression: the predicted value), as google-research
  `run_classifier.create_model`: dropout + dense on the pooled [CLS] vector.
  Packed rows (with `cls_positions` [batch, k]): logits [batch, k, classes],
  one per packed example. The encoder's last block computes the [CLS] rows
  only (`pooled_only`).
  """

  _head_config = ("num_classes", "dropout_rate")
  preprocessor_class = TextClassifierPreprocessor
  min_labels = 2           # one output is a regression, which has no names

  def __init__(self, encoder: EncoderScaffold, num_classes: int,
               dropout_rate: float = 0.1, **kwargs):
    kwargs.setdefault("name", "bert_classifier")
    num_classes = check_int("BertClassifier", "num_classes", num_classes, 1)
    check_float("BertClassifier", "dropout_rate", dropout_rate,
                0.0, 1.0, max_open=True)
    super().__init__(encoder, **kwargs)
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.head = ClassificationHead(
        num_classes=num_classes, dropout_rate=dropout_rate,
        initializer_range=self.initializer_range,
        name="classifier")
    self._built_with({self.head: [None, self.hidden_size]})

  # The sentence-pair pre-training task's classes, in logit order: BERT's
  # next-sentence prediction (0: B follows A) and ALBERT's sentence order
  # (0: A then B as written, 1: swapped).
  SENTENCE_TASK_LABELS = dict(nsp=("is_next", "not_next"),
                              sop=("in_order", "swapped"))

  @classmethod
  def next_sentence(cls, source, *, seq_length: Optional[int] = None,
                    precision: Optional[str] = None) -> "BertClassifier":
    """BERT's next-sentence (ALBERT's sentence-order) head of a checkpoint
    with its pre-training heads, as a classifier of (a, b) text pairs:
    `predict((a, b))` gives `labels` ("is_next"/"not_next"; ALBERT:
    "in_order"/"swapped") and `probabilities`; `export` serves it on raw
    strings; `fit` fine-tunes it like any classifier."""
    owner = f"{cls.__name__}.next_sentence"

    def build(ckpt):
      task = ckpt.config.sentence_task
      if task is None or ckpt.next_sentence is None:
        raise ValueError(
            f"{owner}: {ckpt.folder or source} has no sentence head (a "
            f"{ckpt.config.family} checkpoint "
            + ("has none" if task is None else "saved without it") + ")")
      model = cls(ckpt.encoder, num_classes=2)
      model.head.set_weights(ckpt.next_sentence.get_weights())
      return model

    ckpt, model = load_pretrained(source, build, owner=owner,
                                  precision=precision, with_heads=True)
    kwargs = {} if seq_length is None else dict(seq_length=seq_length)
    model.attach_preprocessor(TextClassifierPreprocessor.from_checkpoint(
        ckpt, labels=list(cls.SENTENCE_TASK_LABELS[ckpt.config.sentence_task]),
        text_pairs=True, **kwargs))
    return model

  def call(self, inputs, training=None):
    pooled = self._encode(inputs, training, pooled_only=True)["pooled_output"]
    return dict(logits=per_example(self.head, pooled, training))

  def export(self, path: str, precision: Optional[str] = None, gate=None,
             runtime=None) -> dict:
    """Serving SavedModel: `text` (and `text_b` for pairs) -> `probabilities`
    and `label` (regression: `score`); see `bert.export.export_classifier`
    (`precision`, `gate`, `runtime`: `bert.export.write_serving`)."""
    from bert import export  # pylint: disable=g-import-not-at-top
    pre = self._needs_preprocessor("export")
    if pre.text_pairs is None:
      raise ValueError(f"{self.name}.export: unknown whether the model takes "
                       "text pairs; fit it first or set preprocessor.text_pairs")
    labels = None
    if self.num_classes > 1:
      labels = pre.labels or [str(i) for i in range(self.num_classes)]
    return export.export_classifier(
        self, path, pre.vocabulary, pre.lower_case, pre.seq_length, labels,
        pre.text_pairs, precision=precision, length_buckets=pre.length_buckets,
        gate=gate, runtime=runtime)

  # ---------------------------------------------- Keras training (compile)
  @property
  def distillation_kind(self):
    return "regression" if self.num_classes == 1 else "classification"

  @property
  def stat_names(self):
    return ("loss",) if self.num_classes == 1 else ("loss", "accuracy")

  def objective(self, x, y, outputs):
    """y: int labels [batch] (regression: float targets)."""
    from bert import losses  # pylint: disable=g-import-not-at-top
    return losses.classification_stats(outputs["logits"], y,
                                           regression=self.num_classes == 1)

  def check_targets(self, x, y):
    """y: class ids in [0, num_classes) (regression: finite numbers)."""
    if self.num_classes == 1:
      inputs.regression_targets(y, "y")
    else:
      inputs.class_ids(y, "y", self.num_classes)

  def default_metrics(self):
    from bert import metrics  # pylint: disable=g-import-not-at-top
    return [metrics.BinaryF1()] if self.num_classes == 2 else []
