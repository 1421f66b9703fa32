"""One name per concept (issue 43): a renamed keyword is refused with an
error naming the new one, and a renamed gin field still reads from saved
configs."""

import dataclasses
import json
import os

import gin
import pytest

from bert import BertEncoder, checkpoints, export, networks
from bert.checkpoints import CheckpointError
from bert.data.pretraining_data import PretrainingDataConfig
from bert.data.pretraining_manifest import write_manifest
from bert.tasks.configs import EncoderSource
from bert.validation import ConfigError
from conftest import (PRETRAIN_PRED, PRETRAIN_SEQ, minilm_dir, small_config,
                      tiny_pretraining_config, write_run)

VOCAB = os.path.join(minilm_dir(), "vocab.txt")


@pytest.mark.parametrize("fn", [export.export_classifier,
                                export.export_span_labeler,
                                export.export_tagger])
def test_export_vocab_file_keyword_names_vocab(fn):
  with pytest.raises(TypeError, match=rf"{fn.__name__}\(vocab_file=...\): "
                     "the argument is now named vocab"):
    fn(None, "unused", vocab_file=["[PAD]"], lower_case=True)
  # Negative control: the new name reaches the function (which then fails on
  # its missing arguments, not on the name).
  with pytest.raises(TypeError) as e:
    fn(None, "unused", vocab=["[PAD]"], lower_case=True)
  assert "now named" not in str(e.value)


def test_encoder_source_reads_its_former_casing_name():
  assert EncoderSource(do_lower_case=False).lower_case is False
  assert EncoderSource(lower_case=True, do_lower_case=True).lower_case is True
  with pytest.raises(ConfigError, match=r"EncoderSource.do_lower_case is the "
                     r"former name of EncoderSource.lower_case; given both "
                     r"\(False and True\): give lower_case only"):
    EncoderSource(lower_case=True, do_lower_case=False)
  # Not a field: the config has one casing name, and operative configs
  # written now list only it.
  assert "do_lower_case" not in [f.name for f in
                                 dataclasses.fields(EncoderSource)]
  gin.clear_config()
  try:
    EncoderSource()
    operative = gin.operative_config_str()
  finally:
    gin.clear_config()
  assert "EncoderSource.lower_case = None" in operative
  assert "do_lower_case" not in operative


def test_a_run_saved_with_the_former_casing_name_loads(tmp_path,
                                                       pretraining_records):
  """An operative_config.gin of an earlier release binds
  EncoderSource.do_lower_case (and no lower_case): the run still loads, with
  that casing."""
  run = write_run(str(tmp_path / "run"), [
      "build_task.task_class = @PretrainingTask",
      f"EncoderSource.bert_config = {tiny_pretraining_config().to_dict()!r}",
      f"EncoderSource.vocab_file = '{VOCAB}'",
      "EncoderSource.do_lower_case = False",
      f"PretrainingInputs.train_files = '{pretraining_records}'",
      f"PretrainingInputs.seq_length = {PRETRAIN_SEQ}",
      f"PretrainingInputs.max_predictions_per_seq = {PRETRAIN_PRED}"])
  path = os.path.join(run, "operative_config.gin")
  with open(path) as f:
    lines = [line for line in f.read().split("\n")
             if not line.startswith("EncoderSource.lower_case")]
  assert "EncoderSource.do_lower_case = False" in lines
  with open(path, "w") as f:
    f.write("\n".join(lines))
  assert checkpoints.load(run).lower_case is False


def test_pretraining_manifest_keeps_the_reference_flag_names(tmp_path):
  """PretrainingDataConfig says seq_length and lower_case; manifest.json
  records the config under the reference script's flags, as before."""
  config = PretrainingDataConfig(seq_length=64, lower_case=False)
  write_manifest(str(tmp_path), [], [], config)
  with open(tmp_path / "manifest.json") as f:
    written = json.load(f)["config"]
  assert written["max_seq_length"] == 64 and written["do_lower_case"] is False
  assert "seq_length" not in written and "lower_case" not in written
  assert written["max_predictions_per_seq"] == 20   # the others as they are


def test_load_still_reads_its_former_preprocessor_keyword(tmp_path):
  """load(preprocessing=) names a TF Hub preprocessing SavedModel (not a
  BertPreprocessor); the former keyword is passed on as it."""
  folder = checkpoints.save(BertEncoder(small_config()), str(tmp_path / "c"))
  for keyword in ("preprocessing", "preprocessor"):
    with pytest.raises(CheckpointError, match=r"preprocessing= is for TF Hub "
                       r"SavedModels; this is a tf2 checkpoint"):
      checkpoints.load(folder, **{keyword: "unused"})
  with pytest.raises(TypeError, match=r"load\(preprocessor=...\): the "
                     r"argument is now named preprocessing; give "
                     r"preprocessing only"):
    checkpoints.load(folder, preprocessing="a", preprocessor="b")
  assert checkpoints.load(folder).format == "tf2"   # neither given


def test_former_preprocessing_model_names_still_read():
  assert networks.make_preprocessor is networks.make_preprocessing_model
  assert export.export_preprocessor is export.export_preprocessing_model
