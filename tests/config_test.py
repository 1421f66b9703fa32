"""Tests of bert.BertConfig: presets, validation, json formats."""

import json
import os

import pytest

from bert import BertConfig, BertEncoder
from conftest import minilm_dir, small_config

COMPACT = [f"bert_L{l}_H{h}" for l in (2, 4, 6, 8, 10, 12)
           for h in (128, 256, 512, 768)]


def test_all_26_released_shapes():
  names = COMPACT + ["bert_base", "bert_large"]
  assert len(set(names)) == 26
  for name in names:
    c = BertConfig.preset(name)
    assert c.num_attention_heads * 64 == c.hidden_size
    assert c.intermediate_size == 4 * c.hidden_size
    assert c.vocab_size == 30522 and c.max_position_embeddings == 512
    assert c.hidden_act == "gelu"
  c = BertConfig.preset("bert_L6_H256")
  assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads) == (6, 256, 4)
  large = BertConfig.preset("bert_large")
  assert (large.num_hidden_layers, large.hidden_size, large.num_attention_heads,
          large.intermediate_size) == (24, 1024, 16, 4096)


@pytest.mark.parametrize("alias,shape", [
    ("bert_tiny", "bert_L2_H128"), ("bert_mini", "bert_L4_H256"),
    ("bert_small", "bert_L4_H512"), ("bert_medium", "bert_L8_H512"),
    ("bert_base", "bert_L12_H768")])
def test_aliases(alias, shape):
  assert BertConfig.preset(alias) == BertConfig.preset(shape)


def test_unknown_preset_lists_known():
  with pytest.raises(ValueError, match="bert_tiny"):
    BertConfig.preset("bert_huge")


def test_preset_overrides():
  assert BertConfig.preset("bert_tiny", vocab_size=28996).vocab_size == 28996


def test_bert_base_parameter_count():
  # google-research BERT-Base uncased encoder weights, pooler included.
  encoder = BertEncoder(BertConfig.preset("bert_base"))
  assert encoder.count_params() == 109_482_240


@pytest.mark.parametrize("field,kwargs", [
    ("num_attention_heads", dict(hidden_size=64, num_attention_heads=5)),
    ("hidden_size", dict(hidden_size=0)),
    ("vocab_size", dict(vocab_size=-3)),
    ("num_hidden_layers", dict(num_hidden_layers=0)),
    ("intermediate_size", dict(intermediate_size=0)),
    ("hidden_act", dict(hidden_act="gelu_new")),
    ("hidden_dropout_prob", dict(hidden_dropout_prob=1.5)),
    ("embedding_size", dict(embedding_size=0)),
])
def test_validation_names_the_field(field, kwargs):
  with pytest.raises(ValueError, match=field):
    small_config(**kwargs)


def test_google_json_round_trip(tmp_path):
  c = small_config(embedding_size=32, norm_first=True)
  path = os.path.join(tmp_path, "bert_config.json")
  c.to_json_file(path)
  with open(path) as f:
    d = json.load(f)
  assert d["hidden_act"] == "gelu" and "model_type" not in d
  assert BertConfig.from_json_file(path) == c


def test_google_json_plain_bert_has_only_reference_fields(tmp_path):
  path = os.path.join(tmp_path, "bert_config.json")
  BertConfig.preset("bert_base").to_json_file(path)
  with open(path) as f:
    assert sorted(json.load(f)) == sorted([
        "attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob",
        "hidden_size", "initializer_range", "intermediate_size",
        "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
        "type_vocab_size", "vocab_size"])


@pytest.mark.parametrize("act,hf_act", [("gelu", "gelu_new"),
                                        ("gelu_exact", "gelu"),
                                        ("relu", "relu")])
def test_hf_json_keeps_the_activation_meaning(tmp_path, act, hf_act):
  c = small_config(hidden_act=act, layer_norm_epsilon=1e-6)
  path = os.path.join(tmp_path, "config.json")
  c.to_json_file(path, format="hf")
  with open(path) as f:
    d = json.load(f)
  assert d["hidden_act"] == hf_act and d["model_type"] == "bert"
  assert d["layer_norm_eps"] == 1e-6
  assert BertConfig.from_json_file(path) == c


def test_hf_gelu_means_exact_gelu(tmp_path):
  path = os.path.join(tmp_path, "config.json")
  with open(path, "w") as f:
    json.dump(dict(model_type="bert", vocab_size=10, hidden_size=8,
                   num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=16, max_position_embeddings=8,
                   hidden_act="gelu"), f)
  assert BertConfig.from_json_file(path).hidden_act == "gelu_exact"


def test_reads_real_minilm_config():
  c = BertConfig.from_json_file(os.path.join(minilm_dir(), "config.json"))
  assert c == BertConfig.preset("all_minilm_l6_v2")
  assert c.head_size == 32


def test_hf_cannot_express_pre_ln_or_factorised(tmp_path):
  with pytest.raises(ValueError, match="norm_first"):
    small_config(norm_first=True).to_json_file(
        os.path.join(tmp_path, "c.json"), format="hf")
  with pytest.raises(ValueError, match="embedding_size"):
    small_config(embedding_size=16).to_json_file(
        os.path.join(tmp_path, "c.json"), format="hf")


def test_bad_files_name_the_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.json"):
    BertConfig.from_json_file(os.path.join(tmp_path, "nope.json"))
  bad = os.path.join(tmp_path, "bad.json")
  with open(bad, "w") as f:
    f.write("{not json")
  with pytest.raises(ValueError, match="bad.json"):
    BertConfig.from_json_file(bad)
  partial = os.path.join(tmp_path, "partial.json")
  with open(partial, "w") as f:
    json.dump(dict(vocab_size=10, hidden_size=8), f)
  with pytest.raises(ValueError, match="partial.json.*num_hidden_layers"):
    BertConfig.from_json_file(partial)
  odd = os.path.join(tmp_path, "odd.json")
  with open(odd, "w") as f:
    json.dump(dict(vocab_size=10, hidden_size=8, num_hidden_layers=1,
                   num_attention_heads=3, intermediate_size=8,
                   max_position_embeddings=8), f)
  with pytest.raises(ValueError, match="odd.json.*num_attention_heads"):
    BertConfig.from_json_file(odd)


@pytest.mark.parametrize("wrapped", [False, True])
def test_model_garden_encoder_config_names(tmp_path, wrapped):
  """Model Garden's EncoderConfig spelling of bert_config.json reads as the
  google-research one."""
  google = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=3,
                      num_attention_heads=4, intermediate_size=64,
                      hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3,
                      max_position_embeddings=40, type_vocab_size=2)
  d = dict(vocab_size=120, hidden_size=32, num_layers=3, num_attention_heads=4,
           intermediate_size=64, hidden_activation="gelu", dropout_rate=0.2,
           attention_dropout_rate=0.3, max_position_embeddings=40,
           type_vocab_size=2, initializer_range=0.02)
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({"type": "bert", "bert": d} if wrapped else d))
  assert BertConfig.from_json_file(str(path)) == google
