"""TF Hub SavedModels and KerasHub presets, read by name: parity with the
original objects and bad input. Fixtures: tests/fixtures/hub (made by Model
Garden's own export library and by keras_hub itself; make_fixtures.py)."""

import os
import shutil
import subprocess
import sys
import tarfile

import h5py
import numpy as np
import pytest
import tensorflow as tf

from bert import checkpoints
from bert.checkpoints import CheckpointError, CheckpointMismatchError
from conftest import FIXTURES, max_abs_diff, one_line, unpack_fixture

TOKEN_IDS = np.array([[2, 7, 9, 10, 5, 11, 3, 8, 12, 3, 0, 0],
                      [2, 18, 19, 3, 0, 0, 0, 0, 0, 0, 0, 0]], np.int32)
SEGMENT_IDS = np.array([[0] * 7 + [1] * 3 + [0] * 2, [0] * 12], np.int32)
INPUTS = dict(input_word_ids=TOKEN_IDS, input_mask=(TOKEN_IDS > 0).astype(np.int32),
              input_type_ids=SEGMENT_IDS)
TOL = 1e-5


def test_fixtures_are_small():
  total = sum(os.path.getsize(os.path.join(FIXTURES, f))
              for f in os.listdir(FIXTURES))
  assert total < 2_000_000, total


@pytest.mark.parametrize("name", ["tfhub_encoder", "tfhub_encoder_mlm"])
def test_tfhub_encoder_matches_the_saved_model(tmp_path, name):
  folder = unpack_fixture(name, tmp_path)
  assert checkpoints.detect_format(folder) == "tfhub"
  ours = checkpoints.load(folder, with_heads=True)
  c = ours.config
  assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
          c.intermediate_size, c.max_position_embeddings, c.type_vocab_size) == (
              38, 16, 2, 2, 32, 32, 2)
  assert c.hidden_act == "gelu"       # Model Garden's "gelu": the tanh form
  assert ours.lower_case is True
  assert ours.vocab_file == os.path.join(folder, "assets", "vocab.txt")
  assert ours.ignored_variables == []
  # The reference: the SavedModel itself, called as TF Hub users call it.
  hub = tf.saved_model.load(folder)
  expected = hub(INPUTS, training=False)
  got = ours.encoder(INPUTS, training=False)
  for key in ("sequence_output", "pooled_output"):
    assert max_abs_diff(got[key], expected[key]) <= TOL, key
  assert len(got["encoder_outputs"]) == len(expected["encoder_outputs"]) == 2
  for mine, theirs in zip(got["encoder_outputs"], expected["encoder_outputs"]):
    assert max_abs_diff(mine, theirs) <= TOL
  if name == "tfhub_encoder_mlm":
    positions = np.array([[1, 8], [2, 1]], np.int32)
    mlm = hub.mlm(dict(**INPUTS, masked_lm_positions=positions), training=False)
    assert ours.masked_lm is not None and ours.next_sentence is None
    logits = ours.masked_lm(got["sequence_output"], positions)
    assert max_abs_diff(logits, mlm["mlm_logits"]) <= TOL
  else:
    assert ours.masked_lm is None
  # Negative control: the two blocks' weights swapped miss the bound.
  first, second = ours.encoder.transformer_layers
  saved = first.get_weights()
  first.set_weights(second.get_weights())
  second.set_weights(saved)
  assert max_abs_diff(ours.encoder(INPUTS)["sequence_output"],
                      expected["sequence_output"]) > 1e-3


def test_tfhub_vocab_and_casing_from_a_preprocessor(tmp_path):
  folder = unpack_fixture("tfhub_encoder", tmp_path)
  preprocess = unpack_fixture("tfhub_preprocess", tmp_path)
  shutil.rmtree(os.path.join(folder, "assets"))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, os.path.join(folder, "assets"), "preprocessing")
  ours = checkpoints.load(folder, preprocessing=preprocess)
  assert ours.vocab_file == os.path.join(preprocess, "assets", "vocab.txt")
  assert ours.lower_case is True    # the encoder's variable and the graph agree
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(unpack_fixture("keras_hub_preset", tmp_path),
                     preprocessing=preprocess)
  one_line(e, "preprocessing= is for TF Hub SavedModels")


def test_keras_hub_preset_matches_keras_hub(tmp_path):
  folder = unpack_fixture("keras_hub_preset", tmp_path)
  assert checkpoints.detect_format(folder) == "keras_hub"
  ours = checkpoints.load(folder)
  assert ours.config.hidden_act == "gelu" and ours.config.num_attention_heads == 2
  assert ours.lower_case is True
  assert ours.vocab_file == os.path.join(folder, "assets", "tokenizer", "vocabulary.txt")
  assert ours.ignored_variables == []
  # The reference: keras_hub's own outputs, computed in its Keras 3 venv.
  ref = np.load(os.path.join(folder, "keras_hub_outputs.npz"))
  inputs = dict(input_word_ids=ref["token_ids"], input_mask=ref["padding_mask"],
                input_type_ids=ref["segment_ids"])
  assert inputs["input_mask"].min() == 0 and inputs["input_type_ids"].max() == 1
  got = ours.encoder(inputs, training=False)
  assert max_abs_diff(got["sequence_output"], ref["sequence_output"]) <= TOL
  assert max_abs_diff(got["pooled_output"], ref["pooled_output"]) <= TOL
  for i, layer in enumerate(got["encoder_outputs"]):
    assert max_abs_diff(layer, ref[f"layer_{i}"]) <= TOL, i
  # A task model from the preset, with the preset's own tokenizer.
  from bert.models import BertClassifier
  model = BertClassifier.from_pretrained(folder, num_classes=2, seq_length=16)
  encoded = model.preprocessor(tf.constant(["The CAT sat."]))
  assert encoded["input_word_ids"].numpy()[0, :6].tolist() == [2, 5, 7, 9, 33, 3]


# ------------------------------------------------------------- bad input
def test_saved_model_that_is_not_a_bert_encoder(tmp_path):
  module = tf.Module()
  module.v = tf.Variable(tf.zeros([3, 4]))
  module.f = tf.function(lambda x: x * 2.0, input_signature=[tf.TensorSpec([None])])
  tf.saved_model.save(module, str(tmp_path / "other"))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(str(tmp_path / "other"))
  one_line(e, str(tmp_path / "other"), "not a BERT encoder")


def test_hub_formats_are_read_only(tmp_path):
  ours = checkpoints.load(unpack_fixture("keras_hub_preset", tmp_path))
  for fmt, hint in (("tfhub", "bert-export --kind=encoder"),
                    ("keras_hub", "from_preset")):
    with pytest.raises(CheckpointError) as e:
      checkpoints.save(ours, str(tmp_path / fmt), format=fmt)
    one_line(e, f"cannot write format '{fmt}'", hint)
    assert not os.path.exists(tmp_path / fmt)


def test_keras_hub_preset_with_a_missing_weight(tmp_path):
  folder = unpack_fixture("keras_hub_preset", tmp_path)
  with h5py.File(os.path.join(folder, "model.weights.h5"), "a") as f:
    del f["layers/transformer_encoder_1/_feedforward_output_dense/vars/1"]
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(folder)
  one_line(e, "model.weights.h5", "missing variable(s): "
           "bert/encoder/layer_1/output/dense/bias")


@pytest.mark.parametrize("name,vocab", [
    ("tfhub_encoder", os.path.join("assets", "vocab.txt")),
    ("keras_hub_preset", os.path.join("assets", "tokenizer", "vocabulary.txt"))])
def test_vocab_of_the_wrong_size(tmp_path, name, vocab):
  folder = unpack_fixture(name, tmp_path)
  with open(os.path.join(folder, vocab), "a", encoding="utf-8") as f:
    f.write("extra\n")
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, os.path.join(folder, vocab), "39", "38")


def test_convert_cli_reads_both(tmp_path):
  """`bert-convert` on a KerasHub preset (one CLI run: the TF Hub reader goes
  through the same `load`/`save` in process) writes Model Garden checkpoints
  that compute what the sources compute."""
  exe = os.path.join(os.path.dirname(sys.executable), "bert-convert")
  for name in ("tfhub_encoder_mlm", "keras_hub_preset"):
    src = unpack_fixture(name, tmp_path)
    out = str(tmp_path / f"{name}_mg")
    if name == "keras_hub_preset":
      result = subprocess.run([exe, f"--input={src}", f"--output={out}",
                               "--to=model_garden"], capture_output=True,
                              text=True, timeout=300, check=False)
      assert result.returncode == 0, result.stderr[-2000:]
    else:
      checkpoints.save(checkpoints.load(src), out, format="model_garden")
    back = checkpoints.load(out)
    assert back.format == "model_garden" and back.lower_case is True
    original = checkpoints.load(src)
    np.testing.assert_array_equal(
        back.encoder(INPUTS)["sequence_output"],
        original.encoder(INPUTS)["sequence_output"])


def test_our_encoder_export_reads_back(tmp_path):
  """`bert-export --kind=encoder` writes the TF Hub interface with the vocab,
  casing and config as assets; the loader reads it back exactly, head too.
  A factorised embedding (ALBERT-style projection) covers the most names; the
  plain layout is read back in tests/checkpoints and the TF Hub fixtures."""
  from bert import BertConfig, BertEncoder
  from bert.export import export_encoder
  config = BertConfig(vocab_size=38, hidden_size=16, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=32,
                      max_position_embeddings=32, hidden_act="gelu_exact",
                      embedding_size=8)
  encoder = BertEncoder(config)
  masked_lm, _ = checkpoints.build_pretraining_heads(encoder)
  rng = np.random.RandomState(7)
  for w in encoder.weights + masked_lm.weights:
    w.assign(0.1 * rng.randn(*w.shape) + (1.0 if "gamma" in w.name else 0.0))
  vocab = str(tmp_path / "vocab.txt")
  with tarfile.open(os.path.join(FIXTURES, "tfhub_encoder.tar.xz")) as tar:
    member = tar.extractfile("tfhub_encoder/assets/vocab.txt")
    with open(vocab, "wb") as f:
      f.write(member.read())
  export_encoder(encoder, str(tmp_path / "export"), masked_lm=masked_lm,
                 vocab_file=vocab, lower_case=False)
  back = checkpoints.load(str(tmp_path / "export"), with_heads=True)
  assert back.format == "tfhub" and back.config == config
  assert back.lower_case is False
  assert os.path.basename(back.vocab_file) == "vocab.txt"
  positions = np.array([[1, 8], [2, 1]], np.int32)
  want, got = encoder(INPUTS), back.encoder(INPUTS)
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_array_equal(got[key], want[key])
  np.testing.assert_array_equal(
      back.masked_lm(got["sequence_output"], positions),
      masked_lm(want["sequence_output"], positions))


@pytest.mark.parametrize("name,tf1_name", [
    ("transformer/layer_3/self_attention/query/kernel",
     "bert/encoder/layer_3/attention/self/query/kernel"),
    # The 2020 TF Hub releases (bert_en_uncased_L-12_H-768_A-12/1).
    ("bert_model/encoder/layer_0/self_attention/key/bias",
     "bert/encoder/layer_0/attention/self/key/bias"),
    ("bert_model/pooler_transform/kernel", "bert/pooler/dense/kernel"),
    # EncoderScaffold: blocks transformer, transformer_1, ...
    ("transformer/output_layer_norm/gamma", "bert/encoder/layer_0/output/LayerNorm/gamma"),
    ("transformer_2/intermediate/bias", "bert/encoder/layer_2/intermediate/dense/bias"),
    ("bert_encoder_v2/word_embeddings/embeddings", "bert/embeddings/word_embeddings"),
    ("bert/cls/predictions/output_bias/bias", "cls/predictions/output_bias"),
    ("bert/cls/predictions/transform/LayerNorm/beta",
     "cls/predictions/transform/LayerNorm/beta"),
    ("some_other/variable", None)])
def test_tfhub_variable_names(name, tf1_name):
  from bert.checkpoints import tfhub
  assert tfhub._tf1_name(name) == tf1_name  # pylint: disable=protected-access
