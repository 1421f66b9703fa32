"""`BertTextEmbedder` against sentence-transformers (the reference): the
real all-MiniLM-L6-v2 folder, and a tiny folder sentence-transformers itself
writes with CLS + max pooling, a Dense layer, Normalize and prompts."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert.checkpoints.errors import CheckpointError
from bert.data.errors import DataError
from bert.layers import SentencePooling
from bert.models import BertTextEmbedder
from bert.testing import minilm_dir, shared_texts
from bert.validation import ConfigError
from tests.conftest import max_abs_diff, one_line


def _cosines(a, b):
  return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.fixture(scope="module")
def minilm():
  return BertTextEmbedder.from_pretrained(minilm_dir())


@pytest.fixture(scope="module")
def reference():
  from sentence_transformers import SentenceTransformer  # pylint: disable=g-import-not-at-top
  return SentenceTransformer(minilm_dir(), device="cpu")


def test_minilm_reads_its_folder(minilm):
  # modules.json: Transformer -> Pooling(mean) -> Normalize;
  # sentence_bert_config.json: max_seq_length 256.
  assert minilm.pooling == ["mean"] and minilm.normalize and not minilm.dense
  assert minilm.dim == 384 and minilm.preprocessor.seq_length == 256


def test_encode_equals_sentence_transformers(minilm, reference):
  # Real texts of many lengths, some past 256 word pieces (truncated alike),
  # in an order that is not by length: rows come back in input order.
  texts = shared_texts()
  rng = np.random.RandomState(0)
  picked = [texts[i] for i in rng.choice(len(texts), 48, replace=False)]
  picked += [" ".join(texts[:40])]          # one text far past 256 pieces
  ours = minilm.encode(picked, batch_size=16)
  theirs = reference.encode(picked, batch_size=16)
  assert ours.shape == (49, 384) and ours.dtype == np.float32
  assert max_abs_diff(ours, theirs) <= 1e-5
  assert _cosines(ours, theirs).min() >= 0.99999
  # Negative control: a shuffled pairing is far off.
  assert max_abs_diff(ours, theirs[::-1]) > 0.1


def _pooling_reference(x, mask, modes):
  out = []
  m = mask[:, :, None].astype(np.float32)
  n = np.maximum(m.sum(1), 1e-9)
  for mode in modes:
    if mode == "cls":
      out.append(x[:, 0])
    elif mode == "max":
      out.append(np.where(m > 0, x, -np.inf).max(1))
    elif mode == "mean":
      out.append((x * m).sum(1) / n)
    elif mode == "mean_sqrt_len":
      out.append((x * m).sum(1) / np.sqrt(n))
    elif mode == "weighted_mean":
      w = m * np.arange(1, x.shape[1] + 1)[None, :, None]
      out.append((x * w).sum(1) / w.sum(1))
    else:
      out.append(x[np.arange(len(x)), mask.sum(1) - 1])
  return np.concatenate(out, -1)


@pytest.mark.parametrize("modes", [("mean",), ("cls",), ("max",),
                                   ("mean_sqrt_len",), ("weighted_mean",),
                                   ("last",), ("cls", "max", "mean")])
def test_pooling_modes(modes):
  rng = np.random.RandomState(1)
  x = rng.randn(3, 7, 5).astype(np.float32)
  mask = np.zeros([3, 7], np.int32)
  for i, n in enumerate([7, 4, 1]):
    mask[i, :n] = 1
  got = SentencePooling(modes)(tf.constant(x), tf.constant(mask)).numpy()
  np.testing.assert_allclose(got, _pooling_reference(x, mask, modes),
                             rtol=1e-6, atol=1e-6)
  # Padding never counts: changing padded positions changes nothing.
  x2 = np.where(mask[:, :, None] > 0, x, 1e3).astype(np.float32)
  np.testing.assert_allclose(
      SentencePooling(modes)(tf.constant(x2), tf.constant(mask)).numpy(), got,
      rtol=1e-6, atol=1e-6)


def _tiny_st_folder(path):
  """A sentence-transformers folder written by sentence-transformers: a
  random 2-layer BERT on MiniLM's vocabulary, CLS + max pooling, a Dense
  layer (tanh) to 16 dims, Normalize, and query/document prompts."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from sentence_transformers import SentenceTransformer  # pylint: disable=g-import-not-at-top
  from sentence_transformers.sentence_transformer import modules  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  hf = os.path.join(path, "hf")
  config = transformers.BertConfig(
      vocab_size=30522, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
  transformers.BertModel(config).save_pretrained(hf)
  transformers.BertTokenizerFast(os.path.join(minilm_dir(), "vocab.txt"),
                                 do_lower_case=True).save_pretrained(hf)
  transformer = modules.Transformer(hf, max_seq_length=48)
  pooling = modules.Pooling(32, pooling_mode=("cls", "max"))
  dense = modules.Dense(64, 16)
  model = SentenceTransformer(
      modules=[transformer, pooling, dense, modules.Normalize()], device="cpu",
      prompts={"query": "query: ", "document": "passage: "})
  folder = os.path.join(path, "st")
  model.save(folder)
  return folder, model


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
  return _tiny_st_folder(str(tmp_path_factory.mktemp("tiny_st")))


def test_folder_written_by_sentence_transformers(tiny_st):
  folder, reference = tiny_st
  model = BertTextEmbedder.from_pretrained(folder)
  assert model.pooling == ["cls", "max"] and model.dim == 16
  assert model.normalize and model.preprocessor.seq_length == 48
  texts = shared_texts()[:30] + ["short", " ".join(shared_texts()[:10])]
  assert max_abs_diff(model.encode(texts), reference.encode(texts)) <= 1e-5
  # The prompts: encode_queries / encode_documents as encode_query /
  # encode_document; without a prompt the vectors differ (control).
  q = model.encode_queries(texts[:5])
  assert max_abs_diff(q, reference.encode_query(texts[:5])) <= 1e-5
  d = model.encode_documents(texts[:5])
  assert max_abs_diff(d, reference.encode_document(texts[:5])) <= 1e-5
  assert max_abs_diff(q, model.encode(texts[:5])) > 1e-3


def test_saved_and_loaded_embedder_encodes_alike(tiny_st, tmp_path):
  model = BertTextEmbedder.from_pretrained(tiny_st[0])
  path = str(tmp_path / "embedder.keras")
  model.save(path)
  loaded = tf_keras.models.load_model(path)
  texts = ["a first text", "and a second, longer one than the first"]
  assert max_abs_diff(loaded.encode(texts), model.encode(texts)) <= 1e-6
  assert loaded.preprocessor.prompts == model.preprocessor.prompts


def test_a_folder_without_pooling_needs_the_argument(tmp_path):
  folder = str(tmp_path / "plain")
  shutil.copytree(minilm_dir(), folder)
  os.remove(os.path.join(folder, "modules.json"))
  with pytest.raises(ConfigError) as e:
    BertTextEmbedder.from_pretrained(folder)
  one_line(e, "pooling='mean'")
  model = BertTextEmbedder.from_pretrained(folder, pooling="cls",
                                           seq_length=32)
  assert model.pooling == ["cls"] and not model.normalize


def test_bad_layouts_are_one_line(tmp_path):
  folder = str(tmp_path / "bad")
  shutil.copytree(minilm_dir(), folder)
  pooling = os.path.join(folder, "1_Pooling", "config.json")
  with open(pooling, "w") as f:
    json.dump({"pooling_mode": "median"}, f)
  with pytest.raises(CheckpointError) as e:
    BertTextEmbedder.from_pretrained(folder)
  one_line(e, pooling, "median")
  with open(os.path.join(folder, "modules.json"), "w") as f:
    f.write("[{\"type\": \"x.Transformer\", \"path\": \"../..\"}]")
  with pytest.raises(CheckpointError) as e:
    BertTextEmbedder.from_pretrained(folder)
  one_line(e, "modules.json", "outside")


@pytest.mark.parametrize("texts,fragment", [
    ([], "x is empty"), (None, "x is None"), ("one text", "one string"),
    (["ok", None], "x[1]"), (["ok", 3], "x[1]")])
def test_bad_texts_are_one_line(minilm, texts, fragment):
  with pytest.raises((DataError, TypeError)) as e:
    minilm.encode(texts)
  one_line(e, fragment)


def test_mismatched_columns_are_one_line(minilm):
  with pytest.raises(DataError) as e:
    minilm.evaluate((["a", "b"], ["c"]), [0.5, 0.2])
  one_line(e, "x[1]")
  with pytest.raises(DataError) as e:
    minilm.evaluate((["a", "b"], ["c", "d"]), [0.5])
  one_line(e, "y: 1 scores", "2 pairs")


def test_bf16_encode_agrees_with_fp32(minilm):
  # precision="auto" picks bf16 on a CPU with AVX512_BF16/AMX; bf16 is
  # asked for here, so the check runs on every CPU (slowly where emulated).
  texts = shared_texts()[:24]
  bf16 = BertTextEmbedder.from_pretrained(minilm_dir(), precision="bf16")
  assert bf16.compute_dtype == "bfloat16"
  ours, full = bf16.encode(texts), minilm.encode(texts)
  assert ours.dtype == np.float32
  assert _cosines(ours, full).min() >= 0.999
  assert max_abs_diff(ours, full) > 1e-6     # it did compute in bf16
