"""The BERT family against Hugging Face transformers (PyTorch, test extra):
randomly initialised RoBERTa, ALBERT, DistilBERT and ELECTRA models saved
with `save_pretrained`, read by `bert.checkpoints.load`, give the same
sequence output, pooled output (where the family has a pooler), masked-LM
logits, ALBERT sentence-order logits and ELECTRA discriminator logits
(ElectraForPreTraining), with padding and two segments where the family has
token types; and ours written back as a Hugging Face folder loads in
transformers and agrees."""

import dataclasses

import numpy as np
import pytest
import torch
import transformers

from bert import checkpoints
from bert.config import BertConfig
from bert.checkpoints.errors import CheckpointMismatchError
from conftest import one_line
from family import hf_model

TOL = 1e-5
SMALL = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3,
             num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=40)
# Base-sized shapes (their released configs; a smaller vocabulary keeps the
# files small, the blocks are full size).
BASE = dict(vocab_size=1000, hidden_size=768, num_hidden_layers=12,
            num_attention_heads=12, intermediate_size=3072,
            max_position_embeddings=514)


def inputs(family, vocab_size, pad_id):
  """Three rows of 12 ids: one full, two padded; two segments where the
  family has token types."""
  rng = np.random.RandomState(0)
  ids = rng.randint(5, vocab_size, size=(3, 12))
  mask = np.ones_like(ids)
  mask[1, 8:] = 0
  mask[2, 5:] = 0
  ids = np.where(mask == 1, ids, pad_id)
  types = np.zeros_like(ids)
  if family in ("bert", "albert", "electra"):
    types[:, 6:] = 1
    types *= mask
  return dict(input_word_ids=ids.astype(np.int32),
              input_mask=mask.astype(np.int32),
              input_type_ids=types.astype(np.int32))


def hf_outputs(model, family, x):
  kwargs = dict(input_ids=torch.tensor(x["input_word_ids"], dtype=torch.long),
                attention_mask=torch.tensor(x["input_mask"], dtype=torch.long))
  if family != "distilbert":
    kwargs["token_type_ids"] = torch.tensor(x["input_type_ids"],
                                            dtype=torch.long)
  with torch.no_grad():
    out = model(**kwargs, output_hidden_states=True)
  result = dict(sequence_output=out.hidden_states[-1].numpy(),
                logits=(out.prediction_logits if hasattr(out, "prediction_logits")
                        else out.logits).numpy())
  if family == "albert":
    result["sentence_logits"] = out.sop_logits.numpy()
  if family == "bert":
    result["sentence_logits"] = out.seq_relationship_logits.numpy()
  return result


def our_outputs(ckpt, x):
  out = ckpt.encoder(x)
  batch, seq = x["input_word_ids"].shape
  every = np.tile(np.arange(seq, dtype=np.int32), (batch, 1))
  result = dict(sequence_output=out["sequence_output"].numpy(),
                pooled_output=out["pooled_output"].numpy(),
                logits=ckpt.masked_lm(out["sequence_output"], every).numpy())
  if ckpt.next_sentence is not None:
    result["sentence_logits"] = ckpt.next_sentence(out["pooled_output"]).numpy()
  return result


def assert_agree(ours, theirs, mask, what):
  real = mask.astype(bool)          # padded rows' outputs are not compared
  for key in ("sequence_output", "logits"):
    diff = np.abs(ours[key] - theirs[key])[real].max()
    assert diff <= TOL, f"{what} {key}: max abs diff {diff:.2e}"
  if "sentence_logits" in theirs:
    diff = np.abs(ours["sentence_logits"] - theirs["sentence_logits"]).max()
    assert diff <= TOL, f"{what} sentence logits: max abs diff {diff:.2e}"


FAMILIES = ("roberta", "albert", "distilbert", "electra", "bert")
EXPECTED = dict(
    roberta=dict(position_offset=2, type_vocab_size=1, use_pooler=False,
                 num_hidden_groups=None, pad_token_id=1),
    albert=dict(position_offset=0, type_vocab_size=2, use_pooler=True,
                num_hidden_groups=1, embedding_size=16, hidden_act="gelu"),
    distilbert=dict(position_offset=0, type_vocab_size=0, use_pooler=False,
                    num_hidden_groups=None),
    electra=dict(position_offset=0, type_vocab_size=2, use_pooler=False,
                 embedding_size=16),
    bert=dict(position_offset=0, type_vocab_size=2, use_pooler=True))


def check_family(family, shape, tmp_path):
  model = hf_model(family, shape)
  folder = str(tmp_path / f"{family}_hf")
  model.save_pretrained(folder)
  ckpt = checkpoints.load(folder, with_heads=True)
  assert ckpt.config.family == family
  # A generator (ElectraForMaskedLM) is no discriminator.
  assert ckpt.discriminator is None
  for field, value in EXPECTED[family].items():
    assert getattr(ckpt.config, field) == value, field
  x = inputs(family, shape["vocab_size"], model.config.pad_token_id or 0)
  theirs = hf_outputs(model, family, x)
  ours = our_outputs(ckpt, x)
  assert_agree(ours, theirs, x["input_mask"], f"{family} read")
  if not ckpt.config.use_pooler:
    # No pooler: the pooled output is the first token's sequence output.
    np.testing.assert_array_equal(ours["pooled_output"],
                                  ours["sequence_output"][:, 0])
  # Ours -> a Hugging Face folder -> transformers agrees with ours.
  out = str(tmp_path / f"{family}_ours")
  checkpoints.save(ckpt, out, format="hf")
  again = type(model).from_pretrained(out).eval()
  assert_agree(ours, hf_outputs(again, family, x), x["input_mask"],
               f"{family} written")
  # And through our own formats: the same config and the same numbers.
  for fmt in ("tf2", "tf1"):
    path = str(tmp_path / f"{family}_{fmt}")
    checkpoints.save(ckpt, path, format=fmt)
    back = checkpoints.load(path, with_heads=True)
    assert back.config == ckpt.config, fmt
    mine = our_outputs(back, x)
    for key, value in ours.items():
      np.testing.assert_allclose(mine[key], value, rtol=0, atol=1e-6,
                                 err_msg=f"{family} {fmt} {key}")
  return ckpt


@pytest.mark.parametrize("family", FAMILIES)
def test_small_models_equal_transformers_both_ways(family, tmp_path):
  ckpt = check_family(family, SMALL, tmp_path)
  if family == "albert":
    # One block, applied by every layer.
    assert len(ckpt.encoder.transformer_layers) == 1
    assert ckpt.encoder.layer_blocks == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES[:4])
def test_base_sized_models_equal_transformers_both_ways(family, tmp_path):
  check_family(family, BASE, tmp_path)


def test_pooled_output_of_a_bert_family_model_with_a_pooler(tmp_path):
  """ALBERT's pooler (a bare Linear in transformers) is ours: the pooled
  outputs agree."""
  model = hf_model("albert", SMALL)
  model.save_pretrained(str(tmp_path / "albert"))
  ckpt = checkpoints.load(str(tmp_path / "albert"))
  x = inputs("albert", SMALL["vocab_size"], 0)
  with torch.no_grad():
    theirs = model.albert(
        input_ids=torch.tensor(x["input_word_ids"], dtype=torch.long),
        attention_mask=torch.tensor(x["input_mask"], dtype=torch.long),
        token_type_ids=torch.tensor(x["input_type_ids"], dtype=torch.long)
    ).pooler_output.numpy()
  ours = ckpt.encoder(x)["pooled_output"].numpy()
  assert np.abs(ours - theirs).max() <= TOL


def test_roberta_positions_start_past_the_padding_id():
  """The longest RoBERTa input is the table's rows past the offset: 512 of
  514; one more is refused, naming both lengths (inside Keras' wrapping of
  a layer's error)."""
  from bert.networks.bert_encoder import BertEncoder  # pylint: disable=g-import-not-at-top
  config = BertConfig.preset("roberta_base", num_hidden_layers=1,
                             vocab_size=60)
  assert config.max_seq_length == 512
  encoder = BertEncoder(config)
  ids = np.full((1, 513), 5, np.int32)
  with pytest.raises(ValueError) as e:
    encoder(dict(input_word_ids=ids, input_mask=np.ones_like(ids),
                 input_type_ids=np.zeros_like(ids)))
  assert ("sequence length 513, longer than max_position_embeddings=514 past "
          "position_offset=2 (512 positions)") in str(e.value)


def test_a_checkpoint_of_another_family_is_a_one_line_mismatch(tmp_path):
  """A RoBERTa folder whose config.json says BERT: its weights do not fit
  and the error names the file and the first problem."""
  import json  # pylint: disable=g-import-not-at-top
  model = hf_model("roberta", SMALL)
  folder = tmp_path / "roberta"
  model.save_pretrained(str(folder))
  config = json.loads((folder / "config.json").read_text())
  config["model_type"] = "bert"
  config["architectures"] = ["BertForMaskedLM"]
  (folder / "config.json").write_text(json.dumps(config))
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(str(folder))
  one_line(e, "model.safetensors", "config.json")


@pytest.mark.parametrize("family", FAMILIES)
def test_family_configs_round_trip_through_both_file_formats(family):
  name = dict(roberta="roberta_base", albert="albert_base_v2",
              distilbert="distilbert_base_uncased",
              electra="electra_small_discriminator", bert="bert_base")[family]
  config = BertConfig.preset(name)
  assert config.family == family
  assert BertConfig.from_google_dict(config.to_google_dict()) == config
  back = BertConfig.from_hf_dict(config.to_hf_dict())
  assert back.family == family
  # RoBERTa's pooler is told by the weights, not the config file.
  assert back == (config if family != "roberta"
                  else BertConfig.preset(name, use_pooler=True))


def test_an_electra_discriminator_loads_its_encoder(tmp_path):
  """ElectraForPreTraining (the released discriminators) without heads:
  the encoder agrees with transformers; its discriminator head is listed as
  ignored."""
  torch.manual_seed(0)
  model = transformers.ElectraForPreTraining(
      transformers.ElectraConfig(**SMALL, embedding_size=16)).eval()
  model.save_pretrained(str(tmp_path / "disc"))
  ckpt = checkpoints.load(str(tmp_path / "disc"))
  assert ckpt.masked_lm is None and ckpt.discriminator is None
  assert "cls/discriminator_predictions/dense_1/kernel" in ckpt.ignored_variables
  x = inputs("electra", SMALL["vocab_size"], 0)
  with torch.no_grad():
    theirs = model.electra(
        input_ids=torch.tensor(x["input_word_ids"], dtype=torch.long),
        attention_mask=torch.tensor(x["input_mask"], dtype=torch.long),
        token_type_ids=torch.tensor(x["input_type_ids"], dtype=torch.long)
    ).last_hidden_state.numpy()
  ours = ckpt.encoder(x)["sequence_output"].numpy()
  real = x["input_mask"].astype(bool)
  assert np.abs(ours - theirs)[real].max() <= TOL


def test_model_garden_cannot_hold_another_family(tmp_path):
  from bert.checkpoints.errors import CheckpointError  # pylint: disable=g-import-not-at-top
  from bert.networks.bert_encoder import BertEncoder  # pylint: disable=g-import-not-at-top
  encoder = BertEncoder(BertConfig(**SMALL, family="electra", use_pooler=False))
  with pytest.raises(CheckpointError) as e:
    checkpoints.save(encoder, str(tmp_path / "mg"), format="model_garden")
  one_line(e, "electra", "Model Garden")
  assert not (tmp_path / "mg").exists()


def test_bad_family_configs_are_one_line():
  with pytest.raises(ValueError) as e:
    BertConfig.from_hf_dict(dict(SMALL, model_type="gpt2"))
  one_line(e, "model_type='gpt2'")
  with pytest.raises(ValueError) as e:
    BertConfig(family="xlnet")
  one_line(e, "BertConfig.family")
  with pytest.raises(ValueError) as e:
    BertConfig(num_hidden_layers=2, num_hidden_groups=3)
  one_line(e, "num_hidden_groups")
  with pytest.raises(ValueError) as e:
    BertConfig.preset("bert_base", family="distilbert").to_hf_dict()
  one_line(e, "distilbert")
  with pytest.raises(ValueError) as e:
    BertConfig.from_hf_dict(dict(
        model_type="distilbert", vocab_size=10, dim=8, n_layers=1, n_heads=2,
        hidden_dim=16, max_position_embeddings=8, sinusoidal_pos_embds=True))
  one_line(e, "sinusoidal_pos_embds")


# ----------------------------------------------- ELECTRA's discriminator
def electra_discriminator(shape, embedding_size):
  """A random transformers ElectraForPreTraining, its LayerNorm and bias
  values moved off their initial 1 and 0 (as `family.hf_model`)."""
  torch.manual_seed(0)
  model = transformers.ElectraForPreTraining(transformers.ElectraConfig(
      **shape, embedding_size=embedding_size)).eval()
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name:
        p.add_(torch.randn_like(p) * 0.1)
  return model


def discriminator_logits(model, x):
  """transformers' discriminator logits [batch, seq]."""
  with torch.no_grad():
    return model(
        input_ids=torch.tensor(x["input_word_ids"], dtype=torch.long),
        attention_mask=torch.tensor(x["input_mask"], dtype=torch.long),
        token_type_ids=torch.tensor(x["input_type_ids"], dtype=torch.long)
    ).logits.numpy()


def ours_discriminator(ckpt, x):
  return ckpt.discriminator(ckpt.encoder(x)["sequence_output"]).numpy()


def assert_logits_agree(ours, theirs, mask, what):
  assert ours.shape == theirs.shape, what
  diff = np.abs(ours - theirs)[mask.astype(bool)].max()
  assert diff <= TOL, f"{what}: max abs diff {diff:.2e}"


def check_discriminator(shape, embedding_size, tmp_path):
  model = electra_discriminator(shape, embedding_size)
  folder = str(tmp_path / "disc_hf")
  model.save_pretrained(folder)
  ckpt = checkpoints.load(folder, with_heads=True)
  assert ckpt.config.family == "electra"
  assert ckpt.discriminator is not None and ckpt.masked_lm is None
  assert not ckpt.ignored_variables
  x = inputs("electra", shape["vocab_size"], 0)
  assert x["input_type_ids"].max() == 1 and x["input_mask"].min() == 0
  ours = ours_discriminator(ckpt, x)
  assert ours.dtype == np.float32
  assert_logits_agree(ours, discriminator_logits(model, x), x["input_mask"],
                      "discriminator read")
  # Ours -> a Hugging Face folder -> transformers' ElectraForPreTraining.
  out = str(tmp_path / "disc_ours")
  checkpoints.save(ckpt, out, format="hf")
  import json  # pylint: disable=g-import-not-at-top
  with open(f"{out}/config.json") as f:
    assert json.load(f)["architectures"] == ["ElectraForPreTraining"]
  again = transformers.ElectraForPreTraining.from_pretrained(out).eval()
  assert_logits_agree(ours, discriminator_logits(again, x), x["input_mask"],
                      "discriminator written")
  # Our own formats keep the head too.
  for fmt in ("tf2", "tf1", "hf"):
    path = str(tmp_path / f"disc_{fmt}_back")
    checkpoints.save(ckpt, path, format=fmt)
    back = checkpoints.load(path, with_heads=True)
    # (Our config files leave out an embedding_size equal to hidden_size.)
    assert dataclasses.replace(back.config, embedding_size=None) == \
        dataclasses.replace(ckpt.config, embedding_size=None), fmt
    assert back.config.embedding_width == ckpt.config.embedding_width, fmt
    assert back.discriminator is not None, fmt
    np.testing.assert_allclose(ours_discriminator(back, x), ours, rtol=0,
                               atol=1e-6, err_msg=fmt)
    # Without heads, the head is left out and named.
    bare = checkpoints.load(path)
    assert bare.discriminator is None, fmt
    assert any("discriminator" in n for n in bare.ignored_variables), fmt


def test_small_electra_discriminator_equals_transformers_both_ways(tmp_path):
  check_discriminator(SMALL, 16, tmp_path)


@pytest.mark.slow
def test_base_sized_electra_discriminator_equals_transformers(tmp_path):
  check_discriminator(dict(BASE, max_position_embeddings=512), 768, tmp_path)


def test_a_discriminator_and_a_masked_lm_head_make_no_hf_folder(tmp_path):
  """transformers has no ELECTRA class with both heads: a one-line error,
  nothing written."""
  from bert.checkpoints.errors import CheckpointError  # pylint: disable=g-import-not-at-top
  model = electra_discriminator(SMALL, 16)
  model.save_pretrained(str(tmp_path / "disc"))
  ckpt = checkpoints.load(str(tmp_path / "disc"), with_heads=True)
  ckpt.masked_lm, _ = checkpoints.build_pretraining_heads(
      ckpt.encoder, next_sentence=False)
  with pytest.raises(CheckpointError) as e:
    checkpoints.save(ckpt, str(tmp_path / "both"), format="hf")
  one_line(e, "ElectraForPreTraining", "ElectraForMaskedLM")
  assert not (tmp_path / "both").exists()
