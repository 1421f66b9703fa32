"""The BERT family's own checkpoint formats, read by name and compared with
the reference models:

  - google-research ALBERT TF1 checkpoints (albert_config.json,
    bert/encoder/transformer/group_G/inner_group_0/...) against transformers'
    AlbertForPreTraining holding the same weights;
  - google-research ELECTRA TF1 checkpoints (electra/..., generator/...,
    discriminator_predictions/...) against ElectraForPreTraining and the
    generator's ElectraForMaskedLM;
  - Model Garden's `AlbertEncoder` (`tf.train.Checkpoint(encoder=...)`)
    against the AlbertEncoder itself, both ways;
with padding, and negative controls (a missing or foreign variable, a config
that does not fit: one line naming the file and the variable).

The TF1 files are written here the way TF1 writes them (a graph's variables
and `tf.compat.v1.train.Saver`), named from google-research's modeling.py /
run_pretraining.py (variable scopes quoted in `ALBERT_NAMES` and
`ELECTRA_NAMES`); the weights are a transformers model's, so the model that
computes the expected numbers holds exactly what the file holds.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from bert import checkpoints
from bert.checkpoints import CheckpointError, CheckpointMismatchError
from conftest import REPO_ROOT, one_line

TOL = 1e-5
SHAPE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3,
             num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=40)


def inputs(vocab_size, seq=12):
  """Three rows: one full, two padded; two segments."""
  rng = np.random.RandomState(0)
  ids = rng.randint(5, vocab_size, size=(3, seq))
  mask = np.ones_like(ids)
  mask[1, 8:] = 0
  mask[2, 5:] = 0
  ids = np.where(mask == 1, ids, 0)
  types = np.zeros_like(ids)
  types[:, 6:] = 1
  return dict(input_word_ids=ids.astype(np.int32),
              input_mask=mask.astype(np.int32),
              input_type_ids=(types * mask).astype(np.int32))


def torch_inputs(x):
  return dict(input_ids=torch.tensor(x["input_word_ids"], dtype=torch.long),
              attention_mask=torch.tensor(x["input_mask"], dtype=torch.long),
              token_type_ids=torch.tensor(x["input_type_ids"],
                                          dtype=torch.long))


def close(ours, theirs, mask, what):
  """max |ours - theirs| over the real (unpadded) tokens <= TOL, relative
  to the outputs' scale where it passes 1 (fp32 rounding grows with it:
  unseeded random heads give logits of a few units)."""
  ours, theirs = np.asarray(ours), np.asarray(theirs)
  assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
  real = mask.astype(bool) if ours.ndim >= 2 and mask is not None else ...
  diff = np.abs(ours - theirs)[real].max()
  scale = max(1.0, float(np.abs(theirs[real]).max()))
  assert diff <= TOL * scale, f"{what}: max abs diff {diff:.2e} (scale {scale:.1f})"


def randomized(model):
  """`model` with its LayerNorm and bias values moved off 1 and 0, and its
  dense kernels four times their initial scale (attention far from uniform,
  so a wrong head count or a swapped weight shows)."""
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
        p.add_(torch.randn_like(p) * 0.1)
      elif p.ndim == 2 and "embeddings" not in name:
        p.mul_(4.0)
  return model.eval()


def write_tf1(arrays, prefix):
  """A TF1 checkpoint as google-research's scripts leave one: the graph's
  variables (and global_step) saved by `tf.compat.v1.train.Saver`."""
  graph = tf.Graph()
  with graph.as_default():
    variables = {name: tf.compat.v1.Variable(value, name=name)
                 for name, value in arrays.items()}
    variables["global_step"] = tf.compat.v1.Variable(
        np.int64(1000), name="global_step")
    saver = tf.compat.v1.train.Saver(var_list=variables)
    with tf.compat.v1.Session(graph=graph) as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, prefix)


def google_names(state_dict, rules, skip=()):
  """{google-research name: array} of a transformers state dict: each key
  renamed by the first rule that matches it (regex, replacement); Linear
  weights ([out, in]) transposed to TF kernels ([in, out])."""
  out = {}
  for key, value in state_dict.items():
    if any(re.search(s, key) for s in skip) or key.endswith("position_ids"):
      continue
    for pattern, replacement in rules:
      name, n = re.subn(pattern, replacement, key)
      if n:
        break
    else:
      raise AssertionError(f"no rule for {key}")
    value = value.detach().numpy().astype(np.float32)
    if name.endswith("/kernel"):
      value = value.T
    out[name] = value
  return out


# ------------------------------------------------------------------ ALBERT
# transformers' AlbertForPreTraining keys -> google-research ALBERT names
# (albert/modeling.py: scopes bert/embeddings; bert/encoder/
# embedding_hidden_mapping_in; bert/encoder/transformer/group_G/
# inner_group_0/{attention_1/{self,output/dense}, LayerNorm, ffn_1/
# intermediate/{dense,output/dense}, LayerNorm_1}; bert/pooler/dense.
# run_pretraining.py: cls/predictions/{transform/{dense,LayerNorm},
# output_bias}, cls/seq_relationship/{output_weights,output_bias}).
_BLOCK = r"albert\.encoder\.albert_layer_groups\.(\d+)\.albert_layers\.0\."
_GROUP = r"bert/encoder/transformer/group_\1/inner_group_0/"
_DENSE = (r"\.weight$", "/kernel", r"\.bias$", "/bias")
_NORM = (r"\.weight$", "/gamma", r"\.bias$", "/beta")


def _linear(hf, tf1, leaves=_DENSE):
  return [(hf + leaves[0], tf1 + leaves[1]), (hf + leaves[2], tf1 + leaves[3])]


ALBERT_NAMES = (
    [(r"^albert\.embeddings\.(word|position|token_type)_embeddings\.weight$",
      r"bert/embeddings/\1_embeddings")]
    + _linear(r"^albert\.embeddings\.LayerNorm", "bert/embeddings/LayerNorm",
              _NORM)
    + _linear(r"^albert\.encoder\.embedding_hidden_mapping_in",
              "bert/encoder/embedding_hidden_mapping_in")
    + [r for part in ("query", "key", "value") for r in _linear(
        _BLOCK + rf"attention\.{part}", _GROUP + f"attention_1/self/{part}")]
    + _linear(_BLOCK + r"attention\.dense", _GROUP + "attention_1/output/dense")
    + _linear(_BLOCK + r"attention\.LayerNorm", _GROUP + "LayerNorm", _NORM)
    + _linear(_BLOCK + r"ffn", _GROUP + "ffn_1/intermediate/dense")
    + _linear(_BLOCK + r"ffn_output",
              _GROUP + "ffn_1/intermediate/output/dense")
    + _linear(_BLOCK + r"full_layer_layer_norm", _GROUP + "LayerNorm_1", _NORM)
    + _linear(r"^albert\.pooler", "bert/pooler/dense")
    + _linear(r"^predictions\.dense", "cls/predictions/transform/dense")
    + _linear(r"^predictions\.LayerNorm", "cls/predictions/transform/LayerNorm",
              _NORM)
    + [(r"^predictions\.bias$", "cls/predictions/output_bias"),
       # [2, hidden] in both: no transpose (the name is no kernel)
       (r"^sop_classifier\.classifier\.weight$",
        "cls/seq_relationship/output_weights"),
       (r"^sop_classifier\.classifier\.bias$",
        "cls/seq_relationship/output_bias")])
# ALBERT-base v2's variables (google-research's release), one group.
RELEASED_ALBERT = """
bert/embeddings/LayerNorm/beta bert/embeddings/LayerNorm/gamma
bert/embeddings/position_embeddings bert/embeddings/token_type_embeddings
bert/embeddings/word_embeddings bert/encoder/embedding_hidden_mapping_in/bias
bert/encoder/embedding_hidden_mapping_in/kernel
bert/encoder/transformer/group_0/inner_group_0/LayerNorm/beta
bert/encoder/transformer/group_0/inner_group_0/LayerNorm/gamma
bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/beta
bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma
bert/encoder/transformer/group_0/inner_group_0/attention_1/output/dense/bias
bert/encoder/transformer/group_0/inner_group_0/attention_1/output/dense/kernel
bert/encoder/transformer/group_0/inner_group_0/attention_1/self/key/bias
bert/encoder/transformer/group_0/inner_group_0/attention_1/self/key/kernel
bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/bias
bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel
bert/encoder/transformer/group_0/inner_group_0/attention_1/self/value/bias
bert/encoder/transformer/group_0/inner_group_0/attention_1/self/value/kernel
bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/bias
bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel
bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/output/dense/bias
bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/output/dense/kernel
bert/pooler/dense/bias bert/pooler/dense/kernel cls/predictions/output_bias
cls/predictions/transform/LayerNorm/beta cls/predictions/transform/LayerNorm/gamma
cls/predictions/transform/dense/bias cls/predictions/transform/dense/kernel
cls/seq_relationship/output_bias cls/seq_relationship/output_weights
""".split()


def albert_model(groups=1, vocab_size=99):
  torch.manual_seed(0)
  return randomized(transformers.AlbertForPreTraining(transformers.AlbertConfig(
      **dict(SHAPE, vocab_size=vocab_size), embedding_size=16,
      num_hidden_groups=groups, hidden_act="gelu_new")))


def albert_config_json(model):
  """google-research's albert_config.json of `model` (its field names;
  "gelu" is the tanh form there)."""
  c = model.config
  return dict(
      attention_probs_dropout_prob=0.0, hidden_act="gelu",
      hidden_dropout_prob=0.0, embedding_size=c.embedding_size,
      hidden_size=c.hidden_size, initializer_range=0.02,
      intermediate_size=c.intermediate_size,
      max_position_embeddings=c.max_position_embeddings,
      num_attention_heads=c.num_attention_heads,
      num_hidden_layers=c.num_hidden_layers,
      num_hidden_groups=c.num_hidden_groups, net_structure_type=0,
      gap_size=0, num_memory_blocks=0, inner_group_num=1, down_scale_factor=1,
      type_vocab_size=c.type_vocab_size, vocab_size=c.vocab_size)


def albert_folder(model, folder, prefix="model.ckpt-best"):
  """A google-research ALBERT release folder of `model`'s weights."""
  os.makedirs(folder)
  arrays = google_names(model.state_dict(), ALBERT_NAMES,
                        skip=(r"^predictions\.decoder\.",))
  write_tf1(arrays, os.path.join(folder, prefix))
  with open(os.path.join(folder, "albert_config.json"), "w") as f:
    json.dump(albert_config_json(model), f)
  return folder


def albert_reference(model, x):
  with torch.no_grad():
    out = model(**torch_inputs(x), output_hidden_states=True)
    pooled = model.albert(**torch_inputs(x)).pooler_output
  return dict(sequence_output=out.hidden_states[-1].numpy(),
              pooled_output=pooled.numpy(),
              logits=out.prediction_logits.numpy(),
              sentence_logits=out.sop_logits.numpy())


def ours(ckpt, x):
  out = ckpt.encoder(x)
  batch, seq = x["input_word_ids"].shape
  every = np.tile(np.arange(seq, dtype=np.int32), (batch, 1))
  result = dict(sequence_output=out["sequence_output"].numpy(),
                pooled_output=out["pooled_output"].numpy())
  if ckpt.masked_lm is not None:
    result["logits"] = ckpt.masked_lm(out["sequence_output"], every).numpy()
  if ckpt.next_sentence is not None:
    result["sentence_logits"] = ckpt.next_sentence(
        out["pooled_output"]).numpy()
  return result


def check_agree(got, expected, x, what):
  for key, value in expected.items():
    close(got[key], value, x["input_mask"] if key in (
        "sequence_output", "logits") else None, f"{what} {key}")


def test_the_fixture_names_are_the_released_albert_names(tmp_path):
  """The names this file writes are those of ALBERT-base v2 as released."""
  folder = albert_folder(albert_model(), str(tmp_path / "albert"))
  names = [n for n, _ in tf.train.list_variables(
      os.path.join(folder, "model.ckpt-best"))]
  assert sorted(names) == sorted(RELEASED_ALBERT + ["global_step"])


@pytest.mark.parametrize("groups", [1, 3])
def test_albert_tf1_checkpoint_equals_transformers(tmp_path, groups):
  model = albert_model(groups)
  folder = albert_folder(model, str(tmp_path / "albert_base"))
  assert checkpoints.detect_format(folder) == "tf1"
  ckpt = checkpoints.load(folder, with_heads=True)
  c = ckpt.config
  assert (c.family, c.embedding_size, c.num_hidden_groups, c.hidden_act,
          c.num_hidden_layers) == ("albert", 16, groups, "gelu", 3)
  assert len(ckpt.encoder.transformer_layers) == groups
  assert ckpt.has_heads and ckpt.ignored_variables == ["global_step"]
  x = inputs(99)
  expected = albert_reference(model, x)
  got = ours(ckpt, x)
  check_agree(got, expected, x, "albert tf1")
  # Negative control: LayerNorm and LayerNorm_1 read the other way round
  # miss the bound.
  block = ckpt.encoder.transformer_layers[0]
  first = block.attention_layer_norm.get_weights()
  block.attention_layer_norm.set_weights(block.output_layer_norm.get_weights())
  block.output_layer_norm.set_weights(first)
  assert np.abs(ours(ckpt, x)["sequence_output"]
                - expected["sequence_output"]).max() > 1e-3


def test_albert_tf1_written_in_albert_names_reads_back(tmp_path):
  """Ours -> tf1 writes google-research ALBERT's names and its
  albert_config.json: the file equals the one made from transformers."""
  model = albert_model(3)
  source = albert_folder(model, str(tmp_path / "src"))
  ckpt = checkpoints.load(source, with_heads=True)
  out = checkpoints.save(ckpt, str(tmp_path / "out"), format="tf1")
  theirs = dict(tf.train.list_variables(os.path.join(source,
                                                     "model.ckpt-best")))
  mine = dict(tf.train.list_variables(os.path.join(out, "bert_model.ckpt")))
  theirs.pop("global_step")
  assert mine == theirs
  for name in mine:
    np.testing.assert_array_equal(
        tf.train.load_variable(os.path.join(out, "bert_model.ckpt"), name),
        tf.train.load_variable(os.path.join(source, "model.ckpt-best"), name))
  with open(os.path.join(out, "albert_config.json")) as f:
    written = json.load(f)
  assert written == albert_config_json(model) | dict(
      hidden_dropout_prob=written["hidden_dropout_prob"],
      attention_probs_dropout_prob=written["attention_probs_dropout_prob"])
  # Read back through albert_config.json alone, as google-research ships it.
  os.remove(os.path.join(out, "bert_config.json"))
  os.remove(os.path.join(out, "bert_checkpoint.json"))
  again = checkpoints.load(out, with_heads=True)
  assert again.config.family == "albert"
  x = inputs(99)
  check_agree(ours(again, x), albert_reference(model, x), x, "albert rewrite")


def test_albert_tf1_errors_name_the_file_and_variable(tmp_path):
  model = albert_model()
  folder = albert_folder(model, str(tmp_path / "a"))
  prefix = os.path.join(folder, "model.ckpt-best")
  arrays = {n: tf.train.load_variable(prefix, n)
            for n, _ in tf.train.list_variables(prefix) if n != "global_step"}
  # A missing variable.
  missing = "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma"
  bad = str(tmp_path / "missing")
  os.makedirs(bad)
  write_tf1({n: v for n, v in arrays.items() if n != missing},
            os.path.join(bad, "model.ckpt"))
  os.link(os.path.join(folder, "albert_config.json"),
          os.path.join(bad, "albert_config.json"))
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(bad)
  one_line(e, os.path.join(bad, "model.ckpt"), "albert_config.json",
           "bert/encoder/layer_0/output/LayerNorm/gamma")
  # A second block inside a group (inner_group_num=2): not ours to build.
  inner = str(tmp_path / "inner")
  os.makedirs(inner)
  write_tf1(dict(arrays, **{missing.replace("inner_group_0", "inner_group_1"):
                            arrays[missing]}), os.path.join(inner, "model.ckpt"))
  os.link(os.path.join(folder, "albert_config.json"),
          os.path.join(inner, "albert_config.json"))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(inner)
  one_line(e, "inner_group_1", "inner_group_num")
  # Both spellings of one weight (ALBERT's and BERT's): which is meant?
  both = str(tmp_path / "both")
  os.makedirs(both)
  write_tf1(dict(arrays, **{"bert/encoder/layer_0/output/LayerNorm/gamma":
                            arrays[missing]}), os.path.join(both, "model.ckpt"))
  os.link(os.path.join(folder, "albert_config.json"),
          os.path.join(both, "albert_config.json"))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(both)
  one_line(e, os.path.join(both, "model.ckpt"), missing,
           "bert/encoder/layer_0/output/LayerNorm/gamma")
  # A config that asks for what no encoder here has.
  config = albert_config_json(model)
  with open(os.path.join(folder, "albert_config.json"), "w") as f:
    json.dump(dict(config, inner_group_num=2), f)
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, os.path.join(folder, "albert_config.json"), "inner_group_num=2")
  # The wrong family: a bert_config.json saying RoBERTa.
  with open(os.path.join(folder, "bert_config.json"), "w") as f:
    json.dump(dict(config, family="roberta"), f)
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, os.path.join(folder, "bert_config.json"), "roberta", "albert")
  # Without a config file.
  os.remove(os.path.join(folder, "bert_config.json"))
  os.remove(os.path.join(folder, "albert_config.json"))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, "bert_config.json", "albert_config.json", "not found")


# ----------------------------------------------------------------- ELECTRA
# transformers' ELECTRA keys -> google-research ELECTRA names (electra/
# model/modeling.py: the BERT block under {scope}/encoder/layer_i, the
# tables under electra/embeddings, {scope}/embeddings_project; run_
# pretraining.py: discriminator_predictions/{dense,dense_1},
# generator_predictions/{dense,LayerNorm,output_bias}).
def _bert_block(scope):
  return ([(r"^electra\.encoder\.layer\.(\d+)\.(.+)\.weight$",
            scope + r"/encoder/layer_\1/\2/WEIGHT"),
           (r"^electra\.encoder\.layer\.(\d+)\.(.+)\.bias$",
            scope + r"/encoder/layer_\1/\2/BIAS")]
          + _linear(r"^electra\.embeddings_project", scope + "/embeddings_project"))


ELECTRA_EMBEDDINGS = (
    [(r"^electra\.embeddings\.(word|position|token_type)_embeddings\.weight$",
      r"electra/embeddings/\1_embeddings")]
    + _linear(r"^electra\.embeddings\.LayerNorm", "electra/embeddings/LayerNorm",
              _NORM))
DISCRIMINATOR_NAMES = (
    ELECTRA_EMBEDDINGS + _bert_block("electra")
    + _linear(r"^discriminator_predictions\.dense_prediction",
              "discriminator_predictions/dense_1")
    + _linear(r"^discriminator_predictions\.dense",
              "discriminator_predictions/dense"))
GENERATOR_NAMES = (
    ELECTRA_EMBEDDINGS + _bert_block("generator")
    + _linear(r"^generator_predictions\.dense", "generator_predictions/dense")
    + _linear(r"^generator_predictions\.LayerNorm",
              "generator_predictions/LayerNorm", _NORM)
    + [(r"^generator_lm_head\.bias$", "generator_predictions/output_bias")])


def electra_names(state_dict, rules, skip=()):
  """`google_names` with the BERT block's own leaf names: a LayerNorm's
  gamma/beta, a dense layer's kernel/bias (the dots of the HF path become
  the TF1 scopes)."""
  out = {}
  for name, value in google_names(state_dict, rules, skip).items():
    if name.endswith(("/WEIGHT", "/BIAS")):
      path, leaf = name.rsplit("/", 1)
      path = path.replace(".", "/")
      if path.endswith("LayerNorm"):
        leaf = dict(WEIGHT="gamma", BIAS="beta")[leaf]
      else:
        leaf = dict(WEIGHT="kernel", BIAS="bias")[leaf]
        if leaf == "kernel":
          value = value.T
      name = f"{path}/{leaf}"
    out[name] = value
  return out


def electra_pair(hidden=64, heads=1, embedding_size=16):
  """A discriminator (ElectraForPreTraining) and a generator
  (ElectraForMaskedLM, a quarter of its width) sharing the embedding tables,
  as ELECTRA pre-trains them."""
  shape = dict(SHAPE, hidden_size=hidden, num_attention_heads=heads,
               intermediate_size=4 * hidden, max_position_embeddings=512)
  torch.manual_seed(0)
  discriminator = randomized(transformers.ElectraForPreTraining(
      transformers.ElectraConfig(**shape, embedding_size=embedding_size)))
  generator = randomized(transformers.ElectraForMaskedLM(
      transformers.ElectraConfig(**dict(
          shape, hidden_size=hidden // 4, intermediate_size=hidden,
          num_attention_heads=max(1, hidden // 4 // 64)),
                                 embedding_size=embedding_size)))
  with torch.no_grad():
    for name, p in generator.electra.embeddings.named_parameters():
      p.copy_(dict(discriminator.electra.embeddings.named_parameters())[name])
  return discriminator, generator


def electra_folder(discriminator, generator, folder):
  """A google-research ELECTRA release folder: both networks, no config."""
  os.makedirs(folder)
  arrays = {}
  if discriminator is not None:
    arrays.update(electra_names(discriminator.state_dict(),
                                DISCRIMINATOR_NAMES))
  if generator is not None:
    arrays.update(electra_names(generator.state_dict(), GENERATOR_NAMES,
                                skip=(r"^generator_lm_head\.weight$",)))
  write_tf1(arrays, os.path.join(folder, "electra_small"))
  return folder


def discriminator_logits(model, x):
  with torch.no_grad():
    out = model(**torch_inputs(x), output_hidden_states=True)
  return out.logits.numpy(), out.hidden_states[-1].numpy()


def test_electra_tf1_discriminator_equals_transformers(tmp_path):
  """A released ELECTRA folder (no config: ELECTRA's defaults, heads =
  hidden // 64) reads as the discriminator with its head; the generator's
  weights are named as ignored."""
  discriminator, generator = electra_pair()
  folder = electra_folder(discriminator, generator, str(tmp_path / "electra"))
  assert checkpoints.detect_format(folder) == "tf1"
  ckpt = checkpoints.load(folder, with_heads=True)
  c = ckpt.config
  assert (c.family, c.hidden_size, c.embedding_size, c.num_attention_heads,
          c.hidden_act, c.use_pooler, c.num_hidden_layers) == (
              "electra", 64, 16, 1, "gelu_exact", False, 3)
  assert ckpt.discriminator is not None and ckpt.masked_lm is None
  assert "other_network/generator/encoder/layer_0/output/dense/kernel" in \
      ckpt.ignored_variables
  assert "other_network/generator_predictions/output_bias" in \
      ckpt.ignored_variables
  x = inputs(99)
  logits, sequence = discriminator_logits(discriminator, x)
  out = ckpt.encoder(x)["sequence_output"]
  close(out, sequence, x["input_mask"], "electra sequence")
  close(ckpt.discriminator(out), logits, x["input_mask"], "electra logits")
  # Written back in ELECTRA's names, read back the same.
  back = checkpoints.save(ckpt, str(tmp_path / "back"), format="tf1")
  names = {n for n, _ in tf.train.list_variables(
      os.path.join(back, "bert_model.ckpt"))}
  assert "electra/embeddings_project/kernel" in names
  assert "discriminator_predictions/dense_1/kernel" in names
  assert not any(n.startswith("bert/") for n in names)
  again = checkpoints.load(back, with_heads=True)
  close(again.discriminator(again.encoder(x)["sequence_output"]), logits,
        x["input_mask"], "electra rewritten")


def test_electra_tf1_config_file_and_its_gelu(tmp_path):
  """A google-research style bert_config.json (its "gelu" is ELECTRA's
  exact one) gives the heads the shapes cannot; a wrong head count is a
  different model (negative control)."""
  discriminator, _ = electra_pair(hidden=32, heads=4)
  folder = electra_folder(discriminator, None, str(tmp_path / "electra"))
  c = discriminator.config
  config = dict(vocab_size=c.vocab_size, hidden_size=32, num_hidden_layers=3,
                num_attention_heads=4, intermediate_size=128,
                hidden_act="gelu", max_position_embeddings=512,
                type_vocab_size=2, embedding_size=16)
  with open(os.path.join(folder, "bert_config.json"), "w") as f:
    json.dump(config, f)
  ckpt = checkpoints.load(folder, with_heads=True)
  assert (ckpt.config.family, ckpt.config.hidden_act,
          ckpt.config.use_pooler) == ("electra", "gelu_exact", False)
  x = inputs(99)
  logits, sequence = discriminator_logits(discriminator, x)
  got = ckpt.encoder(x)["sequence_output"]
  close(got, sequence, x["input_mask"], "electra with config")
  close(ckpt.discriminator(got), logits, x["input_mask"], "electra logits")
  with open(os.path.join(folder, "bert_config.json"), "w") as f:
    json.dump(dict(config, num_attention_heads=1), f)
  wrong = checkpoints.load(folder, with_heads=True)
  assert np.abs(wrong.encoder(x)["sequence_output"] - sequence).max() > 1e-3


def test_electra_tf1_generator_alone_equals_transformers(tmp_path):
  """A file with the generator only (electra/embeddings shared, generator/,
  generator_predictions/) reads as the generator with its masked-LM head;
  ours written to tf1 keeps that layout."""
  _, generator = electra_pair(hidden=256)
  folder = electra_folder(None, generator, str(tmp_path / "gen"))
  ckpt = checkpoints.load(folder, with_heads=True)
  assert ckpt.masked_lm is not None and ckpt.discriminator is None
  assert (ckpt.config.hidden_size, ckpt.config.embedding_size) == (64, 16)
  x = inputs(99)
  with torch.no_grad():
    expected = generator(**torch_inputs(x)).logits.numpy()
  close(ours(ckpt, x)["logits"], expected, x["input_mask"], "generator")
  back = checkpoints.save(ckpt, str(tmp_path / "back"), format="tf1")
  names = {n for n, _ in tf.train.list_variables(
      os.path.join(back, "bert_model.ckpt"))}
  assert {"generator/embeddings_project/kernel",
          "generator_predictions/output_bias",
          "electra/embeddings/word_embeddings"} <= names
  close(ours(checkpoints.load(back, with_heads=True), x)["logits"], expected,
        x["input_mask"], "generator rewritten")


def test_electra_tf1_generator_picked_by_its_config(tmp_path):
  """From a file holding both networks, a bert_config.json of the
  generator's width reads the generator (with its masked-LM head); the
  discriminator is named as ignored."""
  discriminator, generator = electra_pair()
  folder = electra_folder(discriminator, generator, str(tmp_path / "both"))
  c = generator.config
  with open(os.path.join(folder, "bert_config.json"), "w") as f:
    json.dump(dict(vocab_size=99, hidden_size=c.hidden_size,
                   num_hidden_layers=3, num_attention_heads=1,
                   intermediate_size=c.intermediate_size, hidden_act="gelu",
                   max_position_embeddings=512, type_vocab_size=2,
                   embedding_size=16), f)
  ckpt = checkpoints.load(folder, with_heads=True)
  assert ckpt.masked_lm is not None and ckpt.discriminator is None
  assert ckpt.config.hidden_size == 16
  assert "other_network/electra/encoder/layer_0/output/dense/kernel" in \
      ckpt.ignored_variables
  x = inputs(99)
  with torch.no_grad():
    expected = generator(**torch_inputs(x)).logits.numpy()
  close(ours(ckpt, x)["logits"], expected, x["input_mask"], "generator")


def test_electra_tf1_errors(tmp_path):
  discriminator, generator = electra_pair()
  folder = electra_folder(discriminator, generator, str(tmp_path / "e"))
  prefix = os.path.join(folder, "electra_small")
  arrays = {n: tf.train.load_variable(prefix, n)
            for n, _ in tf.train.list_variables(prefix) if n != "global_step"}
  gone = "electra/encoder/layer_2/attention/self/value/bias"
  bad = str(tmp_path / "bad")
  os.makedirs(bad)
  write_tf1({n: v for n, v in arrays.items() if n != gone},
            os.path.join(bad, "electra_small"))
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(bad)
  one_line(e, os.path.join(bad, "electra_small"),
           "bert/encoder/layer_2/attention/self/value/bias")
  # Both heads on one encoder have no google-research ELECTRA names.
  ckpt = checkpoints.load(folder, with_heads=True)
  ckpt.masked_lm, _ = checkpoints.build_pretraining_heads(
      ckpt.encoder, next_sentence=False)
  with pytest.raises(CheckpointError) as e:
    checkpoints.save(ckpt, str(tmp_path / "both"), format="tf1")
  one_line(e, "generator")
  assert not (tmp_path / "both").exists()


# ------------------------------------------------------ Model Garden ALBERT
MG_ALBERT = dict(vocab_size=99, embedding_width=16, hidden_size=32,
                 num_layers=3, num_attention_heads=4, max_sequence_length=24,
                 type_vocab_size=2, intermediate_size=37)


def model_garden_albert(seed=0, vocab_size=99):
  """Model Garden's own AlbertEncoder, built, with random weights (biases
  and LayerNorms off 0 and 1, kernels at 4x their initial scale)."""
  import tensorflow_models as tfm  # pylint: disable=g-import-not-at-top
  encoder = tfm.nlp.networks.AlbertEncoder(
      **dict(MG_ALBERT, vocab_size=vocab_size), dict_outputs=True)
  rng = np.random.RandomState(seed)
  # The three embedding tables come first (word, position, type).
  encoder.set_weights([
      w + rng.normal(0, 0.1, w.shape) if w.ndim == 1 else
      w * (1.0 if i < 3 else 4.0)
      for i, w in enumerate(encoder.get_weights())])
  return encoder


def model_garden_outputs(encoder, x):
  out = encoder([x["input_word_ids"], x["input_mask"], x["input_type_ids"]],
                training=False)
  return {k: (np.stack([t.numpy() for t in v]) if isinstance(v, list)
              else v.numpy()) for k, v in out.items()}


def our_encoder_outputs(ckpt, x):
  out = ckpt.encoder(x, training=False)
  return dict(sequence_output=out["sequence_output"].numpy(),
              pooled_output=out["pooled_output"].numpy(),
              encoder_outputs=np.stack([t.numpy()
                                        for t in out["encoder_outputs"]]))


def check_against_model_garden(ckpt, encoder, x, what):
  expected = model_garden_outputs(encoder, x)
  got = our_encoder_outputs(ckpt, x)
  mask = x["input_mask"].astype(bool)
  close(got["sequence_output"], expected["sequence_output"], mask, what)
  close(got["pooled_output"], expected["pooled_output"], None, what)
  close(got["encoder_outputs"][:, mask], expected["encoder_outputs"][:, mask],
        None, what)
  return expected


def mg_albert_config(**overrides):
  d = dict(vocab_size=99, embedding_size=16, hidden_size=32,
           num_hidden_layers=3, num_hidden_groups=1, num_attention_heads=4,
           intermediate_size=37, hidden_act="gelu", max_position_embeddings=24,
           type_vocab_size=2, hidden_dropout_prob=0.0,
           attention_probs_dropout_prob=0.0)
  d.update(overrides)
  return d


def test_model_garden_albert_encoder_both_ways(tmp_path):
  """tf.train.Checkpoint(encoder=AlbertEncoder) reads as the AlbertEncoder
  computes; ours written as "model_garden" restores into a fresh
  AlbertEncoder (every value consumed) that computes the same."""
  encoder = model_garden_albert()
  folder = str(tmp_path / "albert_mg")
  tf.train.Checkpoint(encoder=encoder).write(
      os.path.join(folder, "bert_model.ckpt"))
  with open(os.path.join(folder, "albert_config.json"), "w") as f:
    json.dump(mg_albert_config(), f)
  assert checkpoints.detect_format(folder) == "model_garden"
  ckpt = checkpoints.load(folder)
  assert (ckpt.config.family, ckpt.config.num_hidden_groups) == ("albert", 1)
  x = inputs(99)
  expected = check_against_model_garden(ckpt, encoder, x, "model garden read")
  # Negative control: a block's two LayerNorms swapped miss the bound.
  block = ckpt.encoder.transformer_layers[0]
  first = block.attention_layer_norm.get_weights()
  block.attention_layer_norm.set_weights(block.output_layer_norm.get_weights())
  block.output_layer_norm.set_weights(first)
  assert np.abs(our_encoder_outputs(ckpt, x)["sequence_output"]
                - expected["sequence_output"]).max() > 1e-3
  # Ours -> Model Garden.
  ckpt = checkpoints.load(folder)
  out = checkpoints.save(ckpt, str(tmp_path / "out"), format="model_garden")
  fresh = model_garden_albert(seed=1)
  tf.train.Checkpoint(encoder=fresh).read(
      os.path.join(out, "bert_model.ckpt")).assert_consumed()
  check_against_model_garden(ckpt, fresh, x, "model garden written")
  # Model Garden's EncoderConfig spelling of the config reads the same.
  os.remove(os.path.join(out, "albert_config.json"))
  with open(os.path.join(out, "bert_config.json"), "w") as f:
    json.dump(dict(type="albert", albert=dict(
        vocab_size=99, embedding_width=16, hidden_size=32, num_layers=3,
        num_attention_heads=4, intermediate_size=37,
        hidden_activation="gelu", max_position_embeddings=24,
        type_vocab_size=2, dropout_rate=0.0, attention_dropout_rate=0.0)), f)
  again = checkpoints.load(out)
  assert again.config == ckpt.config
  check_against_model_garden(again, encoder, x, "model garden config")


def test_model_garden_albert_errors(tmp_path):
  encoder = model_garden_albert()
  folder = str(tmp_path / "albert_mg")
  tf.train.Checkpoint(encoder=encoder).write(
      os.path.join(folder, "bert_model.ckpt"))
  # A BERT config for ALBERT weights: three blocks expected, one found.
  with open(os.path.join(folder, "bert_config.json"), "w") as f:
    json.dump({k: v for k, v in mg_albert_config().items()
               if k != "num_hidden_groups"}, f)
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.load(folder)
  one_line(e, os.path.join(folder, "bert_model.ckpt"), "bert_config.json",
           "bert/encoder/layer_1/")
  # ALBERT with two groups has no AlbertEncoder.
  ckpt = checkpoints.load(albert_folder(albert_model(3), str(tmp_path / "g3")))
  with pytest.raises(CheckpointError) as e:
    checkpoints.save(ckpt, str(tmp_path / "mg3"), format="model_garden")
  one_line(e, "AlbertEncoder", "num_hidden_groups=3")
  assert not (tmp_path / "mg3").exists()


# ----------------------------------------------------- TF Hub ALBERT encoder
@pytest.mark.parametrize("with_mlm", [False, True])
def test_tfhub_albert_encoder_equals_the_saved_model(tmp_path, with_mlm):
  """A TF Hub ALBERT encoder made by Model Garden's own export library
  (export_tfhub_lib, as albert_en_base was) from an AlbertEncoder
  checkpoint, with its SentencePiece asset: read by name (the layer count
  from its Keras metadata), it computes what the SavedModel computes."""
  from bert import testing  # pylint: disable=g-import-not-at-top
  from official.nlp.configs import encoders  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import export_tfhub_lib  # pylint: disable=g-import-not-at-top
  vocab = testing.train_sentencepiece_vocab(
      str(tmp_path / "spm"), testing.shared_data(
          "corpus", "wikitext-2", "wiki.valid.tokens"), vocab_size=300)
  encoder_config = encoders.EncoderConfig(
      type="albert", albert=encoders.AlbertEncoderConfig(
          vocab_size=300, embedding_width=16, hidden_size=32, num_layers=3,
          num_attention_heads=4, intermediate_size=37,
          max_position_embeddings=24, type_vocab_size=2, dropout_rate=0.0,
          attention_dropout_rate=0.0))
  encoder = model_garden_albert(vocab_size=300)
  objects = dict(encoder=encoder)
  if with_mlm:
    # A pre-training checkpoint: the encoder and its masked-LM head.
    from official.nlp.modeling import models  # pylint: disable=g-import-not-at-top
    pretrainer = models.BertPretrainerV2(encoder_network=encoder)
    pretrainer(dict(inputs(300), masked_lm_positions=np.array(
        [[1, 2]] * 3, np.int32)))
    for v in pretrainer.masked_lm.trainable_variables:
      v.assign_add(np.random.RandomState(1).normal(0, 0.1, v.shape))
    objects = pretrainer.checkpoint_items
  # save(), not write(): the exporter expects the save counter too.
  prefix = tf.train.Checkpoint(**objects).save(str(tmp_path / "mg" / "ckpt"))
  folder = str(tmp_path / "albert_en_tiny")
  export_tfhub_lib.export_model(
      folder, encoder_config=encoder_config, model_checkpoint_path=prefix,
      with_mlm=with_mlm, sp_model_file=os.path.join(vocab, "spiece.model"))
  assert checkpoints.detect_format(folder) == "tfhub"
  ckpt = checkpoints.load(folder, with_heads=True)
  assert (ckpt.masked_lm is not None) == with_mlm
  c = ckpt.config
  assert (c.family, c.num_hidden_layers, c.num_hidden_groups,
          c.embedding_size, c.num_attention_heads, c.hidden_act) == (
              "albert", 3, 1, 16, 4, "gelu")
  assert ckpt.vocab_file.endswith(".model")
  assert ckpt.lower_case is True      # every public ALBERT lower-cases
  x = inputs(300)
  hub = tf.saved_model.load(folder)
  expected = hub(x, training=False)
  got = our_encoder_outputs(ckpt, x)
  close(got["sequence_output"], expected["sequence_output"], x["input_mask"],
        "tfhub albert")
  close(got["pooled_output"], expected["pooled_output"], None, "tfhub albert")
  if with_mlm:
    positions = np.array([[1, 8], [2, 1], [3, 0]], np.int32)
    mlm = hub.mlm(dict(**x, masked_lm_positions=positions), training=False)
    close(ckpt.masked_lm(ckpt.encoder(x)["sequence_output"], positions),
          mlm["mlm_logits"], None, "tfhub albert mlm")
  # Negative control: the shared block run once (one layer) is another model.
  import dataclasses  # pylint: disable=g-import-not-at-top
  from bert.networks.bert_encoder import BertEncoder  # pylint: disable=g-import-not-at-top
  once = BertEncoder(dataclasses.replace(c, num_hidden_layers=1))
  once(x)
  once.set_weights(ckpt.encoder.get_weights())
  assert np.abs(once(x)["sequence_output"].numpy()
                - expected["sequence_output"].numpy()).max() > 1e-3
  # Without the Keras metadata the layer count is unknown: one line.
  os.remove(os.path.join(folder, "keras_metadata.pb"))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(folder)
  one_line(e, folder, "keras_metadata.pb", "AlbertEncoder")


# ------------------------------------------------------------- bert-convert
def convert(source, out, to):
  """`bert-convert` of this checkout (its scripts/convert.py run as the
  console script runs it), which must succeed; its CompletedProcess."""
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, "scripts", "convert.py"),
       f"--input={source}", f"--output={out}", f"--to={to}"],
      capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  return result


def test_bert_convert_albert_tf1_to_hf(tmp_path):
  """`bert-convert` on a google-research ALBERT folder (with its
  SentencePiece 30k-clean.model) writes a Hugging Face folder that
  transformers' AlbertForPreTraining reads and that computes what the
  original computes, heads included."""
  from bert import testing  # pylint: disable=g-import-not-at-top
  vocab = testing.train_sentencepiece_vocab(
      str(tmp_path / "spm"), testing.shared_data(
          "corpus", "wikitext-2", "wiki.valid.tokens"), vocab_size=300)
  model = albert_model(1, vocab_size=300)
  folder = albert_folder(model, str(tmp_path / "albert_base_v2"))
  os.link(os.path.join(vocab, "spiece.model"),
          os.path.join(folder, "30k-clean.model"))
  out = str(tmp_path / "albert_hf")
  result = convert(folder, out, "hf")
  assert "(tf1)" in result.stdout and "heads yes" in result.stdout
  assert "lower_case True" in result.stdout
  again = transformers.AlbertForPreTraining.from_pretrained(out).eval()
  tokenizer = transformers.AlbertTokenizer.from_pretrained(out)
  assert len(tokenizer) == 300 and tokenizer.do_lower_case
  x = inputs(300)
  expected = albert_reference(model, x)
  got = albert_reference(again, x)
  for key, value in expected.items():
    close(got[key], value, x["input_mask"] if key in (
        "sequence_output", "logits") else None, f"converted {key}")


# ------------------------------------------------- Model Garden ELECTRA
def model_garden_electra():
  """Model Garden's own ElectraPretrainer (a generator and a discriminator
  BertEncoder, the discriminator's head), called once, random weights."""
  from official.modeling import tf_utils  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import models, networks  # pylint: disable=g-import-not-at-top

  def encoder(hidden, layers):
    return networks.BertEncoder(
        vocab_size=99, hidden_size=hidden, num_layers=layers,
        num_attention_heads=2, intermediate_size=4 * hidden,
        max_sequence_length=24, type_vocab_size=2, embedding_width=16,
        dict_outputs=True)

  pretrainer = models.ElectraPretrainer(
      generator_network=encoder(8, 1), discriminator_network=encoder(32, 2),
      vocab_size=99, num_classes=2, num_token_predictions=3,
      mlm_activation=tf_utils.get_activation("gelu"))
  positions = np.array([[1, 2, 3]] * 3, np.int32)
  pretrainer(dict(inputs(99), masked_lm_positions=positions,
                  masked_lm_ids=positions + 4,
                  masked_lm_weights=np.ones((3, 3), np.float32)))
  rng = np.random.RandomState(0)
  for v in pretrainer.trainable_variables:
    if v.shape.rank == 1:
      v.assign_add(rng.normal(0, 0.1, v.shape))
    elif "embeddings" not in v.name:
      v.assign(v * 4.0)
  return pretrainer


def test_model_garden_electra_pretrainer(tmp_path):
  """An ElectraPretrainer training checkpoint reads as its discriminator
  (with the discriminator's head), the generator named as ignored; its
  exported form (`checkpoint_items`: the discriminator encoder) as the
  encoder alone."""
  pretrainer = model_garden_electra()
  config = dict(family="electra", use_pooler=True, vocab_size=99,
                embedding_size=16, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=128,
                hidden_act="gelu", max_position_embeddings=24,
                type_vocab_size=2)
  x = inputs(99)
  network = pretrainer.discriminator_network
  expected = model_garden_outputs(network, x)
  logits = tf.squeeze(pretrainer.discriminator_head(
      pretrainer.discriminator_projection(expected["sequence_output"])), -1)
  for name, objects in (("run", dict(model=pretrainer)),
                        ("exported", pretrainer.checkpoint_items)):
    folder = str(tmp_path / name)
    tf.train.Checkpoint(**objects).write(os.path.join(folder, "ckpt"))
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
      json.dump(config, f)
    assert checkpoints.detect_format(folder) == "model_garden"
    ckpt = checkpoints.load(folder, with_heads=True)
    check_against_model_garden(ckpt, network, x, f"electra {name}")
    if name == "run":
      assert ckpt.discriminator is not None
      close(ckpt.discriminator(ckpt.encoder(x)["sequence_output"]), logits,
            x["input_mask"], "electra discriminator head")
      assert any(n.startswith("other_network/model/generator_network/")
                 for n in ckpt.ignored_variables)
      assert any(n.startswith("other_network/model/masked_lm/")
                 for n in ckpt.ignored_variables)
    else:
      assert ckpt.discriminator is None
      assert ckpt.ignored_variables == ["_CHECKPOINTABLE_OBJECT_GRAPH"]
  # Negative control: the discriminator's two dense layers confused.
  ckpt = checkpoints.load(str(tmp_path / "run"), with_heads=True)
  head = ckpt.discriminator
  kernel = head.dense.kernel.numpy()
  head.dense.kernel.assign(kernel.T)
  assert np.abs(head(ckpt.encoder(x)["sequence_output"]) - logits).max() > 1e-3


def test_bert_convert_electra_generator_keeps_its_masked_lm_head(tmp_path):
  """A google-research ELECTRA generator converts to a Hugging Face
  ElectraForMaskedLM with its masked-LM head (ELECTRA has no sentence head;
  only BERT's masked-LM head is dropped without its partner)."""
  _, generator = electra_pair(hidden=256)
  folder = electra_folder(None, generator, str(tmp_path / "gen"))
  out = str(tmp_path / "gen_hf")
  result = convert(folder, out, "hf")
  assert "encoder only" not in result.stdout
  again = transformers.ElectraForMaskedLM.from_pretrained(out).eval()
  x = inputs(99)
  with torch.no_grad():
    expected = generator(**torch_inputs(x)).logits.numpy()
    got = again(**torch_inputs(x)).logits.numpy()
  close(got, expected, x["input_mask"], "converted generator")


def test_tf1_hub_module_variables_read_as_tf1(tmp_path):
  """A TF1 Hub ALBERT module (`hub.Module` format) is refused by name as a
  SavedModel; its variables, named under `module/`, read as google-research
  TF1 beside an albert_config.json."""
  model = albert_model(1)
  module = str(tmp_path / "albert_base_module")
  os.makedirs(os.path.join(module, "variables"))
  arrays = google_names(model.state_dict(), ALBERT_NAMES,
                        skip=(r"^predictions\.", r"^sop_classifier\."))
  write_tf1({"module/" + n: v for n, v in arrays.items()},
            os.path.join(module, "variables", "variables"))
  for name in ("saved_model.pb", "tfhub_module.pb"):
    with open(os.path.join(module, name), "wb") as f:
      f.write(b"")
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(module)
  one_line(e, module, "tfhub_module.pb", "albert_config.json")
  folder = str(tmp_path / "as_tf1")
  os.makedirs(folder)
  for f in os.listdir(os.path.join(module, "variables")):
    os.link(os.path.join(module, "variables", f), os.path.join(folder, f))
  with open(os.path.join(folder, "albert_config.json"), "w") as f:
    json.dump(albert_config_json(model), f)
  ckpt = checkpoints.load(folder)
  x = inputs(99)
  expected = albert_reference(model, x)
  got = ours(ckpt, x)
  for key in ("sequence_output", "pooled_output"):
    close(got[key], expected[key], x["input_mask"] if key == "sequence_output"
          else None, f"hub module {key}")
