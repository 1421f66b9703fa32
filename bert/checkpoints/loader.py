"""`load` and `save`: one entry point for every checkpoint format.

Formats (detected from the folder):
  "tf2"           this library's: tf.train.Checkpoint + bert_config.json +
                  bert_checkpoint.json (+ vocab.txt)
  "tf1"           google-research: bert_config.json + bert_model.ckpt.* with
                  the original variable names (+ vocab.txt)
  "model_garden"  Model Garden TF2: tf.train.Checkpoint(encoder=BertEncoder)
                  + bert_config.json
  "hf"            Hugging Face: config.json + model.safetensors (+ vocab.txt)
  "tfhub"         a TF Hub BERT encoder SavedModel (Model Garden's
                  export_tfhub): config from the variables, vocab and casing
                  from its assets (read, never run)
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
import json
import os
import shutil
from typing import List, Optional, Union

import tensorflow as tf
from absl import logging

from bert.checkpoints import hf
from bert.checkpoints import mapping
from bert.checkpoints import model_garden
from bert.checkpoints import tf1
from bert.io import atomic_folder
from bert import pretrained
from bert import registry
from bert.checkpoints.compat import check_same_shapes
from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.checkpoints.reader import (GOOGLE_CONFIG, HF_CONFIG, METADATA_FILE,
                                     RUN_CONFIG, VOCAB_FILE, check_folder,
                                     check_before_building, detect_format,
                                     metadata, read_folder, tf2_prefix)
from bert.checkpoints.reader import TF2_PREFIX as _TF2_PREFIX
from bert.checkpoints.reader import check_vocab as _check_vocab
from bert.config import BertConfig
from bert.untrusted import first_line
from bert.layers.classification_head import ClassificationHead
from bert.layers.masked_lm_head import MaskedLMHead
from bert.networks.pretraining_heads import build_pretraining_heads
from bert.networks.bert_encoder import BertEncoder

FORMATS = ("tf2", "tf1", "model_garden", "hf", "tfhub", "keras_hub", "run")
WRITABLE_FORMATS = ("tf2", "tf1", "model_garden", "hf")
__all__ = ["BertCheckpoint", "CheckedCheckpoint", "FORMATS", "WRITABLE_FORMATS",
           "METADATA_FILE", "GOOGLE_CONFIG", "HF_CONFIG", "VOCAB_FILE",
           "RUN_CONFIG", "build", "build_pretraining_heads", "detect_format",
           "load", "read", "save"]


@dataclasses.dataclass
class BertCheckpoint:
  """A loaded checkpoint: the config, the encoder with weights, and what is
  known about its tokenizer; with `with_heads=True` also the pre-training
  heads (`masked_lm` tied to the encoder's word embeddings, `next_sentence`)
  when the checkpoint has them."""
  config: BertConfig
  encoder: BertEncoder
  vocab_file: Optional[str] = None
  do_lower_case: Optional[bool] = None
  masked_lm: Optional[MaskedLMHead] = None
  next_sentence: Optional[ClassificationHead] = None
  format: Optional[str] = None
  ignored_variables: List[str] = dataclasses.field(default_factory=list)

  @property
  def has_heads(self) -> bool:
    return self.masked_lm is not None and self.next_sentence is not None


# -------------------------------------------------------------------- load
def load(path: str, *, with_heads: bool = False,
         format: Optional[str] = None,
         preprocessor: Optional[str] = None) -> BertCheckpoint:
  """Loads a BERT checkpoint folder of any supported format, or a preset:
  `build(read(...))`, except a run ("run"), which its reader rebuilds.

  Args:
    path: the folder, or a preset name (`bert.pretrained.preset_names()`:
      downloaded once into the cache, or an installed package's weights).
    with_heads: also load the pre-training heads when the checkpoint has them.
    format: one of FORMATS; None detects it.
    preprocessor: for a TF Hub encoder SavedModel, the matching
      `bert_*_preprocess` SavedModel to take the vocab and casing from.

  Raises:
    CheckpointError: missing folder/config, unknown format, unreadable file.
    CheckpointMismatchError: a weight missing, extra, or of the wrong shape,
      or a vocab.txt whose size differs from config.vocab_size.
  """
  folder, fmt = _locate(path, format, preprocessor)
  if fmt == "run":
    return _load_run(folder, with_heads)
  return build(_read(folder, fmt, with_heads, preprocessor))


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
  do_lower_case: Optional[bool]
  with_heads: bool     # heads asked for (built when the checkpoint has them)
  has_heads: bool      # `arrays` hold pre-training heads
  arrays: Optional[dict] = dataclasses.field(default=None, repr=False)
  source: Optional[str] = None   # the file `arrays` came from, for errors


def read(path: str, *, with_heads: bool = False,
         format: Optional[str] = None,
         preprocessor: Optional[str] = None) -> CheckedCheckpoint:
  """`load`'s reading and checks without building a variable: config,
  vocab, casing and every weight's shape (our format: the number of values),
  so a bad checkpoint fails here. Arguments and errors as `load`'s. A run
  ("run") is rebuilt by its reader and kept as arrays."""
  folder, fmt = _locate(path, format, preprocessor)
  if fmt == "run":
    ckpt = _load_run(folder, with_heads)
    return CheckedCheckpoint(
        folder, fmt, ckpt.config, ckpt.vocab_file, ckpt.do_lower_case,
        with_heads, ckpt.has_heads, source=folder,
        arrays=mapping.to_tf1(ckpt.encoder, ckpt.masked_lm, ckpt.next_sentence))
  return _read(folder, fmt, with_heads, preprocessor)


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
                          do_lower_case=checked.do_lower_case,
                          format=checked.format)
  if checked.arrays is None:
    _load_tf2(checked.folder, result, checked.with_heads)
    return result
  heads = checked.with_heads and checked.has_heads
  if heads:
    result.masked_lm, result.next_sentence = build_pretraining_heads(encoder)
    if checked.format == "tfhub":
      # TF Hub's `mlm` sub-model has the masked-LM head only.
      result.next_sentence = None
  result.ignored_variables = mapping.assign_from_tf1(
      checked.arrays, encoder, result.masked_lm, result.next_sentence,
      source=checked.source, ignore_heads=not heads)
  return result


def _locate(path, format, preprocessor):
  """(folder, format) of a folder or preset name."""
  if not os.path.exists(path) and pretrained.is_preset(path):
    path = pretrained.resolve(path)
  folder = check_folder(path)
  fmt = format or detect_format(folder)
  if fmt not in FORMATS:
    raise CheckpointError(f"format must be one of {FORMATS}, got {fmt!r}")
  if preprocessor is not None and fmt != "tfhub":
    raise CheckpointError(f"{folder}: preprocessor= is for TF Hub SavedModels; "
                          f"this is a {fmt} checkpoint")
  return folder, fmt


def _read(folder, fmt, with_heads, preprocessor) -> CheckedCheckpoint:
  config, arrays, vocab_file, do_lower_case, source = read_folder(
      folder, fmt, preprocessor)
  if vocab_file is not None:
    _check_vocab(vocab_file, config)
  has_heads = arrays is not None and any(
      n.startswith(mapping.HEAD_PREFIX) for n in arrays)
  # Config and weights are compared before anything is built: a config that
  # does not fit (say max_position_embeddings=1e12) is one line naming both,
  # not an allocation that fails deep inside TensorFlow.
  check_before_building(folder, fmt, config, arrays, with_heads and has_heads,
                        source)
  return CheckedCheckpoint(folder, fmt, config, vocab_file, do_lower_case,
                           with_heads, has_heads, arrays, source)


def _tf2_objects(result):
  objects = dict(encoder=result.encoder)
  if result.masked_lm is not None:
    objects.update(masked_lm=result.masked_lm,
                   next_sentence=result.next_sentence)
  return objects


def _load_tf2(folder, result, with_heads):
  meta = metadata(folder)
  prefix = tf2_prefix(folder)
  # Heads in the file are restored either way (so every value is consumed)
  # and dropped, recorded as ignored, when not asked for.
  if meta.get("has_heads"):
    result.masked_lm, result.next_sentence = build_pretraining_heads(
        result.encoder)
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
  if meta.get("has_heads") and not with_heads:
    result.masked_lm = result.next_sentence = None
    result.ignored_variables = ["masked_lm", "next_sentence"]


def _load_run(folder, with_heads):
  """A `bert-train` model_dir's encoder, rebuilt and restored as the run
  left it. Only the run's task can rebuild its model, and the tasks sit above
  this package: the front door registers their reader (`bert.registry`)."""
  read_run = registry.lookup("checkpoint_format", "run")
  if read_run is None:
    raise CheckpointError(f"{folder}: a bert-train run; no reader of runs is "
                          "registered (bert/__init__.py registers it)")
  return read_run(folder, with_heads)


# -------------------------------------------------------------------- save
def save(obj: Union[BertCheckpoint, BertEncoder], path: str,
         format: str = "tf2", *, vocab_file: Optional[str] = None,
         do_lower_case: Optional[bool] = None) -> str:
  """Writes `obj` as a checkpoint folder at `path`; returns `path`.

  Formats: "tf2" (ours), "tf1" (google-research names, loadable by its
  `modeling.py`), "hf" (safetensors + config.json for `transformers`),
  "model_garden" (`tf.train.Checkpoint(encoder=...)` that
  `tfm.nlp.networks.BertEncoder` restores, + bert_config.json). The
  pre-training heads are written when `obj` has them, except to
  "model_garden", whose heads have another design (a warning says so). The
  write is atomic: a temp folder beside `path` is filled and then renamed, so
  an interrupted save never leaves a half-written checkpoint where a good one
  was.
  """
  if isinstance(obj, BertEncoder):
    obj = BertCheckpoint(config=obj.config, encoder=obj)
  if format not in WRITABLE_FORMATS:
    hint = {"tfhub": " (a TF Hub SavedModel: bert-export --kind=encoder)",
            "keras_hub": " (KerasHub reads the \"hf\" format: "
                         "BertBackbone.from_preset(folder))"}.get(format, "")
    raise CheckpointError(f"cannot write format {format!r}; use one of "
                          f"{', '.join(WRITABLE_FORMATS)}{hint}")
  if (obj.masked_lm is None) != (obj.next_sentence is None):
    raise CheckpointError("save: give both pre-training heads (masked_lm and "
                          "next_sentence) or neither")
  if obj.masked_lm is not None and obj.masked_lm.embedding_table is None:
    raise CheckpointError("save: the masked-LM head is not tied to the word "
                          "embeddings; BERT checkpoint formats store only tied "
                          "heads")
  if format == "tf1" and obj.config.hidden_act not in ("gelu", "relu", "tanh",
                                                       "linear"):
    logging.warning(
        "hidden_act=%r is not understood by google-research modeling.py; the "
        "TF1 checkpoint loads here but not there", obj.config.hidden_act)
  if format == "model_garden" and obj.masked_lm is not None:
    logging.warning(
        "Model Garden checkpoints hold the encoder only here: its pre-training "
        "heads differ from BERT's (a next-sentence head with its own pooler), "
        "so the masked-LM and next-sentence heads are not written")
  vocab_file = vocab_file or obj.vocab_file
  do_lower_case = obj.do_lower_case if do_lower_case is None else do_lower_case
  if vocab_file is not None:
    _check_vocab(vocab_file, obj.config)
  with _atomic_folder(path) as tmp:
    # Our metadata goes into every format; the other ecosystems' readers
    # ignore the extra file, and it keeps do_lower_case where they have no
    # place for it (TF1).
    _write_json(os.path.join(tmp, METADATA_FILE), dict(
        format="bert-tf2" if format == "tf2" else format, version=1,
        checkpoint=_TF2_PREFIX,
        has_heads=obj.masked_lm is not None and format != "model_garden",
        do_lower_case=do_lower_case))
    if format == "tf2":
      tf.train.Checkpoint(**_tf2_objects(obj)).write(os.path.join(tmp, _TF2_PREFIX))
      obj.config.to_json_file(os.path.join(tmp, GOOGLE_CONFIG))
    elif format == "model_garden":
      model_garden.write(mapping.to_tf1(obj.encoder),
                         obj.config.num_attention_heads,
                         os.path.join(tmp, tf1.DEFAULT_PREFIX))
      obj.config.to_json_file(os.path.join(tmp, GOOGLE_CONFIG))
    else:
      arrays = mapping.to_tf1(obj.encoder, obj.masked_lm, obj.next_sentence)
      if format == "tf1":
        tf1.write_arrays(arrays, os.path.join(tmp, tf1.DEFAULT_PREFIX))
        obj.config.to_json_file(os.path.join(tmp, GOOGLE_CONFIG))
      else:
        hf.write(arrays, tmp)
        hf_config = obj.config.to_hf_dict()
        if obj.masked_lm is not None:
          hf_config["architectures"] = ["BertForPreTraining"]
        _write_json(os.path.join(tmp, HF_CONFIG), hf_config)
        if do_lower_case is not None:
          _write_json(os.path.join(tmp, "tokenizer_config.json"), dict(
              do_lower_case=do_lower_case, tokenizer_class="BertTokenizer"))
    if vocab_file is not None:
      shutil.copyfile(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return path


def _write_json(path, d):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(d, f, indent=2, sort_keys=True)
    f.write("\n")


def _replaceable(path) -> bool:
  """An existing folder may be replaced only if it is empty or a checkpoint
  folder (never, say, a home directory given by mistake)."""
  if not os.path.isdir(path):
    return False
  files = set(os.listdir(path))
  return not files or METADATA_FILE in files


def _atomic_folder(path):
  return atomic_folder(path, _replaceable, "a checkpoint folder",
                       CheckpointError)
