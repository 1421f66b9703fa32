"""`BertPreprocessor`, the base of the task preprocessors: vocabulary, casing,
sequence length and length buckets, and the `tf.data` pipelines over encoded
rows (see `bert.models.preprocessors` for the task classes)."""

import math
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert.data import length_buckets as lb
from bert.data.tokenization import Tokenizer
from bert.features import ENCODER_INPUTS
from bert.layers.vocabulary import Vocabulary


class BertPreprocessor(tf_keras.layers.Layer):
  """Base: vocabulary, casing, sequence length and the length buckets.

  Subclasses implement `check(x, y, num_classes)` (raw inputs and labels
  checked, with `bert.models.inputs`, one error naming any bad item),
  `_encode(x, y)` (checked inputs -> dict of int32 NumPy arrays, one row per
  model input row, with the targets), `targets(features)` and
  `decode(outputs, features, x)` (model outputs in row order -> task-level
  predictions). `encode(x, y)` is `check` then `_encode`: no raw input
  reaches the tokenizer unchecked.
  """

  def __init__(self, vocabulary, lower_case: Optional[bool] = None,
               seq_length: int = 128,
               length_buckets: Optional[Sequence[int]] = None, **kwargs):
    """vocabulary: a `bert.layers.Vocabulary` (any family's), a vocabulary
    file, WordPiece tokens in id order, or a saved config's dict.
    lower_case: None takes the vocabulary's own say (else True); byte-level
    BPE has none."""
    super().__init__(trainable=False, **kwargs)
    vocabulary = Vocabulary.of(vocabulary, f"{type(self).__name__}.vocabulary")
    self.lower_case = vocabulary.casing(lower_case)
    self.seq_length = int(seq_length)
    self.length_buckets = lb.check_length_buckets(
        lb.default_length_buckets(self.seq_length) if length_buckets is None
        else length_buckets, self.seq_length,
        f"{type(self).__name__}.length_buckets")
    # Not tracked by Keras (a 30k-token list); saved through get_config.
    object.__setattr__(self, "_vocabulary", vocabulary)
    object.__setattr__(self, "tokenizer", Tokenizer(
        vocabulary=self._vocabulary, lower_case=self.lower_case,
        **self._tokenizer_options(vocabulary)))

  def _tokenizer_options(self, vocabulary) -> dict:
    """More arguments of the tokenizer layer, for a task that needs them."""
    del vocabulary
    return {}

  @property
  def vocabulary(self) -> Vocabulary:
    """The vocabulary: a sequence of the tokens in id order, with the kind
    and contents its tokenizer needs."""
    return self._vocabulary

  @classmethod
  def from_checkpoint(cls, checkpoint, **kwargs):
    """The preprocessor of a loaded checkpoint (`bert.checkpoints.load`):
    its vocabulary and casing; `kwargs` as the constructor's."""
    if checkpoint.vocab_file is None:
      raise ValueError("the checkpoint has no vocabulary (vocab.txt, "
                       "vocab.json + merges.txt, spiece.model or "
                       "tokenizer.json), so no preprocessor can be built")
    vocabulary = Vocabulary.from_file(checkpoint.vocab_file)
    if (checkpoint.lower_case is None and "lower_case" not in kwargs
        and vocabulary.has_casing and vocabulary.lower_case is None):
      raise ValueError(f"the checkpoint with {checkpoint.vocab_file} does not "
                       "say whether it is cased; pass lower_case=True/False")
    if checkpoint.lower_case is not None:
      kwargs.setdefault("lower_case", checkpoint.lower_case)
    preprocessor = cls(vocabulary, **kwargs)
    if preprocessor.seq_length > checkpoint.config.max_position_embeddings:
      raise ValueError(f"seq_length={preprocessor.seq_length} exceeds the "
                       "model's max_position_embeddings="
                       f"{checkpoint.config.max_position_embeddings}")
    return preprocessor

  # ------------------------------------------------------------ interface
  def encode(self, x, y=None, num_classes: Optional[int] = None
             ) -> Dict[str, np.ndarray]:
    """Model inputs of raw inputs `x` (with raw labels `y`, also their
    targets: `targets(features)`), once `check` has found them well-formed.

    num_classes: the model's class count, which integer labels must be
      below (1: regression targets); None: unknown (labels given by name
      are still checked against `labels`).
    """
    x, y = self.check(x, y, num_classes)
    return self._encode(x, y)

  def check(self, x, y=None, num_classes: Optional[int] = None):
    """(x, y) as `_encode` takes them; a bad argument or item is a
    `DataError` (an `InputTypeError` for a wrong type) naming it
    (`bert.models.inputs`)."""
    raise NotImplementedError

  def _encode(self, x, y) -> Dict[str, np.ndarray]:
    raise NotImplementedError

  def targets(self, features: Dict[str, np.ndarray]):
    """The targets `fit` and `evaluate` feed, from `encode(x, y)`."""
    return features["label"]

  def decode(self, outputs: Dict[str, np.ndarray], features, x):
    del features, x
    return outputs

  # Model outputs with a sequence axis (padded back to seq_length).
  sequence_outputs: Sequence[str] = ()

  # ------------------------------------------------------------- pipeline
  def model_inputs(self, features):
    return {k: features[k] for k in ENCODER_INPUTS}

  def num_rows(self, features) -> int:
    """Rows of `encode`'s features."""
    return len(features["input_word_ids"])

  def num_batches(self, features, batch_size: int) -> int:
    """Batches of one pass of `dataset(features, ..., batch_size)`."""
    lengths = lb._row_lengths_np(features, "input_mask")  # pylint: disable=protected-access
    index = np.searchsorted(np.asarray(self.length_buckets), lengths)
    counts = np.bincount(index, minlength=len(self.length_buckets))
    return int(sum(math.ceil(c / batch_size) for c in counts))

  def dataset(self, features, targets=None, batch_size: int = 32,
              training: bool = False, shuffle: bool = True,
              seed: Optional[int] = lb.SHUFFLE_SEED) -> tf.data.Dataset:
    """(inputs, targets) batches (inputs alone without targets), each cut
    to its length bucket.

    training: the endless stream `bert-train` draws its batches from
      (`length_buckets.training_batches`: shuffled anew each pass unless
      `shuffle=False`, full batches of one bucket); `fit` runs
      `length_buckets.steps_per_epoch` of them per epoch. Otherwise one pass
      over the rows, batched by bucket.
    """
    n = len(features["input_word_ids"])
    data = dict(self.model_inputs(features))
    # A dict of targets travels as one column each ("targets/<name>").
    if isinstance(targets, dict):
      data.update({f"targets/{k}": v for k, v in targets.items()})
    elif targets is not None:
      data["targets"] = targets
    ds = tf.data.Dataset.from_tensor_slices(data)
    if training:
      ds = lb.training_batches(ds, n, batch_size, self.length_buckets,
                               shuffle=shuffle, seed=seed)
    else:
      ds = ds.group_by_window(
          key_func=lb.bucket_key(self.length_buckets),
          reduce_func=lambda _, rows: rows.batch(batch_size),
          window_size=batch_size)
    # Targets with a sequence axis last (per-token labels, a teacher's token
    # or span logits) are cut with the inputs.
    cut = lb.bucket_cutter(
        ENCODER_INPUTS + tuple(k for k in lb.sequence_keys(data, self.seq_length)
                               if k.startswith("targets")),
        self.length_buckets)

    def split(d):
      d = cut(d)
      inputs = {k: d[k] for k in ENCODER_INPUTS}
      if targets is None:
        return inputs
      if isinstance(targets, dict):
        return inputs, {k: d[f"targets/{k}"] for k in targets}
      return inputs, d["targets"]

    ds = ds.map(split, num_parallel_calls=tf.data.AUTOTUNE)
    if not training:
      ds = ds.apply(tf.data.experimental.assert_cardinality(
          self.num_batches(features, batch_size)))
    return ds.prefetch(tf.data.AUTOTUNE)

  def predict_features(self, predict_fn, features, batch_size: int):
    """`predict_fn(batch)` (the model's outputs) on every row, run in length
    order and returned in row order."""
    return lb.predict_by_length(
        predict_fn, self.model_inputs(features), batch_size,
        self.length_buckets, self.sequence_outputs)

  # -------------------------------------------------------- serialisation
  def get_config(self):
    config = super().get_config()
    config.pop("trainable", None)
    config.update(vocabulary=self._vocabulary.get_config(),
                  lower_case=self.lower_case,
                  seq_length=self.seq_length,
                  length_buckets=list(self.length_buckets))
    return config
