"""Round trips between formats, strictness and bad input for bert.checkpoints."""

import glob
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_models as tfm
import tf_keras
import torch
import transformers

from bert import BertEncoder, checkpoints
from bert.checkpoints import mapping
from bert.checkpoints import tf1 as tf1_format
from conftest import (max_abs_diff, minilm_dir, one_line, random_inputs,
                      small_config)

POSITIONS = np.array([[1, 3, 0], [2, 5, 4]], np.int32)


def randomise(weights, seed=0):
  rng = np.random.RandomState(seed)
  for w in weights:
    w.assign(0.05 * rng.randn(*w.shape) + (1.0 if "gamma" in w.name else 0.0))


def with_heads(config, seed=0):
  """A random encoder with random pre-training heads, as a BertCheckpoint."""
  encoder = BertEncoder(config)
  masked_lm, next_sentence = checkpoints.build_pretraining_heads(encoder)
  randomise(encoder.weights + masked_lm.weights + next_sentence.weights, seed)
  return checkpoints.BertCheckpoint(config=config, encoder=encoder,
                                    masked_lm=masked_lm,
                                    next_sentence=next_sentence)


def outputs(ckpt, inputs):
  out = ckpt.encoder(inputs, training=False)
  result = dict(sequence_output=out["sequence_output"].numpy(),
                pooled_output=out["pooled_output"].numpy())
  if ckpt.masked_lm is not None:
    result["mlm"] = ckpt.masked_lm(out["sequence_output"], POSITIONS).numpy()
    result["nsp"] = ckpt.next_sentence(out["pooled_output"]).numpy()
  return result


def assert_same(a, b, tol=1e-5):
  assert sorted(a) == sorted(b)
  for k in a:
    assert max_abs_diff(a[k], b[k]) <= tol, k


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_vocab(path, size):
  tokens = SPECIALS + [f"[unused{i}]" for i in range(size - len(SPECIALS))]
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in tokens))
  return path


# ------------------------------------------------------------ round trips
def test_ours_tf1_ours_with_heads(tmp_path):
  config = small_config()
  src = with_heads(config)
  inputs = random_inputs(2, 9)
  expected = outputs(src, inputs)
  checkpoints.save(src, str(tmp_path / "tf1"), format="tf1")
  assert checkpoints.detect_format(str(tmp_path / "tf1")) == "tf1"
  loaded = checkpoints.load(str(tmp_path / "tf1"), with_heads=True)
  assert loaded.has_heads and loaded.config == config
  assert_same(expected, outputs(loaded, inputs), tol=0.0)
  # The heads are tied to the loaded encoder's embedding table.
  assert loaded.masked_lm.embedding_table is loaded.encoder.get_embedding_table()
  # Without heads they are left out, and said to be.
  plain = checkpoints.load(str(tmp_path / "tf1"))
  assert plain.masked_lm is None
  assert "cls/predictions/output_bias" in plain.ignored_variables


def test_ours_tf2_ours_with_heads(tmp_path):
  config = small_config(embedding_size=32, norm_first=True)
  src = with_heads(config, seed=1)
  inputs = random_inputs(2, 7)
  checkpoints.save(src, str(tmp_path / "tf2"), format="tf2",
                   lower_case=False)
  loaded = checkpoints.load(str(tmp_path / "tf2"), with_heads=True)
  assert loaded.format == "tf2" and loaded.lower_case is False
  assert_same(outputs(src, inputs), outputs(loaded, inputs), tol=0.0)
  assert checkpoints.load(str(tmp_path / "tf2")).masked_lm is None


def test_tf1_written_by_tf1_saver_loads(tmp_path):
  """A checkpoint written the google-research way: tf.compat.v1 variables
  with the original names, saved by tf.compat.v1.train.Saver."""
  config = small_config()
  src = with_heads(config, seed=2)
  arrays = mapping.to_tf1(src.encoder, src.masked_lm, src.next_sentence)
  arrays["global_step"] = np.array(1000, np.int64)
  arrays["bert/embeddings/word_embeddings/adam_m"] = np.zeros(
      arrays["bert/embeddings/word_embeddings"].shape, np.float32)
  folder = tmp_path / "uncased_L-2_H-64_A-4"
  folder.mkdir()
  with tf.Graph().as_default():
    variables = [tf.compat.v1.get_variable(name, initializer=tf.constant(value))
                 for name, value in arrays.items()]
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, str(folder / "bert_model.ckpt"), write_meta_graph=True)
  config.to_json_file(str(folder / "bert_config.json"))
  loaded = checkpoints.load(str(folder), with_heads=True)
  assert loaded.lower_case is True            # from the folder name
  assert set(loaded.ignored_variables) == {
      "global_step", "bert/embeddings/word_embeddings/adam_m"}
  inputs = random_inputs(2, 8)
  assert_same(outputs(src, inputs), outputs(loaded, inputs), tol=0.0)


def test_hf_ours_hf_loaded_by_transformers(tmp_path):
  hf_model = transformers.BertModel.from_pretrained(minilm_dir()).eval()
  ours = checkpoints.load(minilm_dir())
  checkpoints.save(ours, str(tmp_path / "hf"), format="hf")
  back = transformers.BertModel.from_pretrained(str(tmp_path / "hf")).eval()
  inputs = random_inputs(3, 12, vocab_size=30522)
  with torch.no_grad():
    args = dict(input_ids=torch.tensor(inputs["input_word_ids"].numpy(), dtype=torch.long),
                attention_mask=torch.tensor(inputs["input_mask"].numpy(), dtype=torch.long),
                token_type_ids=torch.tensor(inputs["input_type_ids"].numpy(), dtype=torch.long))
    a, b = hf_model(**args), back(**args)
  assert max_abs_diff(a.last_hidden_state, b.last_hidden_state) <= 1e-5
  assert max_abs_diff(a.pooler_output, b.pooler_output) <= 1e-5
  with open(tmp_path / "hf" / "config.json") as f:
    assert json.load(f)["hidden_act"] == "gelu"      # exact GELU kept
  assert checkpoints.load(str(tmp_path / "hf")).lower_case is True


def test_hf_pretraining_heads_round_trip(tmp_path):
  hf_config = transformers.BertConfig(
      vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=64, max_position_embeddings=40)
  torch.manual_seed(0)
  hf_model = transformers.BertForPreTraining(hf_config).eval()
  with torch.no_grad():  # random biases and LayerNorms too, not HF's 0 / 1
    for p in hf_model.parameters():
      p.add_(0.05 * torch.randn_like(p))
  hf_model.save_pretrained(str(tmp_path / "src"), safe_serialization=True)
  ours = checkpoints.load(str(tmp_path / "src"), with_heads=True)
  assert ours.has_heads
  inputs = random_inputs(2, 9, vocab_size=99)
  args = dict(input_ids=torch.tensor(inputs["input_word_ids"].numpy(), dtype=torch.long),
              attention_mask=torch.tensor(inputs["input_mask"].numpy(), dtype=torch.long),
              token_type_ids=torch.tensor(inputs["input_type_ids"].numpy(), dtype=torch.long))
  with torch.no_grad():
    ref = hf_model(**args)
  got = outputs(ours, inputs)
  ref_mlm = np.stack([ref.prediction_logits[i, POSITIONS[i]].numpy() for i in range(2)])
  assert max_abs_diff(got["mlm"], ref_mlm) <= 1e-4
  assert max_abs_diff(got["nsp"], ref.seq_relationship_logits) <= 1e-5
  # ours -> HF (with heads) -> transformers BertForPreTraining
  checkpoints.save(ours, str(tmp_path / "back"), format="hf")
  back = transformers.BertForPreTraining.from_pretrained(str(tmp_path / "back")).eval()
  with torch.no_grad():
    again = back(**args)
  assert max_abs_diff(again.prediction_logits, ref.prediction_logits) <= 1e-5
  assert max_abs_diff(again.seq_relationship_logits, ref.seq_relationship_logits) <= 1e-5
  # HF (with heads) -> TF1 -> ours keeps the heads too.
  checkpoints.save(ours, str(tmp_path / "tf1"), format="tf1")
  via_tf1 = checkpoints.load(str(tmp_path / "tf1"), with_heads=True)
  assert_same(got, outputs(via_tf1, inputs), tol=0.0)


def test_hf_tf1_ours(tmp_path):
  hf_loaded = checkpoints.load(minilm_dir())
  checkpoints.save(hf_loaded, str(tmp_path / "tf1"), format="tf1")
  loaded = checkpoints.load(str(tmp_path / "tf1"))
  assert loaded.config == hf_loaded.config and loaded.lower_case is True
  inputs = random_inputs(2, 10, vocab_size=30522)
  assert_same(outputs(hf_loaded, inputs), outputs(loaded, inputs), tol=0.0)


def tfm_encoder(config, v2=False):
  kwargs = dict(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size,
      inner_activation=lambda x: tf.nn.gelu(x, approximate=True),
      embedding_width=config.embedding_size,
      initializer=tf_keras.initializers.TruncatedNormal(stddev=0.1))
  if v2:
    return tfm.nlp.networks.BertEncoderV2(**kwargs)
  return tfm.nlp.networks.BertEncoder(dict_outputs=True, **kwargs)


@pytest.mark.parametrize("v2,embedding_size", [(False, None), (False, 24),
                                               (True, None)])
def test_model_garden_tf2_to_ours(tmp_path, v2, embedding_size):
  config = small_config(embedding_size=embedding_size)
  theirs = tfm_encoder(config, v2=v2)
  inputs = random_inputs(2, 11)
  if v2:
    theirs(inputs)  # a Layer: builds its weights on first call
  # Every weight random (biases and LayerNorms too), so each one's mapping
  # and reshape is checked.
  randomise(theirs.weights, 3)
  expected = (theirs(inputs, training=False) if v2 else
              theirs([inputs["input_word_ids"], inputs["input_mask"],
                      inputs["input_type_ids"]], training=False))
  tf.train.Checkpoint(encoder=theirs).write(str(tmp_path / "bert_model.ckpt"))
  config.to_json_file(str(tmp_path / "bert_config.json"))
  assert checkpoints.detect_format(str(tmp_path)) == "model_garden"
  loaded = checkpoints.load(str(tmp_path))
  out = loaded.encoder(inputs, training=False)
  assert max_abs_diff(out["sequence_output"], expected["sequence_output"]) <= 1e-5
  assert max_abs_diff(out["pooled_output"], expected["pooled_output"]) <= 1e-5
  if not v2:
    # Older functional checkpoints reach the weights only by the layer list
    # (`layer_with_weights-K`, by position): the same arrays from the keys.
    from bert.checkpoints import model_garden
    prefix = str(tmp_path / "bert_model.ckpt")
    arrays = tf1_format.read_arrays(prefix)
    assert all("/layer_with_weights-" in k for k in arrays if "/.ATTR" in k
               and not k.startswith("save_counter"))
    by_position = model_garden.to_tf1(arrays, None, prefix)
    by_object = model_garden.read(prefix)
    assert sorted(by_position) == sorted(by_object)
    for name, value in by_object.items():
      np.testing.assert_array_equal(by_position[name], value)


def test_model_garden_pretrainer_checkpoint(tmp_path):
  """A BertPretrainerV2 checkpoint (`checkpoint_items`) stores the shared
  word embeddings once, as `masked_lm/embedding_table`; the encoder is found
  through the object graph, and the heads are reported, not silently used."""
  config = small_config()
  theirs = tfm_encoder(config)
  pretrainer = tfm.nlp.models.BertPretrainerV2(
      encoder_network=theirs,
      classification_heads=[tfm.nlp.layers.ClassificationHead(
          inner_dim=config.hidden_size, num_classes=2, name="next_sentence")])
  inputs = random_inputs(2, 11)
  pretrainer(dict(**inputs, masked_lm_positions=tf.constant(POSITIONS)))
  randomise(pretrainer.weights, 5)
  expected = theirs([inputs["input_word_ids"], inputs["input_mask"],
                     inputs["input_type_ids"]], training=False)
  tf.train.Checkpoint(**pretrainer.checkpoint_items).write(
      str(tmp_path / "bert_model.ckpt"))
  keys = [k for k, _ in tf.train.list_variables(str(tmp_path / "bert_model.ckpt"))]
  assert not any(k.startswith("encoder/layer_with_weights-0/") for k in keys)
  assert "masked_lm/embedding_table/.ATTRIBUTES/VARIABLE_VALUE" in keys
  config.to_json_file(str(tmp_path / "bert_config.json"))
  loaded = checkpoints.load(str(tmp_path))
  out = loaded.encoder(inputs, training=False)
  assert max_abs_diff(out["sequence_output"], expected["sequence_output"]) <= 1e-5
  assert max_abs_diff(out["pooled_output"], expected["pooled_output"]) <= 1e-5
  assert "cls/predictions/transform/dense/kernel" in loaded.ignored_variables
  assert any(n.startswith("cls/model_garden/") for n in loaded.ignored_variables)
  # Model Garden's next-sentence head is not BERT's: asking for the heads is
  # a one-line error naming what is missing.
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(tmp_path), with_heads=True)
  one_line(e, "bert_model.ckpt", "cls/seq_relationship/output_weights")


@pytest.mark.parametrize("embedding_size", [None, 24])
def test_ours_to_model_garden_restored_by_tfm(tmp_path, embedding_size, caplog):
  config = small_config(embedding_size=embedding_size)
  src = with_heads(config, seed=6)
  inputs = random_inputs(2, 11)
  expected = outputs(src, inputs)
  checkpoints.save(src, str(tmp_path / "mg"), format="model_garden",
                   lower_case=True)
  assert "heads are not written" in caplog.text
  theirs = tfm_encoder(config)
  status = tf.train.Checkpoint(encoder=theirs).read(
      str(tmp_path / "mg" / "bert_model.ckpt"))
  status.assert_consumed()
  got = theirs([inputs["input_word_ids"], inputs["input_mask"],
                inputs["input_type_ids"]], training=False)
  assert max_abs_diff(got["sequence_output"], expected["sequence_output"]) <= 1e-5
  assert max_abs_diff(got["pooled_output"], expected["pooled_output"]) <= 1e-5
  back = checkpoints.load(str(tmp_path / "mg"))
  assert back.format == "model_garden" and back.lower_case is True
  assert not back.has_heads
  assert back.ignored_variables == ["_CHECKPOINTABLE_OBJECT_GRAPH"]
  assert_same({k: expected[k] for k in ("sequence_output", "pooled_output")},
              outputs(back, inputs), tol=0.0)


# ------------------------------------------------------------- bad input
@pytest.fixture
def tf1_folder(tmp_path):
  folder = tmp_path / "ckpt"
  src = with_heads(small_config(), seed=4)
  checkpoints.save(src, str(folder), format="tf1")
  return folder, src


def rewrite_tf1(folder, edit):
  prefix = str(folder / "bert_model.ckpt")
  arrays = tf1_format.read_arrays(prefix)
  edit(arrays)
  for f in glob.glob(prefix + ".*"):
    os.remove(f)
  tf1_format.write_arrays(arrays, prefix)


def test_missing_folder(tmp_path):
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.load(str(tmp_path / "nowhere"))
  one_line(e, "nowhere", "no such checkpoint folder")


def test_missing_config(tf1_folder):
  folder, _ = tf1_folder
  os.remove(folder / "bert_config.json")
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.load(str(folder))
  one_line(e, "bert_config.json", "config file not found")


def test_wrong_shape(tf1_folder):
  folder, _ = tf1_folder
  rewrite_tf1(folder, lambda a: a.update({
      "bert/encoder/layer_1/intermediate/dense/kernel": np.zeros((64, 100), np.float32)}))
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(folder))
  one_line(e, "bert/encoder/layer_1/intermediate/dense/kernel",
                 "expected shape [64, 128]", "found [64, 100]",
                 str(folder / "bert_model.ckpt"))


def test_missing_variable(tf1_folder):
  folder, _ = tf1_folder
  rewrite_tf1(folder, lambda a: a.pop("bert/encoder/layer_0/attention/self/key/bias"))
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(folder))
  one_line(e, "missing variable",
           "bert/encoder/layer_0/attention/self/key/bias")


def test_unexpected_variable(tf1_folder):
  folder, _ = tf1_folder
  rewrite_tf1(folder, lambda a: a.update(
      {"bert/encoder/layer_2/output/dense/kernel": np.zeros((128, 64), np.float32)}))
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(folder))
  one_line(e, "unexpected variable", "bert/encoder/layer_2/output/dense/kernel")


def test_vocab_size_mismatch(tf1_folder):
  folder, _ = tf1_folder
  write_vocab(folder / "vocab.txt", 99)
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(folder))
  one_line(e, "vocab.txt", "99 tokens", "vocab_size=100")
  write_vocab(folder / "vocab.txt", 100)
  assert checkpoints.load(str(folder)).vocab_file == str(folder / "vocab.txt")


class _Marker:
  """Unpickling this would create a file: proof that nothing unpickles."""

  def __init__(self, path):
    self.path = path

  def __reduce__(self):
    return (open, (self.path, "w"))


def test_pickle_is_refused_unopened(tmp_path):
  marker = tmp_path / "was_unpickled"
  with open(tmp_path / "pytorch_model.bin", "wb") as f:
    pickle.dump(_Marker(str(marker)), f)
  small_config().to_json_file(str(tmp_path / "config.json"), format="hf")
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.load(str(tmp_path))
  one_line(e, "pytorch_model.bin", "never loaded", "safetensors")
  assert not marker.exists()


def test_truncated_data_file(tf1_folder):
  folder, _ = tf1_folder
  data = glob.glob(str(folder / "bert_model.ckpt.data-*"))[0]
  size = os.path.getsize(data)
  with open(data, "r+b") as f:
    f.truncate(size // 2)
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.load(str(folder))
  one_line(e, str(folder / "bert_model.ckpt"), "truncated or corrupted")


def test_unknown_format(tmp_path):
  (tmp_path / "weights.npz").write_bytes(b"not a checkpoint")
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.load(str(tmp_path))
  one_line(e, "unknown checkpoint format", "weights.npz")


def test_interrupted_save_keeps_previous_checkpoint(tf1_folder, monkeypatch):
  folder, src = tf1_folder
  inputs = random_inputs(2, 6)
  expected = outputs(checkpoints.load(str(folder), with_heads=True), inputs)

  def crash(arrays, prefix):
    with open(prefix + ".index", "wb") as f:
      f.write(b"half")
    raise KeyboardInterrupt("killed mid-write")

  monkeypatch.setattr(tf1_format, "write_arrays", crash)
  other = with_heads(small_config(), seed=9)
  with pytest.raises(KeyboardInterrupt):
    checkpoints.save(other, str(folder), format="tf1")
  assert_same(expected, outputs(checkpoints.load(str(folder), with_heads=True),
                                inputs), tol=0.0)
  assert os.listdir(folder.parent) == [folder.name]   # no temp folders left


# -------------------------------------------------------------------- CLI
def run_cli(*args):
  exe = os.path.join(os.path.dirname(sys.executable), "bert-convert")
  return subprocess.run([exe, *args], capture_output=True, text=True,
                        timeout=300, check=False)


def test_cli_help_documents_flags():
  result = run_cli("--help")   # absl exits 1 after printing help
  for flag in ("--input", "--output", "--to", "--with_heads", "--from_format"):
    assert flag in result.stdout


def test_cli_converts_minilm_to_each_format_and_back(tmp_path):
  reference = checkpoints.load(minilm_dir())
  inputs = random_inputs(2, 8, vocab_size=30522)
  expected = outputs(reference, inputs)
  src = minilm_dir()
  # One CLI run; the rest of the chain (the same load and save) in process.
  for fmt in ("tf1", "tf2", "hf"):
    dst = str(tmp_path / fmt)
    if fmt == "tf1":
      result = run_cli(f"--input={src}", f"--output={dst}", f"--to={fmt}")
      assert result.returncode == 0, result.stderr[-2000:]
    else:
      checkpoints.save(checkpoints.load(src), dst, format=fmt)
    loaded = checkpoints.load(dst)
    assert loaded.format == fmt and loaded.lower_case is True
    assert_same(expected, outputs(loaded, inputs), tol=0.0)
    src = dst
  contradiction = run_cli(f"--input={src}", f"--output={tmp_path / 'y'}",
                          "--do_lower_case=false")
  assert contradiction.returncode != 0
  assert "contradicts the input" in contradiction.stderr
  bad = run_cli(f"--input={tmp_path / 'missing'}", f"--output={tmp_path / 'x'}")
  assert bad.returncode != 0 and "no such checkpoint folder" in bad.stderr


def test_hf_and_model_garden_mismatches_are_named(tmp_path):
  from safetensors.numpy import load_file, save_file
  src = checkpoints.load(minilm_dir())
  checkpoints.save(src, str(tmp_path / "hf"), format="hf")
  path = str(tmp_path / "hf" / "model.safetensors")
  tensors = load_file(path)
  tensors["encoder.layer.2.output.dense.weight"] = np.zeros((384, 100), np.float32)
  tensors["encoder.layer.9.output.dense.bias"] = np.zeros((384,), np.float32)
  save_file(tensors, path, metadata={"format": "pt"})
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(tmp_path / "hf"))
  one_line(e, "model.safetensors",
                 "bert/encoder/layer_2/output/dense/kernel",
                 "expected shape [1536, 384], found [100, 384]",
                 "unexpected variable(s): bert/encoder/layer_9/output/dense/bias")

  config = small_config()
  theirs = tfm_encoder(config)
  extra = tf.Variable(tf.zeros([3]))
  theirs.pooler_layer.extra = extra   # an extra tracked variable
  tf.train.Checkpoint(encoder=theirs).write(str(tmp_path / "mg" / "bert_model.ckpt"))
  config.to_json_file(str(tmp_path / "mg" / "bert_config.json"))
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(tmp_path / "mg"))
  one_line(e, "unexpected variable", "extra")


def test_tf2_mismatch_is_named(tmp_path):
  checkpoints.save(BertEncoder(small_config()), str(tmp_path / "tf2"))
  small_config(num_hidden_layers=3).to_json_file(
      str(tmp_path / "tf2" / "bert_config.json"))
  with pytest.raises(checkpoints.CheckpointMismatchError) as e:
    checkpoints.load(str(tmp_path / "tf2"))
  one_line(e, str(tmp_path / "tf2" / "ckpt"), "does not match")


def test_save_refuses_to_replace_other_folders(tmp_path):
  notes = tmp_path / "project"
  notes.mkdir()
  (notes / "my_notes.txt").write_text("keep me")
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.save(BertEncoder(small_config()), str(notes))
  one_line(e, "refusing to replace")
  assert (notes / "my_notes.txt").read_text() == "keep me"


def test_save_rejects_partial_or_untied_heads(tmp_path):
  ckpt = with_heads(small_config())
  half = checkpoints.BertCheckpoint(config=ckpt.config, encoder=ckpt.encoder,
                                    masked_lm=ckpt.masked_lm)
  with pytest.raises(checkpoints.CheckpointError, match="both pre-training heads"):
    checkpoints.save(half, str(tmp_path / "a"), format="tf1")
  from bert.layers import MaskedLMHead
  untied = MaskedLMHead(vocab_size=100)
  untied(tf.zeros([1, 1, 64]), tf.zeros([1, 1], tf.int32))
  bad = checkpoints.BertCheckpoint(config=ckpt.config, encoder=ckpt.encoder,
                                   masked_lm=untied,
                                   next_sentence=ckpt.next_sentence)
  with pytest.raises(checkpoints.CheckpointError, match="not tied"):
    checkpoints.save(bad, str(tmp_path / "b"), format="tf1")
  assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_blank_line_in_vocab_is_refused_with_its_line(tf1_folder):
  """A blank line keeps the line count (so the size check passes) but gives
  the id of the token meant there to "": the word then tokenizes into pieces.
  The loader names the file and line instead."""
  folder, _ = tf1_folder
  write_vocab(folder / "vocab.txt", 100)
  assert checkpoints.load(str(folder)).vocab_file      # control: loads
  lines = (folder / "vocab.txt").read_text().splitlines()
  lines[7] = ""
  (folder / "vocab.txt").write_text("\n".join(lines) + "\n")
  assert len(lines) == 100                             # the size still matches
  with pytest.raises(checkpoints.CheckpointError) as e:
    checkpoints.load(str(folder))
  one_line(e, "vocab.txt:8", "blank line")


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_vocab_symlink_that_leads_nowhere_is_refused(tf1_folder, kind):
  """A vocab.txt symlink is followed; one that leads nowhere is an error
  naming it, not a checkpoint without a vocab."""
  folder, _ = tf1_folder
  real = write_vocab(folder / "real_vocab.txt", 100)
  link = folder / "vocab.txt"
  if link.exists() or link.is_symlink():
    link.unlink()
  link.symlink_to(real)
  assert checkpoints.load(str(folder)).vocab_file == str(link)   # followed
  link.unlink()
  if kind == "dangling":
    link.symlink_to(folder / "gone.txt")
  else:
    link.symlink_to(folder / "vocab.txt")
  with pytest.raises(FileNotFoundError) as e:
    checkpoints.load(str(folder))
  one_line(e, "vocab.txt", "gone.txt" if kind == "dangling"
                 else "symlink loop")
  link.unlink()


@pytest.mark.parametrize("fmt", ["hf", "tf1", "tf2"])
def test_saved_files_have_the_mode_of_a_plain_write(tmp_path, fmt):
  """safetensors writes through a private temp file (0600); every file of a
  saved checkpoint gets the mode its siblings have (0666 & ~umask)."""
  umask = os.umask(0o022)
  try:
    folder = tmp_path / fmt
    checkpoints.save(with_heads(small_config(), seed=1), str(folder), format=fmt)
    modes = {f: oct(os.stat(folder / f).st_mode & 0o777)
             for f in os.listdir(folder) if os.path.isfile(folder / f)}
  finally:
    os.umask(umask)
  assert modes and set(modes.values()) == {"0o644"}, modes
