"""Issue 42, acceptance 2: damaged checkpoints and serving exports.

Each format's folder is written by the library's own writers from a tiny
model (TF1, Model Garden TF2, ours, Hugging Face safetensors plain and
sharded), or is a real fixture made by the other ecosystem (a TF Hub
SavedModel from Model Garden's export library, a KerasHub preset from
keras_hub: tests/fixtures/hub). Seeded truncations and byte flips of each of
its files (`tests/corruption.py`) are loaded; every outcome must be a load
or a one-line library error naming the folder or the damaged file, never
another exception type or a hang. Default tier: 50 cases per format; slow
tier: 500.
"""

import json
import os
import shutil

import pytest
import tensorflow as tf
import tf_keras

import corruption
from bert import BertEncoder, checkpoints
from bert.networks.pretraining_heads import build_pretraining_heads
from bert.serving import loader as serving_loader
from conftest import shard_safetensors, small_config, unpack_fixture

TINY = dict(vocab_size=12, hidden_size=8, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=16,
            max_position_embeddings=8)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat",
         "dog", "sat", "on", "##s"]
DEFAULT, SLOW = corruption.FUZZ_CASES

# format -> the files whose damaged copies are loaded (relative paths).
FORMATS = {
    "tf1": ["bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001",
            "bert_config.json", "bert_checkpoint.json", "vocab.txt"],
    "model_garden": ["bert_model.ckpt.index",
                     "bert_model.ckpt.data-00000-of-00001", "bert_config.json"],
    "tf2": ["ckpt.index", "ckpt.data-00000-of-00001", "bert_config.json",
            "bert_checkpoint.json"],
    "hf": ["model.safetensors", "config.json", "tokenizer_config.json"],
    "hf_sharded": ["model.safetensors.index.json",
                   "model-00001-of-00002.safetensors",
                   "model-00002-of-00002.safetensors"],
    "tfhub": ["saved_model.pb", "variables/variables.index",
              "variables/variables.data-00000-of-00001"],
    "keras_hub": ["model.weights.h5", "config.json", "tokenizer.json"],
    "serving": ["assets.extra/serving.json"],
}


def _write_vocab(folder):
  path = os.path.join(folder, "vocab_source.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(VOCAB) + "\n")
  return path


def _pretrainer_checkpoint():
  tf.random.set_seed(0)
  encoder = BertEncoder(small_config(**TINY))
  masked_lm, next_sentence = build_pretraining_heads(encoder)
  return checkpoints.BertCheckpoint(config=encoder.config, encoder=encoder,
                                    masked_lm=masked_lm,
                                    next_sentence=next_sentence)


def _serving_export(path):
  """A SavedModel with a `serving_default` on strings and the manifest an
  fp32 `bert.export` writes (the loader's part; a BERT export's graph would
  take minutes to write)."""
  module = tf.Module()
  module.serve = tf.function(
      lambda text: {"label": tf.strings.length(text)},
      input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  tf.saved_model.save(module, path,
                      signatures={"serving_default": module.serve})
  os.makedirs(os.path.join(path, "assets.extra"))
  with open(os.path.join(path, serving_loader.MANIFEST), "w") as f:
    json.dump(dict(format=serving_loader.MANIFEST_FORMAT, kind="classifier",
                   requested_precision="fp32", string_inputs=["text"],
                   buckets=[16, 32], precision="fp32",
                   runtime="saved_model"), f, indent=2)


def _make(fmt, root):
  """The pristine folder of `fmt` under `root`."""
  folder = os.path.join(root, f"{fmt}-pristine")
  if fmt in ("tfhub", "keras_hub"):
    name = "tfhub_encoder" if fmt == "tfhub" else "keras_hub_preset"
    os.rename(unpack_fixture(name, root), folder)
  elif fmt == "serving":
    _serving_export(folder)
  else:
    write_as = "hf" if fmt == "hf_sharded" else fmt
    checkpoints.save(_pretrainer_checkpoint(), folder, write_as,
                     vocab_file=_write_vocab(root), lower_case=True)
    if fmt == "hf_sharded":
      shard_safetensors(folder)
  return folder


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("pristine"))
  return {fmt: _make(fmt, root) for fmt in FORMATS}


def _load(fmt):
  if fmt == "serving":
    return serving_loader.load_serving
  return lambda folder: checkpoints.load(folder, with_heads=True)


def _cases(folder, fmt, start, stop):
  """Cases [start, stop) of the format: the damaged copies of its files,
  taken in turn (file 1 case 1, file 2 case 1, ...)."""
  files = FORMATS[fmt]
  per_file = -(-SLOW // len(files))
  blobs = {}
  for name in files:
    with open(os.path.join(folder, name), "rb") as f:
      blobs[name] = corruption.corrupt_cases(f.read(), per_file, seed=42)
  cases = [(name, label, blob) for i in range(per_file) for name in files
           if i < len(blobs[name]) for label, blob in [blobs[name][i]]]
  return cases[start:stop]


def _fuzz(pristine, tmp_path, fmt, start, stop):
  load = _load(fmt)
  assert load(pristine[fmt]) is not None     # the undamaged folder loads
  outcomes = {}
  for number, (name, label, blob) in enumerate(
      _cases(pristine[fmt], fmt, start, stop)):
    folder = str(tmp_path / f"{fmt}-case{start + number}")
    shutil.copytree(pristine[fmt], folder)
    damaged = os.path.join(folder, name)
    with open(damaged, "wb") as f:
      f.write(blob)
    outcome = corruption.check_reader(load, folder, f"{fmt} {name} {label}",
                                      names=[damaged])
    key = "ok" if outcome == "ok" else type(outcome).__name__
    outcomes[key] = outcomes.get(key, 0) + 1
    shutil.rmtree(folder)
    if number % 50 == 49:
      tf_keras.backend.clear_session()
  assert sum(outcomes.values()) == stop - start, outcomes
  print(fmt, outcomes)      # shown with -s: how many loaded, how many refused
  return outcomes


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_damaged_checkpoint_loads_or_is_one_line_naming_it(pristine,
                                                           tmp_path, fmt):
  _fuzz(pristine, tmp_path, fmt, 0, DEFAULT)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_damaged_checkpoint_loads_or_is_one_line_naming_it_slow(
    pristine, tmp_path, fmt):
  _fuzz(pristine, tmp_path, fmt, DEFAULT, SLOW)
