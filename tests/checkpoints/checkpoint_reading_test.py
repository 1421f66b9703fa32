"""Issue 42, finding 8: reading a damaged or hostile checkpoint folder.

Every JSON file of a checkpoint is read by one helper (one line naming the
file, for bad JSON or a wrong top-level type), every stored tensor is
checked for shape and dtype, the config is compared with the tensors before
any variable is built, and a file named inside a checkpoint or export must
be inside its folder (the serving manifest's rule:
tests/serving/serving_manifest_test.py).
"""

import json
import os
import shutil
import time

import h5py
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from bert import BertEncoder, checkpoints
from bert.checkpoints import CheckpointError, CheckpointMismatchError
from bert.checkpoints import loader, mapping
from bert.checkpoints import tf1 as tf1_format
from bert.networks.pretraining_heads import build_pretraining_heads
from bert.validation import ConfigError
from conftest import (one_line, shard_safetensors, small_config, unpack_fixture,
                      write_json)

TINY = dict(vocab_size=30, hidden_size=16, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=16)


def tiny_encoder(seed=0):
  tf.random.set_seed(seed)
  return BertEncoder(small_config(**TINY))


@pytest.fixture
def hf_folder(tmp_path):
  return checkpoints.save(tiny_encoder(), str(tmp_path / "hf"), "hf")


# ------------------------------------------------- JSON, one rule for all
@pytest.mark.parametrize("text,fragment", [
    ("{\"weight_map\": {", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, found an array"),
    ("{\"weight_map\": [\"model.safetensors\"]}", "\"weight_map\" must be"),
    ("\xff{}", "not UTF-8 text"),
])
def test_malformed_safetensors_index_is_one_line_naming_it(hf_folder, text,
                                                           fragment):
  shard_safetensors(hf_folder)
  index = os.path.join(hf_folder, "model.safetensors.index.json")
  with open(index, "w", encoding="latin-1") as f:
    f.write(text)
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(hf_folder)
  one_line(e, index, fragment)


def test_sharded_safetensors_load(hf_folder):
  expected = checkpoints.load(hf_folder).encoder.get_weights()
  shard_safetensors(hf_folder)
  got = checkpoints.load(hf_folder).encoder.get_weights()
  assert all(np.array_equal(a, b) for a, b in zip(expected, got))


def test_shard_holding_other_tensors_than_the_index_says(hf_folder):
  weight_map = shard_safetensors(hf_folder)
  key = next(iter(weight_map))
  weight_map[key] = ("model-00002-of-00002.safetensors"
                     if weight_map[key].startswith("model-00001")
                     else "model-00001-of-00002.safetensors")
  write_json(os.path.join(hf_folder, "model.safetensors.index.json"),
             dict(weight_map=weight_map))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(hf_folder)
  one_line(e, "-of-00002.safetensors", "not the ones", key)


@pytest.mark.parametrize("name,text", [
    ("tokenizer_config.json", "[\"do_lower_case\"]"),
    ("bert_checkpoint.json", "\"just a string\""),
    ("config.json", "{\"vocab_size\": \xff}"),
])
def test_every_json_of_a_checkpoint_is_one_line_naming_it(hf_folder, name,
                                                          text):
  path = os.path.join(hf_folder, name)
  with open(path, "w", encoding="latin-1") as f:
    f.write(text)
  with pytest.raises((CheckpointError, ConfigError)) as e:
    checkpoints.load(hf_folder)
  one_line(e, path)


# ------------------------------------------------- dtype and shape of each
@pytest.mark.parametrize("fmt", ["hf", "tf1"])
def test_tensor_of_the_wrong_dtype_is_refused(tmp_path, fmt):
  folder = checkpoints.save(tiny_encoder(), str(tmp_path / fmt), fmt)
  if fmt == "hf":
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    key = "embeddings.word_embeddings.weight"
    tensors[key] = np.round(tensors[key] * 100).astype(np.int32)
    save_file(tensors, path, metadata={"format": "pt"})
  else:
    prefix = os.path.join(folder, tf1_format.DEFAULT_PREFIX)
    arrays = tf1_format.read_arrays(prefix)
    name = "bert/embeddings/word_embeddings"
    arrays[name] = np.round(arrays[name] * 100).astype(np.int32)
    for f in os.listdir(folder):
      if f.startswith(tf1_format.DEFAULT_PREFIX):
        os.remove(os.path.join(folder, f))
    tf1_format.write_arrays(arrays, prefix)
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(folder)
  one_line(e, folder, "bert/embeddings/word_embeddings",
           "expected floating-point values, found int32")


def test_half_precision_weights_load_as_float32(hf_folder):
  path = os.path.join(hf_folder, "model.safetensors")
  tensors = load_file(path)
  save_file({k: v.astype(np.float16) for k, v in tensors.items()}, path,
            metadata={"format": "pt"})
  weights = checkpoints.load(hf_folder).encoder.weights
  assert all(w.dtype == tf.float32 for w in weights)


@pytest.mark.parametrize("fmt,config_name", [
    ("hf", "config.json"), ("tf1", "bert_config.json"),
    ("model_garden", "bert_config.json"), ("tf2", "bert_config.json")])
def test_config_that_does_not_fit_the_weights_is_refused_before_building(
    tmp_path, monkeypatch, fmt, config_name):
  folder = checkpoints.save(tiny_encoder(), str(tmp_path / fmt), fmt)
  path = os.path.join(folder, config_name)
  with open(path, encoding="utf-8") as f:
    config = json.load(f)
  config["max_position_embeddings"] = 10 ** 12
  write_json(path, config)

  def no_building(*args, **kwargs):
    raise AssertionError("an encoder was built before the config was checked")
  monkeypatch.setattr(loader, "BertEncoder", no_building)
  start = time.time()
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(folder)
  assert time.time() - start < 10
  one_line(e, folder, config_name)
  if fmt != "tf2":     # ours has no TF1 names: the sizes are compared
    one_line(e, "bert/embeddings/position_embeddings",
             "expected shape [1000000000000, 16], found [16, 16]")


def test_layers_the_weights_lack_are_refused_before_building(hf_folder,
                                                             monkeypatch):
  path = os.path.join(hf_folder, "config.json")
  with open(path, encoding="utf-8") as f:
    config = json.load(f)
  config["num_hidden_layers"] = 100_000
  write_json(path, config)
  monkeypatch.setattr(loader, "BertEncoder", None)
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(hf_folder)
  one_line(e, "missing variable(s): bert/encoder/layer_2/")


@pytest.mark.parametrize("overrides,heads", [
    ({}, False), ({}, True), (dict(embedding_size=8), True),
    (dict(norm_first=True, num_hidden_layers=3), False)])
def test_expected_shapes_are_the_built_model_shapes(overrides, heads):
  config = small_config(**dict(TINY, **overrides))
  encoder = BertEncoder(config)
  masked_lm = next_sentence = None
  if heads:
    masked_lm, next_sentence = build_pretraining_heads(encoder)
  built = {s.name: s.expected_shape()
           for s in mapping.weight_specs(encoder, masked_lm, next_sentence)}
  assert mapping.expected_shapes(config, heads, heads) == built
  stored = sum(v.size for v in mapping.to_tf1(encoder).values())
  assert stored == sum(np.prod(w.shape) for w in encoder.weights)


# ---------------------------------------------------------------- KerasHub
def test_keras_hub_h5_of_an_unexpected_layout(tmp_path):
  folder = unpack_fixture("keras_hub_preset", tmp_path)
  weights = os.path.join(folder, "model.weights.h5")
  with h5py.File(weights, "a") as f:
    del f["layers/transformer_encoder/vars"]     # the block's own name
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(folder)
  one_line(e, weights, "unexpected variable(s): keras_hub/layers/"
           "transformer_encoder/")


def test_keras_hub_h5_with_a_shape_beyond_the_file(tmp_path):
  folder = unpack_fixture("keras_hub_preset", tmp_path)
  weights = os.path.join(folder, "model.weights.h5")
  with h5py.File(weights, "a") as f:
    f.create_dataset("layers/extra/vars/0", shape=(1 << 20, 1 << 20),
                     dtype="float32")        # declared, never written
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, weights, "more than the file's")


# ------------------------------------------- files named inside a folder
@pytest.mark.parametrize("outside", ["../elsewhere.safetensors", "ABSOLUTE"])
def test_safetensors_index_naming_a_file_outside_the_folder(hf_folder,
                                                            outside):
  elsewhere = os.path.join(os.path.dirname(hf_folder), "elsewhere.safetensors")
  os.rename(os.path.join(hf_folder, "model.safetensors"), elsewhere)
  name = elsewhere if outside == "ABSOLUTE" else outside
  tensors = load_file(elsewhere)
  index = os.path.join(hf_folder, "model.safetensors.index.json")
  write_json(index, dict(weight_map={k: name for k in tensors}))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(hf_folder)
  one_line(e, index, "outside", "must be inside its folder")


def test_keras_hub_tokenizer_naming_a_vocabulary_outside(tmp_path):
  folder = unpack_fixture("keras_hub_preset", tmp_path)
  # A vocabulary of the right size outside the preset, where the
  # tokenizer's config_file leads.
  stolen = tmp_path / "stolen"
  stolen.mkdir()
  shutil.copy(os.path.join(folder, "assets", "tokenizer", "vocabulary.txt"),
              stolen / "vocabulary.txt")
  path = os.path.join(folder, "tokenizer.json")
  with open(path, encoding="utf-8") as f:
    tokenizer = json.load(f)
  tokenizer["config"]["config_file"] = "../../stolen.json"
  write_json(path, tokenizer)
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, path, "outside", "must be inside its folder")


def test_tf2_metadata_naming_a_checkpoint_outside(tmp_path):
  other = checkpoints.save(tiny_encoder(seed=1), str(tmp_path / "other"))
  folder = checkpoints.save(tiny_encoder(), str(tmp_path / "mine"))
  path = os.path.join(folder, "bert_checkpoint.json")
  with open(path, encoding="utf-8") as f:
    meta = json.load(f)
  meta["checkpoint"] = os.path.join("..", os.path.basename(other), "ckpt")
  write_json(path, meta)
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, path, "outside")


def test_tf1_state_file_naming_a_checkpoint_outside_is_not_followed(tmp_path):
  """TF1's `checkpoint` file is a hint (it holds absolute paths that go
  stale): a prefix outside the folder is never read; the folder's own
  checkpoint is."""
  mine, theirs = tiny_encoder(seed=0), tiny_encoder(seed=1)
  folders = {}
  for name, encoder in (("mine", mine), ("theirs", theirs)):
    folder = checkpoints.save(encoder, str(tmp_path / name), "tf1")
    for f in os.listdir(folder):   # a prefix other than bert_model.ckpt
      if f.startswith(tf1_format.DEFAULT_PREFIX):
        os.rename(os.path.join(folder, f), os.path.join(
            folder, f.replace(tf1_format.DEFAULT_PREFIX, "model.ckpt-7")))
    folders[name] = folder
  with open(os.path.join(folders["mine"], "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "../theirs/model.ckpt-7"\n')
  loaded = checkpoints.load(folders["mine"]).encoder.get_weights()
  assert all(np.array_equal(a, b) for a, b in zip(loaded, mine.get_weights()))


def test_object_graph_with_exponentially_many_paths_ends_in_one_line(
    tmp_path):
  """A crafted Model Garden checkpoint whose object graph reaches each node
  in three ways, 16 deep (3**16 paths): refused after a bounded walk."""
  from tensorflow.core.protobuf import trackable_object_graph_pb2
  import corruption
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  depth = 16
  for i in range(depth + 1):
    node = graph.nodes.add()
    if i < depth:
      for name in ("a", "b", "c"):
        node.children.add(node_id=i + 1, local_name=name)
  key = "encoder/_transformer_layers/0/kernel/.ATTRIBUTES/VARIABLE_VALUE"
  graph.nodes[depth].attributes.add(name="VARIABLE_VALUE", checkpoint_key=key)
  folder = tmp_path / "crafted"
  folder.mkdir()
  small_config(**TINY).to_json_file(str(folder / "bert_config.json"))
  tf.raw_ops.SaveV2(
      prefix=str(folder / "bert_model.ckpt"),
      tensor_names=["_CHECKPOINTABLE_OBJECT_GRAPH", key],
      shape_and_slices=["", ""],
      tensors=[tf.constant(graph.SerializeToString()), tf.zeros([2])])
  error = corruption.check_reader(checkpoints.load, str(folder), "crafted")
  assert isinstance(error, CheckpointError), error
  assert "object graph has more than" in str(error)
