"""Fuzz of the run-folder reader (issue 42, acceptance 2): random
truncations and byte flips of a real run's operative_config.gin end in the
run loaded, or one line of the library's errors naming the file; never
another exception, a hang, or code executed."""

import os

import pytest

import corruption
from bert.tasks import trained_run
from run_checkpoint_test import _pretraining_run


@pytest.fixture(scope="module")
def run(tmp_path_factory, pretraining_records):
  return _pretraining_run(str(tmp_path_factory.mktemp("fuzzed") / "run"),
                          pretraining_records)


def _cases(run):
  with open(os.path.join(run, "operative_config.gin"), "rb") as f:
    return corruption.corrupt_cases(f.read(), corruption.FUZZ_CASES[1], seed=42)


def _fuzz(run, cases):
  config = os.path.join(run, "operative_config.gin")
  with open(config, "rb") as f:
    original = f.read()
  outcomes = []
  try:
    for label, blob in cases:
      with open(config, "wb") as f:
        f.write(blob)
      outcomes.append(corruption.check_reader(
          trained_run.load_trained_task, run, label, names=[config]))
  finally:
    with open(config, "wb") as f:
      f.write(original)
  return outcomes


def test_damaged_run_configs_load_or_are_named(run):
  outcomes = _fuzz(run, _cases(run)[:corruption.FUZZ_CASES[0]])
  # Both outcomes occur: the cases reach past the first check.
  assert any(o == "ok" for o in outcomes[4:])
  assert any(o != "ok" for o in outcomes)


@pytest.mark.slow
def test_damaged_run_configs_load_or_are_named_slow(run):
  _fuzz(run, _cases(run)[corruption.FUZZ_CASES[0]:])
