"""The task configs (`bert.tasks.configs`): one frozen dataclass per concern,
bound by gin, written whole to the operative config (each field's check:
tests/validation_test.py)."""

import dataclasses
import os

import gin
import pytest

from bert import configs as bundled
from bert.tasks import ClassificationTask, PretrainingTask
from bert.tasks import configs as tc
from bert.tasks import build_task
# The bundled configs bind the runtime too: its configurables (RuntimeConfig,
# OptimizerConfig) register when bert.training is imported.
from bert import training  # noqa: F401 pylint: disable=unused-import
from bert.validation import ConfigError
from conftest import minilm_dir, small_config, vocab

pytestmark = pytest.mark.usefixtures("clean_gin")
CONFIG_DIR = os.path.dirname(bundled.__file__)


def test_configs_are_frozen_and_normalised():
  inputs = tc.FinetuningInputs(length_buckets=[32, 64])
  assert inputs.length_buckets == (32, 64)     # a list from gin -> a tuple
  with pytest.raises(dataclasses.FrozenInstanceError):
    inputs.seq_length = 64
  data = tc.ClassificationData(labels=["neg", "pos"])
  assert data.labels == ("neg", "pos")
  assert hash(data) == hash(tc.ClassificationData(labels=("neg", "pos")))


def test_generic_classification_data_needs_labels_or_regression():
  with pytest.raises(ConfigError, match="ClassificationData: give labels"):
    tc.ClassificationData(train_file="t.tsv")
  tc.ClassificationData(train_file="t.tsv", regression=True)
  tc.ClassificationData(glue_task="mrpc")


def test_relative_files_join_data_dir():
  files = tc.TaggingData(data_dir="d", train_file="train.conll",
                         eval_file="/abs/dev.conll").paths()
  assert files == dict(train=os.path.join("d", "train.conll"),
                       eval="/abs/dev.conll", predict="")


def test_a_task_takes_only_its_concern_types():
  with pytest.raises(ConfigError, match=r"^ClassificationTask\.inputs must be "
                     r"of type FinetuningInputs, got dict"):
    ClassificationTask(data=tc.ClassificationData(glue_task="mrpc"),
                       inputs=dict(seq_length=64))


def test_cross_concern_checks_are_the_tasks():
  encoder = tc.EncoderSource(bert_config=small_config(vocab_size=30522),
                             vocab_file=vocab(), lower_case=True)
  data = tc.ClassificationData(glue_task="mrpc")
  ok = ClassificationTask(data=data, encoder=encoder,
                          inputs=tc.FinetuningInputs(seq_length=32))
  assert ok.seq_length == 32 and ok.length_buckets[-1] == 32
  too_long = small_config(vocab_size=30522).max_position_embeddings + 1
  with pytest.raises(ConfigError, match=rf"FinetuningInputs.seq_length={too_long} "
                     "exceeds max_position_embeddings"):
    ClassificationTask(data=data, encoder=encoder,
                       inputs=tc.FinetuningInputs(seq_length=too_long))
  with pytest.raises(ConfigError, match="FinetuningInputs.length_buckets"):
    ClassificationTask(data=data, encoder=encoder, inputs=tc.FinetuningInputs(
        seq_length=32, length_buckets=(16, 24)))   # must end at seq_length


def test_encoder_source_needs_a_config_and_bert_config_replaces_the_checkpoints():
  with pytest.raises(ConfigError, match="PretrainingTask needs "
                     "EncoderSource.init_checkpoint or EncoderSource.bert_config"):
    PretrainingTask(encoder=tc.EncoderSource())
  encoder = tc.EncoderSource(init_checkpoint=minilm_dir()).load("T")
  assert encoder.config.hidden_size == 384 and encoder.lower_case is True
  assert encoder.vocab_file == vocab()
  dropout = dataclasses.replace(encoder.config, hidden_dropout_prob=0.0)
  replaced = tc.EncoderSource(init_checkpoint=minilm_dir(),
                              bert_config=dropout.to_dict()).load("T")
  assert replaced.config == dropout and replaced.checkpoint is not None
  with pytest.raises(ValueError, match="vocab .* has 30522 tokens but the "
                     "model.s vocab_size=100"):
    tc.EncoderSource(bert_config=small_config(), vocab_file=vocab()).load("T")


def test_gin_binds_each_concern_and_the_operative_config_lists_every_field():
  gin.add_config_file_search_path(CONFIG_DIR)
  gin.parse_config_files_and_bindings(
      [os.path.join(CONFIG_DIR, "glue_sst2.gin")],
      [f"INIT_CHECKPOINT = '{minilm_dir()}'", "FinetuningInputs.pack = True",
       "HeadConfig.dropout_rate = 0.2"])
  task = build_task()
  assert task.seq_length == 64                        # glue_sst2.gin's own
  assert task.inputs.pack and task.head.dropout_rate == 0.2
  assert task.data.glue_task == "sst-2" and task.schedule.num_train_epochs == 3
  operative = gin.operative_config_str()
  for cls in (tc.EncoderSource, tc.ClassificationData, tc.FinetuningInputs,
              tc.ScheduleConfig, tc.HeadConfig):
    for field in dataclasses.fields(cls):           # defaults too
      assert f"{cls.__name__}.{field.name} = " in operative, (cls, field.name)
  assert "TaggingData." not in operative              # negative control
  # The operative config rebuilds the same task.
  gin.clear_config()
  gin.parse_config(operative)
  again = build_task()
  assert (again.inputs, again.data, again.head, again.schedule) == (
      task.inputs, task.data, task.head, task.schedule)
