"""`SquadConfig`: the one object of SQuAD window and answer settings, its
defaults and its one window check."""

import dataclasses

import numpy as np
import pytest

from bert.data.squad_config import SquadConfig, check_fields
from bert.validation import ConfigError


def test_defaults_are_run_squads():
  assert dataclasses.asdict(SquadConfig()) == dict(
      seq_length=384, doc_stride=128, max_query_length=64, n_best_size=20,
      max_answer_length=30, version_2=False, null_score_diff_threshold=0.0)


def test_the_window_check_leaves_one_context_piece():
  SquadConfig(seq_length=68)          # [CLS] 64 pieces [SEP] 1 piece [SEP]
  with pytest.raises(ConfigError, match=r"^SquadConfig\.max_query_length=64 "
                     r"leaves no room for the context in seq_length=67"):
    SquadConfig(seq_length=67)
  with pytest.raises(ConfigError, match="max_query_length=61 leaves no room"):
    SquadConfig(seq_length=64, max_query_length=60).replace(
        max_query_length=61)                            # checked again


@pytest.mark.parametrize("field,value", [
    ("seq_length", 0), ("doc_stride", 0), ("doc_stride", True),
    ("max_query_length", 0), ("n_best_size", 0), ("max_answer_length", -1),
    ("version_2", "yes"), ("null_score_diff_threshold", "0")])
def test_a_bad_field_is_named_with_its_owner(field, value):
  with pytest.raises(ConfigError, match=rf"^SquadConfig\.{field} must be"):
    SquadConfig(**{field: value})
  # The check of the task configs that carry some fields.
  with pytest.raises(ConfigError, match=rf"^SquadData\.{field} must be"):
    check_fields("SquadData", **{field: value})


def test_fields_are_normalised_and_frozen():
  squad = SquadConfig(doc_stride=np.int64(64), null_score_diff_threshold=1)
  assert type(squad.doc_stride) is int and squad.doc_stride == 64
  assert type(squad.null_score_diff_threshold) is float
  with pytest.raises(dataclasses.FrozenInstanceError):
    squad.doc_stride = 32


def test_replace_refuses_names_it_does_not_have():
  assert SquadConfig().replace(doc_stride=64).doc_stride == 64
  with pytest.raises(ConfigError, match="max_seq_length: not a SquadConfig "
                     "field"):
    SquadConfig().replace(max_seq_length=128)
