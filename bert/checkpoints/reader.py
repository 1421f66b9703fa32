"""Reading a checkpoint folder: its format, metadata, config and weights.

`read_folder` gives the config and the weights as TF1-named arrays for every
format but ours ("tf2"), and `check_before_building` compares the two before
a single variable is allocated: a config that does not fit its weights is
one line naming both files, never an allocation failing deep inside
TensorFlow. Every JSON file and every file name written inside one is read
with `bert.untrusted` (one line naming the file; nothing outside the folder).
"""

import dataclasses
import math
import os
from typing import Optional

import tensorflow as tf

from bert.checkpoints import google_research
from bert.checkpoints import hf
from bert.checkpoints import keras_hub
from bert.checkpoints import mapping
from bert.checkpoints import model_garden
from bert.checkpoints import tf1
from bert.checkpoints import tfhub
from bert.checkpoints import hf_tokenizer
from bert.checkpoints.compat import check_vocab_size
from bert.checkpoints.errors import CheckpointError
from bert.config import BertConfig
from bert.io import present
from bert.data.errors import DataError
from bert.untrusted import named_path, read_json

METADATA_FILE = "bert_checkpoint.json"
GOOGLE_CONFIG = "bert_config.json"
HF_CONFIG = "config.json"
VOCAB_FILE = "vocab.txt"
RUN_CONFIG = "operative_config.gin"   # what makes a folder a bert-train run
TF2_PREFIX = "ckpt"


def detect_format(path: str) -> str:
  """Which format the checkpoint folder holds; CheckpointError if none."""
  folder = check_folder(path)
  files = set(os.listdir(folder))
  if METADATA_FILE in files and metadata(folder).get("format") == "bert-tf2":
    return "tf2"
  if hf.SAFETENSORS in files or hf.SAFETENSORS_INDEX in files:
    return "hf"
  if tfhub.is_saved_model(folder):
    return "tfhub"
  if keras_hub.is_preset(folder):
    return "keras_hub"
  if RUN_CONFIG in files:
    return "run"
  hf.reject_pickles(folder)
  if any(f.endswith(".index") for f in files) or "checkpoint" in files:
    keys = _checkpoint_keys(tf1.find_prefix(folder))
    if model_garden.is_model_garden(keys):
      return "model_garden"
    if google_research.is_google_research(keys):
      return "tf1"
    raise CheckpointError(f"{folder}: a TF checkpoint, but neither "
                          "google-research TF1 names (bert/..., ALBERT's "
                          "bert/encoder/transformer/..., ELECTRA's "
                          "electra/...) nor a Model Garden encoder")
  raise CheckpointError(
      f"{folder}: unknown checkpoint format (found "
      f"{', '.join(sorted(files)) or 'no files'}); expected {METADATA_FILE}, "
      f"{hf.SAFETENSORS}, bert_model.ckpt.index, {tfhub.SAVED_MODEL} with "
      f"variables/, or a KerasHub {keras_hub.WEIGHTS}")


def metadata(folder: str) -> dict:
  path = os.path.join(folder, METADATA_FILE)
  if not present(path):
    return {}
  return read_json(path, CheckpointError)


def tf2_prefix(folder: str) -> str:
  """The checkpoint prefix our metadata names (inside `folder`)."""
  return named_path(folder, metadata(folder).get("checkpoint", TF2_PREFIX),
                    CheckpointError, os.path.join(folder, METADATA_FILE))


def check_folder(path: str) -> str:
  if not os.path.exists(path):
    raise CheckpointError(f"{path}: no such checkpoint folder")
  if not os.path.isdir(path):
    raise CheckpointError(f"{path}: expected a checkpoint folder, got a file")
  return path


def _checkpoint_keys(prefix):
  return list(_shapes(prefix))


def _shapes(prefix):
  with tf1.reading(prefix):
    return tf.train.load_checkpoint(prefix).get_variable_to_shape_map()


def read_folder(folder, fmt, preprocessing):
  """(config, {TF1 name: array} (None for "tf2"), vocab file, lower_case,
  source file) of a checkpoint folder of format `fmt`."""
  if fmt == "tfhub":
    arrays, lower_case, heads, config = tfhub.read(folder)
    # Only this library's exports (which carry their config) may lack a vocab.
    vocab_required = config is None
    if config is None:
      config = tfhub.infer_config(
          arrays, heads, tfhub.activation(tfhub.graph_ops(folder)), folder)
      layers = tfhub.albert_layers(folder)
      if layers is not None:
        # Model Garden's AlbertEncoder (TF Hub albert_en_*): its one block
        # serves every layer.
        config = dataclasses.replace(config, family="albert",
                                     num_hidden_layers=layers,
                                     num_hidden_groups=1)
    vocab_file, preprocessing_lower_case = tfhub.assets(
        folder, preprocessing, required=vocab_required)
    if (vocab_required and config.family == "bert" and vocab_file
        and vocab_file.endswith(".model")):
      raise CheckpointError(
          f"{folder}: a SentencePiece vocab (ALBERT's), but no AlbertEncoder "
          f"in its Keras metadata ({tfhub.KERAS_METADATA}): how many layers "
          "share its one block is unknown")
    if (lower_case is not None and preprocessing_lower_case is not None
        and lower_case != preprocessing_lower_case):
      raise CheckpointError(
          f"{preprocessing}: its casing (do_lower_case="
          f"{preprocessing_lower_case}) contradicts the encoder's "
          f"(do_lower_case={lower_case})")
    if lower_case is None:
      lower_case = preprocessing_lower_case
    return (config, arrays, vocab_file,
            albert_casing(lower_case, config, vocab_file),
            os.path.join(folder, tfhub.VARIABLES))
  if fmt == "keras_hub":
    vocab_file, lower_case = keras_hub.tokenizer(folder)
    return (keras_hub.read_config(folder), keras_hub.read(folder), vocab_file,
            lower_case, os.path.join(folder, keras_hub.WEIGHTS))
  if fmt in ("tf1", "model_garden"):
    return _read_google(folder, fmt)
  config = _read_config(folder, HF_CONFIG if fmt == "hf" else GOOGLE_CONFIG)
  lower_case = _lower_case(folder, fmt)
  vocab_file = _vocab_file(folder)
  if vocab_file is None and fmt == "hf":
    vocab_file, lowercase = hf_tokenizer.vocabulary_file(folder)
    if lower_case is None:
      lower_case = lowercase
  if fmt == "tf2":
    return config, None, vocab_file, lower_case, folder
  if fmt == "hf":
    arrays = hf.read_tf1_arrays(folder, config.family)
    if config.family == "roberta":
      # RoBERTa was pre-trained without a pooler: the released weights have
      # none, while transformers' RobertaModel saves a (random) one.
      config = dataclasses.replace(
          config, use_pooler="bert/pooler/dense/kernel" in arrays)
    return (config, arrays, vocab_file, lower_case,
            os.path.join(folder, hf.SAFETENSORS))
  return config, None, vocab_file, lower_case, folder


def _read_google(folder, fmt):
  """`read_folder` of a google-research TF1 (BERT, ALBERT, ELECTRA) or a
  Model Garden TF2 checkpoint: the arrays first, whose names say the
  family where its repository named them its own way
  (`google_research`), then the config."""
  prefix = tf1.find_prefix(folder)
  family = None
  if fmt == "model_garden":
    arrays = model_garden.read(prefix)
  else:
    config_file = os.path.join(folder, GOOGLE_CONFIG)
    hidden_size = (BertConfig.from_json_file(config_file, format="google")
                   .hidden_size if present(config_file) else None)
    arrays, family = google_research.to_canonical(tf1.read_arrays(prefix),
                                                  prefix, hidden_size)
  config, _ = google_research.folder_config(folder, GOOGLE_CONFIG, arrays,
                                            family, prefix)
  vocab_file = _vocab_file(folder)
  return (config, arrays, vocab_file,
          albert_casing(_lower_case(folder, fmt), config, vocab_file),
          prefix)


def albert_casing(lower_case, config, vocab_file):
  """`lower_case`, or True for an ALBERT with a SentencePiece model and no
  word on its casing: every public ALBERT lower-cases (google-research's
  do_lower_case; Model Garden's export_tfhub_lib implies it for ALBERT's
  encoders, which record none)."""
  if (lower_case is None and config.family == "albert" and vocab_file
      and vocab_file.endswith(".model")):
    return True
  return lower_case


def _vocab_file(folder) -> Optional[str]:
  """The folder's vocabulary file: vocab.txt (WordPiece), vocab.json with
  merges.txt (byte-level BPE) or spiece.model (SentencePiece), or else its
  one SentencePiece `*.model` (google-research ALBERT's 30k-clean.model);
  None without one."""
  for name in (VOCAB_FILE, "vocab.json", "spiece.model"):
    path = os.path.join(folder, name)
    if present(path):
      return path
  models = sorted(f for f in os.listdir(folder) if f.endswith(".model"))
  if len(models) == 1 and present(os.path.join(folder, models[0])):
    return os.path.join(folder, models[0])
  return None


def _config_file(folder, fmt) -> Optional[str]:
  """The file the config of a checkpoint of format `fmt` comes from."""
  if fmt in ("hf", "keras_hub"):
    return os.path.join(folder, HF_CONFIG)
  if fmt == "tfhub":
    own = os.path.join(folder, "assets", tfhub.OWN_CONFIG)
    return own if present(own) else None      # else inferred from the weights
  google = os.path.join(folder, GOOGLE_CONFIG)
  albert = os.path.join(folder, google_research.ALBERT_CONFIG)
  if fmt in ("tf1", "model_garden") and not present(google):
    # ALBERT's own file, or none (a released ELECTRA: inferred)
    return albert if present(albert) else None
  return google


def check_before_building(folder, fmt, config, arrays, heads, source,
                          discriminator=False):
  """The weights' shapes and dtypes against `config` (`mapping.check_arrays`),
  with the pre-training heads when `heads`, ELECTRA's discriminator head when
  `discriminator` (the other heads' weights are then ignored),
  or for our own format, which has no TF1 names, the number of values the
  config needs against the number stored (`mapping.check_size`) and every
  value readable."""
  config_file = _config_file(folder, fmt)
  if fmt == "tf2":
    prefix = tf2_prefix(folder)
    shapes = _shapes(prefix)
    stored = sum(math.prod(shape) for key, shape in shapes.items()
                 if key.startswith("encoder/"))
    mapping.check_size(config, stored, prefix, config_file)
    # Every value read once (and dropped): a damaged file fails here, not
    # when a model is built from it.
    with tf1.reading(prefix):
      reader = tf.train.load_checkpoint(prefix)
      for key in shapes:
        reader.get_tensor(key)
    return
  mapping.check_arrays(
      mapping.expected_shapes(config, masked_lm=heads,
                              next_sentence=heads and sentence_head(
                                  fmt, config, arrays),
                              discriminator=discriminator),
      arrays, source, ignore_heads=not (heads or discriminator),
      config_file=config_file)


def sentence_head(fmt: str, config: BertConfig, arrays) -> bool:
  """Whether a checkpoint with pre-training heads has a sentence head: BERT's
  next-sentence head always (but TF Hub's `mlm` sub-model has the masked-LM
  head only); ALBERT's sentence-order head when stored (the released
  Hugging Face files lack it); the other families have none."""
  if fmt == "tfhub" or config.sentence_task is None:
    return False
  if config.family == "bert":
    return True
  return arrays is not None and "cls/seq_relationship/output_weights" in arrays


def _read_config(folder, name):
  path = os.path.join(folder, name)
  if not os.path.exists(path):
    raise CheckpointError(f"{path}: config file not found")
  return BertConfig.from_json_file(path)


def check_vocab(vocab_file, config):
  """`check_vocab_size`, a malformed vocab being a CheckpointError too."""
  try:
    return check_vocab_size(vocab_file, config)
  except DataError as e:
    raise CheckpointError(str(e)) from None


def _lower_case(folder, fmt) -> Optional[bool]:
  """From the checkpoint's metadata where known, else None."""
  value = metadata(folder).get("do_lower_case")
  tokenizer_config = os.path.join(folder, "tokenizer_config.json")
  if value is None and present(tokenizer_config):
    value = read_json(tokenizer_config, CheckpointError).get("do_lower_case")
  if value is not None:
    if not isinstance(value, bool):
      raise CheckpointError(f"{folder}: do_lower_case must be true or false, "
                            f"found {value!r}")
    return value
  if fmt in ("tf1", "model_garden"):
    # google-research release folders say it in their name
    # (uncased_L-12_H-768_A-12, cased_L-12_H-768_A-12).
    base = os.path.basename(os.path.normpath(folder)).lower()
    if "uncased" in base:
      return True
    if "cased" in base:
      return False
  return None
