"""Real weights: all-MiniLM-L6-v2 loaded by us vs Hugging Face transformers."""

import csv
import os

import numpy as np
import pytest
import torch
import transformers

from bert import checkpoints
from conftest import max_abs_diff, minilm_dir, shared_data


def real_texts():
  """8 single sentences (SST-2 dev) and 8 pairs (MRPC dev), real data."""
  with open(shared_data("glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
  singles = [r[0] for r in rows[:8]]
  with open(shared_data("glue", "MRPC", "dev.tsv"), encoding="utf-8-sig") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
  pairs = [(r[3], r[4]) for r in rows[:8]]
  return singles, pairs


@pytest.fixture(scope="module")
def minilm():
  return checkpoints.load(minilm_dir())


@pytest.fixture(scope="module")
def hf_model():
  return transformers.BertModel.from_pretrained(minilm_dir()).eval()


def encode(tokenizer, texts):
  if isinstance(texts[0], tuple):
    enc = tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True,
                    return_tensors="np")
  else:
    enc = tokenizer(texts, padding=True, return_tensors="np")
  return dict(input_word_ids=enc["input_ids"].astype(np.int32),
              input_mask=enc["attention_mask"].astype(np.int32),
              input_type_ids=enc["token_type_ids"].astype(np.int32))


def hf_outputs(model, inputs):
  with torch.no_grad():
    out = model(input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
                attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long))
  return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def test_minilm_metadata(minilm):
  assert minilm.format == "hf"
  assert minilm.lower_case is True
  assert os.path.basename(minilm.vocab_file) == "vocab.txt"
  assert minilm.config.hidden_act == "gelu_exact"
  assert minilm.ignored_variables == []


def test_minilm_matches_transformers(minilm, hf_model):
  tokenizer = transformers.BertTokenizerFast(minilm.vocab_file, do_lower_case=True)
  singles, pairs = real_texts()
  for texts in (singles, pairs):
    inputs = encode(tokenizer, texts)
    assert inputs["input_mask"].min() == 0      # the batch has padding
    if texts is pairs:
      assert inputs["input_type_ids"].max() == 1
    seq, pooled = hf_outputs(hf_model, inputs)
    ours = minilm.encoder(inputs, training=False)
    mask = inputs["input_mask"].astype(bool)
    assert max_abs_diff(ours["sequence_output"].numpy()[mask], seq[mask]) <= 1e-4
    assert max_abs_diff(ours["pooled_output"], pooled) <= 1e-4


def test_tanh_gelu_would_not_match(minilm, hf_model):
  """The exact-vs-tanh GELU reading matters at this tolerance: the check
  can fail."""
  from bert import BertConfig, BertEncoder
  config = BertConfig(**{**minilm.config.to_dict(), "hidden_act": "gelu"})
  wrong = BertEncoder(config)
  wrong.set_weights(minilm.encoder.get_weights())
  tokenizer = transformers.BertTokenizerFast(minilm.vocab_file, do_lower_case=True)
  inputs = encode(tokenizer, real_texts()[0])
  seq, _ = hf_outputs(hf_model, inputs)
  mask = inputs["input_mask"].astype(bool)
  assert max_abs_diff(wrong(inputs)["sequence_output"].numpy()[mask], seq[mask]) > 1e-4


def test_minilm_to_model_garden_restored_by_tfm_matches_transformers(
    minilm, hf_model, tmp_path):
  """MiniLM -> Model Garden TF2 checkpoint written here -> restored by
  Model Garden's own `tfm.nlp.networks.BertEncoder` -> Hugging Face's
  outputs on the real sentences and pairs."""
  import tensorflow as tf
  import tensorflow_models as tfm
  checkpoints.save(minilm, str(tmp_path / "mg"), format="model_garden")
  c = minilm.config
  theirs = tfm.nlp.networks.BertEncoder(
      vocab_size=c.vocab_size, hidden_size=c.hidden_size,
      num_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
      max_sequence_length=c.max_position_embeddings,
      type_vocab_size=c.type_vocab_size, inner_dim=c.intermediate_size,
      # MiniLM's GELU is the erf form ("gelu_exact" in its bert_config.json).
      inner_activation=lambda x: tf.nn.gelu(x, approximate=False),
      dict_outputs=True)
  status = tf.train.Checkpoint(encoder=theirs).read(
      str(tmp_path / "mg" / "bert_model.ckpt"))
  status.assert_consumed()            # every saved value used, every weight set
  tokenizer = transformers.BertTokenizerFast(minilm.vocab_file, do_lower_case=True)
  for texts in real_texts():
    inputs = encode(tokenizer, texts)
    seq, pooled = hf_outputs(hf_model, inputs)
    out = theirs([inputs["input_word_ids"], inputs["input_mask"],
                  inputs["input_type_ids"]], training=False)
    mask = inputs["input_mask"].astype(bool)
    assert max_abs_diff(out["sequence_output"].numpy()[mask], seq[mask]) <= 1e-4
    assert max_abs_diff(out["pooled_output"], pooled) <= 1e-4
  # Negative control: a Model Garden encoder that restored nothing is far off.
  fresh = tfm.nlp.networks.BertEncoder(
      vocab_size=c.vocab_size, hidden_size=c.hidden_size,
      num_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
      max_sequence_length=c.max_position_embeddings,
      type_vocab_size=c.type_vocab_size, inner_dim=c.intermediate_size,
      dict_outputs=True)
  out = fresh([inputs["input_word_ids"], inputs["input_mask"],
               inputs["input_type_ids"]], training=False)
  assert max_abs_diff(out["pooled_output"], pooled) > 1e-2
