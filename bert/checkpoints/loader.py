"""`load`: one entry point for every checkpoint format (`read` checks a
folder, `build` makes its networks; `save` is in saver.py).

Formats (detected from the folder):
  "tf2"           this library's: tf.train.Checkpoint + bert_config.json +
                  bert_checkpoint.json (+ vocab.txt)
  "tf1"           google-research: bert_config.json + bert_model.ckpt.* with
                  the original variable names (+ vocab.txt); ALBERT's
                  (albert_config.json, 30k-clean.model) and ELECTRA's
                  (electra/..., config optional) own names too
                  (bert/checkpoints/google_research.py)
  "model_garden"  Model Garden TF2: tf.train.Checkpoint(encoder=BertEncoder
                  or AlbertEncoder) + bert_config.json (or albert_config.json),
                  or an ElectraPretrainer's training checkpoint
  "hf"            Hugging Face: config.json + model.safetensors (+ vocab.txt)
  "tfhub"         a TF Hub BERT or ALBERT encoder SavedModel (Model
                  Garden's export_tfhub): config from the variables (ALBERT's
                  layer count from its Keras metadata), vocab and casing from
                  its assets (read, never run)
  "keras_hub"     a KerasHub BertBackbone preset: config.json,
                  model.weights.h5, tokenizer.json + assets/tokenizer/
  "run"           a `bert-train` model_dir (pre-training, fine-tuning or
                  distillation): the run's operative_config.gin rebuilds its
                  model, the newest checkpoint gives the weights; its encoder
                  (a distillation run: the student's) and, for pre-training
                  runs, the heads
All but "tf2" go through the canonical TF1-named arrays (bert/checkpoints/
mapping.py), where every weight is matched strictly; bert/checkpoints/reader.py
reads the folder and checks its config against its weights before any
variable is built.
"""

import dataclasses
import os
from typing import List, Optional

import tensorflow as tf

from bert.checkpoints import mapping
from bert.checkpoints import tf1
from bert import pretrained
from bert import registry
from bert.checkpoints.compat import check_same_shapes
from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.checkpoints.reader import (GOOGLE_CONFIG, HF_CONFIG, METADATA_FILE,
                                     RUN_CONFIG, VOCAB_FILE, check_folder,
                                     check_before_building, detect_format,
                                     metadata, read_folder, sentence_head,
                                     tf2_prefix)
from bert.checkpoints.reader import albert_casing
from bert.checkpoints.reader import check_vocab as _check_vocab
from bert.config import BertConfig
from bert.untrusted import first_line
from bert.validation import renamed_keywords
from bert.layers.classification_head import ClassificationHead
from bert.layers.discriminator_head import DiscriminatorHead
from bert.layers.masked_lm_head import MaskedLMHead
from bert.networks.pretraining_heads import build_pretraining_heads
from bert.networks.bert_encoder import BertEncoder

FORMATS = ("tf2", "tf1", "model_garden", "hf", "tfhub", "keras_hub", "run")
WRITABLE_FORMATS = ("tf2", "tf1", "model_garden", "hf")
__all__ = ["BertCheckpoint", "CheckedCheckpoint", "FORMATS", "WRITABLE_FORMATS",
           "METADATA_FILE", "GOOGLE_CONFIG", "HF_CONFIG", "VOCAB_FILE",
           "RUN_CONFIG", "build", "build_discriminator_head",
           "build_pretraining_heads", "detect_format", "load", "read"]


@dataclasses.dataclass
class BertCheckpoint:
  """A loaded checkpoint: the config, the encoder with weights, and what is
  known about its tokenizer; with `with_heads=True` also the pre-training
  heads (`masked_lm` tied to the encoder's word embeddings, `next_sentence`)
  when the checkpoint has them, and an ELECTRA discriminator's head
  (`discriminator`, ElectraForPreTraining) when it has that."""
  config: BertConfig
  encoder: BertEncoder
  vocab_file: Optional[str] = None
  lower_case: Optional[bool] = None
  masked_lm: Optional[MaskedLMHead] = None
  next_sentence: Optional[ClassificationHead] = None
  format: Optional[str] = None
  # ELECTRA's replaced-token detection head (the released discriminators);
  # None for every other checkpoint.
  discriminator: Optional[DiscriminatorHead] = None
  ignored_variables: List[str] = dataclasses.field(default_factory=list)
  # The folder it was read from (a preset: where it is cached); None when
  # built otherwise. A sentence-transformers layout is read from it.
  folder: Optional[str] = None

  @property
  def has_heads(self) -> bool:
    """The family's pre-training heads are all here: the masked LM, and
    the sentence head where the family has one (BERT, ALBERT)."""
    return self.masked_lm is not None and (
        self.next_sentence is not None or self.config.sentence_task is None)


# -------------------------------------------------------------------- load
@renamed_keywords(still_read=True, preprocessor="preprocessing")
def load(path: str, *, with_heads: bool = False,
         format: Optional[str] = None,
         preprocessing: Optional[str] = None) -> BertCheckpoint:
  """Loads a BERT checkpoint folder of any supported format, or a preset:
  `build(read(...))`, except a run ("run"), which its reader rebuilds.

  Args:
    path: the folder, or a preset name (`bert.pretrained.preset_names()`:
      downloaded once into the cache, or an installed package's weights).
    with_heads: also load the pre-training heads when the checkpoint has them.
    format: one of FORMATS; None detects it.
    preprocessing: for a TF Hub encoder SavedModel, the matching TF Hub
      preprocessing SavedModel (`bert_*_preprocess`) to take the vocab and
      casing from (`preprocessor=`, its former name, still reads).

  Raises:
    CheckpointError: missing folder/config, unknown format, unreadable file.
    CheckpointMismatchError: a weight missing, extra, or of the wrong shape,
      or a vocab.txt whose size differs from config.vocab_size.
  """
  folder, fmt = _locate(path, format, preprocessing)
  if fmt == "run":
    # A run records the casing its EncoderSource was given, often none.
    ckpt = _load_run(folder, with_heads)
    return dataclasses.replace(ckpt, folder=folder, lower_case=albert_casing(
        ckpt.lower_case, ckpt.config, ckpt.vocab_file))
  return build(_read(folder, fmt, with_heads, preprocessing))


@dataclasses.dataclass(frozen=True, eq=False)
class CheckedCheckpoint:
  """A checkpoint folder read and checked against its config, no variable
  built (`read`): what `build` makes the encoder from, in the caller's
  distribution scope. `arrays`: its weights by TF1 name; None for our own
  format ("tf2"), restored from `folder` by `build`."""
  folder: str
  format: str
  config: BertConfig
  vocab_file: Optional[str]
  lower_case: Optional[bool]
  with_heads: bool     # heads asked for (built when the checkpoint has them)
  has_heads: bool      # `arrays` hold pre-training heads
  arrays: Optional[dict] = dataclasses.field(default=None, repr=False)
  source: Optional[str] = None   # the file `arrays` came from, for errors
  # `arrays` hold ELECTRA's discriminator head (built when heads are asked
  # for, whether or not the masked-LM head is there too).
  has_discriminator: bool = False


def read(path: str, *, with_heads: bool = False,
         format: Optional[str] = None,
         preprocessing: Optional[str] = None) -> CheckedCheckpoint:
  """`load`'s reading and checks without building a variable: config,
  vocab, casing and every weight's shape (our format: the number of values),
  so a bad checkpoint fails here. Arguments and errors as `load`'s. A run
  ("run") is rebuilt by its reader and kept as arrays."""
  folder, fmt = _locate(path, format, preprocessing)
  if fmt == "run":
    ckpt = _load_run(folder, with_heads)
    return CheckedCheckpoint(
        folder, fmt, ckpt.config, ckpt.vocab_file, ckpt.lower_case,
        with_heads, ckpt.has_heads, source=folder,
        arrays=mapping.to_tf1(ckpt.encoder, ckpt.masked_lm, ckpt.next_sentence,
                              ckpt.discriminator),
        has_discriminator=ckpt.discriminator is not None)
  return _read(folder, fmt, with_heads, preprocessing)


def build(checked: CheckedCheckpoint, *,
          config: Optional[BertConfig] = None) -> BertCheckpoint:
  """The encoder of a `read` checkpoint (and its pre-training heads when
  asked for and present), built in the current distribution scope and
  policy, with the checkpoint's weights. `config` replaces the checkpoint's
  (same weight shapes, `check_same_shapes`; e.g. other dropout)."""
  if config is None:
    config = checked.config
  check_same_shapes(checked.config, config, checked.folder)
  encoder = BertEncoder(config)
  result = BertCheckpoint(config=config, encoder=encoder,
                          vocab_file=checked.vocab_file,
                          lower_case=checked.lower_case,
                          format=checked.format, folder=checked.folder)
  if checked.arrays is None:
    _load_tf2(checked.folder, result, checked.with_heads)
    return result
  heads = checked.with_heads and checked.has_heads
  if heads:
    result.masked_lm, result.next_sentence = build_pretraining_heads(
        encoder, next_sentence=sentence_head(checked.format, config,
                                             checked.arrays))
  if checked.with_heads and checked.has_discriminator:
    result.discriminator = build_discriminator_head(encoder)
  result.ignored_variables = mapping.assign_from_tf1(
      checked.arrays, encoder, result.masked_lm, result.next_sentence,
      source=checked.source,
      ignore_heads=not (heads or result.discriminator is not None),
      discriminator=result.discriminator)
  return result


def build_discriminator_head(encoder) -> DiscriminatorHead:
  """ELECTRA's discriminator head for `encoder`, built (the encoder config's
  activation and initializer), as the loaders and the ELECTRA pre-training
  model make it."""
  config = encoder.config
  head = DiscriminatorHead(activation=config.hidden_act,
                           initializer_range=config.initializer_range,
                           name="discriminator")
  head(tf.zeros([1, 1, config.hidden_size]))
  return head


def _locate(path, format, preprocessing):
  """(folder, format) of a folder or preset name."""
  if not os.path.exists(path) and pretrained.is_preset(path):
    # A download enters the cache only once it reads as a checkpoint.
    path = pretrained.resolve(path, check=lambda folder: _read(
        folder, format or detect_format(folder), False, None))
  folder = check_folder(path)
  fmt = format or detect_format(folder)
  if fmt not in FORMATS:
    raise CheckpointError(f"format must be one of {FORMATS}, got {fmt!r}")
  if preprocessing is not None and fmt != "tfhub":
    raise CheckpointError(f"{folder}: preprocessing= is for TF Hub "
                          f"SavedModels; this is a {fmt} checkpoint")
  return folder, fmt


def _read(folder, fmt, with_heads, preprocessing) -> CheckedCheckpoint:
  config, arrays, vocab_file, lower_case, source = read_folder(
      folder, fmt, preprocessing)
  if vocab_file is not None:
    _check_vocab(vocab_file, config)
  # The masked-LM head makes a checkpoint one with pre-training heads;
  # ELECTRA's discriminator head (ElectraForPreTraining) is told apart: a
  # generator (ElectraForMaskedLM) has the former, a discriminator the latter.
  has_heads = arrays is not None and any(
      n.startswith(mapping.HEAD_PREFIX + "predictions/") for n in arrays)
  has_discriminator = arrays is not None and any(
      n.startswith(mapping.DISCRIMINATOR_PREFIX) for n in arrays)
  # Config and weights are compared before anything is built: a config that
  # does not fit (say max_position_embeddings=1e12) is one line naming both,
  # not an allocation that fails deep inside TensorFlow.
  check_before_building(folder, fmt, config, arrays, with_heads and has_heads,
                        source,
                        discriminator=with_heads and has_discriminator)
  return CheckedCheckpoint(folder, fmt, config, vocab_file, lower_case,
                           with_heads, has_heads, arrays, source,
                           has_discriminator)


def _tf2_objects(result):
  objects = dict(encoder=result.encoder)
  if result.masked_lm is not None:
    objects.update(masked_lm=result.masked_lm)
  if result.next_sentence is not None:
    objects.update(next_sentence=result.next_sentence)
  if result.discriminator is not None:
    objects.update(discriminator=result.discriminator)
  return objects


def _load_tf2(folder, result, with_heads):
  meta = metadata(folder)
  prefix = tf2_prefix(folder)
  # Heads in the file are restored either way (so every value is consumed)
  # and dropped, recorded as ignored, when not asked for.
  if meta.get("has_heads"):
    result.masked_lm, result.next_sentence = build_pretraining_heads(
        result.encoder, next_sentence=meta.get(
            "has_sentence_head", result.config.sentence_task is not None))
  if meta.get("has_discriminator"):
    result.discriminator = build_discriminator_head(result.encoder)
  mismatch = (AssertionError, ValueError, tf.errors.InvalidArgumentError)
  try:
    # A file that cannot be read is named as such; one that reads but does
    # not fit the model is a mismatch.
    with tf1.reading(prefix, mismatch=mismatch):
      status = tf.train.Checkpoint(**_tf2_objects(result)).read(prefix)
      status.assert_consumed()
  except CheckpointError:
    raise
  except mismatch as e:
    raise CheckpointMismatchError(
        f"{prefix}: does not match the model of {GOOGLE_CONFIG}: "
        f"{first_line(e)}") from e
  if not with_heads:
    result.ignored_variables = (
        ["masked_lm", "next_sentence"] if meta.get("has_heads") else []) + (
            ["discriminator"] if result.discriminator is not None else [])
    result.masked_lm = result.next_sentence = result.discriminator = None


def _load_run(folder, with_heads):
  """A `bert-train` model_dir's encoder, rebuilt and restored as the run
  left it. Only the run's task can rebuild its model, and the tasks sit above
  this package: the front door registers their reader (`bert.registry`)."""
  read_run = registry.lookup("checkpoint_format", "run")
  if read_run is None:
    raise CheckpointError(f"{folder}: a bert-train run; no reader of runs is "
                          "registered (bert/__init__.py registers it)")
  return read_run(folder, with_heads)
