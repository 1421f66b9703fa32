"""One `SquadConfig` from the task's gin concerns through the preprocessor
to the serving export; the gin names of saved operative configs
(`SquadData.*`, `AnswerConfig.*`) and the flat preprocessor arguments still
make it."""

import dataclasses
import os

import gin
import pytest

from bert import configs as bundled
from bert import export
from bert.data.squad_config import SquadConfig
from bert.models.preprocessors import SpanLabelerPreprocessor
from bert.tasks.configs import AnswerConfig, SquadData
from bert.tasks import build_task
# The bundled configs bind the runtime too: its configurables (RuntimeConfig,
# OptimizerConfig) register when bert.training is imported.
from bert import training  # noqa: F401 pylint: disable=unused-import
from conftest import minilm_dir

CONFIG_DIR = os.path.dirname(bundled.__file__)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def test_the_task_configs_defaults_are_squad_configs():
  squad = SquadConfig()
  data, answers = SquadData(), AnswerConfig()
  for name in ("version_2", "doc_stride", "max_query_length"):
    assert getattr(data, name) == getattr(squad, name)
  assert dataclasses.asdict(answers) == {
      k: getattr(squad, k) for k in dataclasses.asdict(answers)}
  assert SpanLabelerPreprocessor(VOCAB, True).squad == squad


def test_saved_gin_names_make_the_tasks_one_squad_config():
  gin.parse_config_files_and_bindings(
      [os.path.join(CONFIG_DIR, "squad_v2.gin")],
      [f"INIT_CHECKPOINT = '{minilm_dir()}'", "SquadData.doc_stride = 96",
       "AnswerConfig.n_best_size = 7",
       "AnswerConfig.null_score_diff_threshold = -1.5",
       "FinetuningInputs.seq_length = 256"])
  task = build_task()
  expected = SquadConfig(seq_length=256, doc_stride=96, max_query_length=64,
                         n_best_size=7, version_2=True,
                         null_score_diff_threshold=-1.5)
  assert task.squad == expected
  # What a run writes rebuilds it.
  operative = gin.operative_config_str()
  for line in ("SquadData.doc_stride = 96", "AnswerConfig.n_best_size = 7",
               "SquadData.version_2 = True"):
    assert line in operative
  gin.clear_config()
  gin.parse_config(operative)
  assert build_task().squad == expected
  # Passed whole to the Keras path (and from there to the export).
  assert task.preprocessor().squad == expected


def test_preprocessor_takes_the_object_or_its_fields_and_saves_them():
  squad = SquadConfig(seq_length=64, max_query_length=16, version_2=True)
  pre = SpanLabelerPreprocessor(VOCAB, True, squad=squad)
  assert pre.squad == squad and pre.seq_length == 64
  # Flat arguments (preprocessor_args=dict(doc_stride=...)) and seq_length
  # (from_pretrained's) change fields of the object.
  flat = SpanLabelerPreprocessor(VOCAB, True, seq_length=32, squad=squad,
                                 doc_stride=8)
  assert flat.squad == squad.replace(seq_length=32, doc_stride=8)
  # A saved config holds the fields one by one, as before `squad` existed.
  config = pre.get_config()
  assert "squad" not in config and config["doc_stride"] == 128
  assert config["version_2"] is True and config["seq_length"] == 64
  assert SpanLabelerPreprocessor.from_config(config).squad == squad


def test_export_names_the_object_for_loose_settings():
  with pytest.raises(TypeError, match=r"doc_stride, seq_length: the settings "
                     r"are one squad=SquadConfig\(...\)"):
    export.export_span_labeler(None, "unused", VOCAB, True, SquadConfig(),
                               seq_length=64, doc_stride=16)
  # The old positional seq_length.
  with pytest.raises(TypeError, match=r"squad=384: the settings are one "
                     r"squad=SquadConfig"):
    export.export_span_labeler(None, "unused", VOCAB, True, 384)
