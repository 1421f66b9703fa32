"""A `bert-train` run folder is a checkpoint: `checkpoints.load` rebuilds the
run's model from its operative_config.gin, restores the newest checkpoint and
gives the encoder (and a pre-training run's heads) to fine-tuning, conversion
and distillation."""

import glob
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert import checkpoints
from bert.checkpoints import CheckpointError
from bert.checkpoints.initialize import init_from_checkpoint
from bert.networks.bert_encoder import BertEncoder
from conftest import (PRETRAIN_PRED, PRETRAIN_SEQ, tiny_pretraining_config,
                      vocab, write_run)

VOCAB = vocab()


def _pretraining_run(folder, records):
  config = tiny_pretraining_config().to_dict()
  return write_run(folder, [
      "build_task.task_class = @PretrainingTask",
      f"EncoderSource.bert_config = {config!r}",
      f"EncoderSource.vocab_file = '{VOCAB}'",
      f"PretrainingInputs.train_files = '{records}'",
      f"PretrainingInputs.seq_length = {PRETRAIN_SEQ}",
      f"PretrainingInputs.max_predictions_per_seq = {PRETRAIN_PRED}"])


def _saved(run, prefix):
  """Sorted (shape, sum) of the checkpoint's values under `prefix`: each
  randomly initialised weight has its own sum."""
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(run))
  return sorted((tuple(shape), round(float(reader.get_tensor(k).sum()), 3))
                for k, shape in reader.get_variable_to_shape_map().items()
                if k.startswith(prefix))


def _values(weights):
  return sorted((tuple(w.shape), round(float(np.sum(w.numpy())), 3))
                for w in weights)


@pytest.fixture
def pretraining_run(tmp_path, pretraining_records):
  """A pre-training run whose data is gone since (copied, then deleted)."""
  data = tmp_path / "data"
  data.mkdir()
  for f in glob.glob(pretraining_records):
    shutil.copy(f, data)
  run = _pretraining_run(str(tmp_path / "run"), str(data / "*.tfrecord"))
  shutil.rmtree(data)
  return run


def test_a_pretraining_run_loads_as_encoder_and_heads(pretraining_run):
  ckpt = checkpoints.load(pretraining_run, with_heads=True)
  assert ckpt.format == checkpoints.detect_format(pretraining_run) == "run"
  assert ckpt.config.to_dict() == tiny_pretraining_config().to_dict()
  assert ckpt.vocab_file == VOCAB and ckpt.lower_case is None
  assert ckpt.has_heads and ckpt.ignored_variables == []
  # The run's own weights: the encoder's (the word table included, which the
  # masked-LM head shares) and the heads'.
  assert _values(ckpt.encoder.weights) == _saved(pretraining_run, "model/encoder/")
  head_weights = ckpt.masked_lm.weights + ckpt.next_sentence.weights
  heads_only = [w for w in head_weights
                if all(w is not e for e in ckpt.encoder.weights)]
  assert _values(heads_only) == sorted(
      _saved(pretraining_run, "model/masked_lm/")
      + _saved(pretraining_run, "model/next_sentence/"))
  # Negative control: a freshly initialised encoder of the same config differs.
  assert _values(BertEncoder(ckpt.config).weights) != _values(ckpt.encoder.weights)

  # Without heads: the encoder alone, the heads named as ignored.
  bare = checkpoints.load(pretraining_run)
  assert bare.masked_lm is None and bare.next_sentence is None
  assert bare.ignored_variables and all(
      n.startswith(("masked_lm/", "next_sentence/")) for n in bare.ignored_variables)


def test_a_model_starts_from_a_run(pretraining_run):
  """`init_from_checkpoint` reads a run folder (a task reads one with
  `checkpoints.read`: tests/tasks/distillation_test.py)."""
  encoder = BertEncoder(tiny_pretraining_config())
  init_from_checkpoint(encoder, pretraining_run)
  assert _values(encoder.weights) == _saved(pretraining_run, "model/encoder/")


def test_a_run_whose_checkpoint_is_not_its_model_is_refused(pretraining_run):
  config_file = os.path.join(pretraining_run, "operative_config.gin")
  text = open(config_file, encoding="utf-8").read()
  size = tiny_pretraining_config().intermediate_size
  assert f"'intermediate_size': {size}" in text
  with open(config_file, "w", encoding="utf-8") as f:
    f.write(text.replace(f"'intermediate_size': {size}",
                         f"'intermediate_size': {size * 2}"))
  with pytest.raises(CheckpointError) as e:
    checkpoints.load(pretraining_run)
  message = str(e.value)
  assert "\n" not in message and tf.train.latest_checkpoint(pretraining_run) in message


def test_a_folder_without_a_checkpoint_is_a_clear_error(tmp_path):
  folder = tmp_path / "run"
  folder.mkdir()
  (folder / "operative_config.gin").write_text(
      "build_task.task_class = @PretrainingTask\n")
  with pytest.raises(CheckpointError, match=f"{folder}.*no checkpoint"):
    checkpoints.load(str(folder))


def test_a_run_converts_to_hugging_face(pretraining_run, tmp_path):
  """What `bert-convert --input=RUN --to=hf` does: the run's encoder and heads
  written as safetensors and read back equal."""
  ckpt = checkpoints.load(pretraining_run, with_heads=True)
  out = checkpoints.save(ckpt, str(tmp_path / "hf"), format="hf",
                         lower_case=True)
  back = checkpoints.load(out, with_heads=True)
  assert back.format == "hf" and back.has_heads and back.lower_case is True
  assert _values(back.encoder.weights) == _values(ckpt.encoder.weights)
  assert (_values(back.masked_lm.weights + back.next_sentence.weights)
          == _values(ckpt.masked_lm.weights + ckpt.next_sentence.weights))


def test_an_albert_run_answers_sentence_order(tmp_path, pretraining_records,
                                              family_root):
  # A run records no casing unless EncoderSource was given one; an ALBERT
  # (SentencePiece) run is lower-cased as every ALBERT is, so its
  # sentence-order head answers raw pairs straight from the folder.
  from bert.layers.vocabulary import Vocabulary  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  from family import tokenizer_folder  # pylint: disable=g-import-not-at-top
  spiece = os.path.join(tokenizer_folder("albert", family_root), "spiece.model")
  config = tiny_pretraining_config().to_dict()
  config.update(family="albert", vocab_size=len(Vocabulary.from_file(spiece)),
                embedding_size=16, num_hidden_groups=1)
  run = write_run(str(tmp_path / "run"), [
      "build_task.task_class = @PretrainingTask",
      f"EncoderSource.bert_config = {config!r}",
      f"EncoderSource.vocab_file = '{spiece}'",
      f"PretrainingInputs.train_files = '{pretraining_records}'",
      f"PretrainingInputs.seq_length = {PRETRAIN_SEQ}",
      f"PretrainingInputs.max_predictions_per_seq = {PRETRAIN_PRED}"])
  ckpt = checkpoints.load(run, with_heads=True)
  assert ckpt.lower_case is True and ckpt.config.family == "albert"
  model = BertClassifier.next_sentence(run, seq_length=PRETRAIN_SEQ)
  pairs = (["The cat sat on the mat.", "It was happy."],
           ["It was happy.", "The cat sat on the mat."])
  got = model.predict(pairs)
  assert set(got["labels"]) <= {"in_order", "swapped"}
  # The head of the checkpoint on the encoder's pooled output, by hand.
  features = model.preprocessor.encode(pairs)
  pooled = ckpt.encoder({k: features[k] for k in (
      "input_word_ids", "input_mask", "input_type_ids")})["pooled_output"]
  expected = tf.nn.softmax(ckpt.next_sentence(pooled)).numpy()
  np.testing.assert_allclose(got["probabilities"], expected, atol=1e-5)
