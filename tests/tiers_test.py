"""The tiers (tests/_tiers.py): the rule sees a use of the shared data or of
a process through helpers, fixtures and parameters, and the guard stops
what the rule missed. The helpers below are reached by name only
(`_helper`), so the tests themselves use neither."""

import os
import subprocess
import sys
import types

import pytest

import _tiers
from bert.testing import shared_data


def _reads_through_another():
  return _reads("glue")


def _reads(name):
  return shared_data(name)


def _starts():
  return subprocess.run([sys.executable, "-c", "pass"], check=True)


class _Starter:

  @staticmethod
  def start():
    return _starts()


def _plain():
  return os.path.join("a", "b")


def _helper(name):
  return globals()[name]


def _item(obj=None, fixtures=None, params=None, marks=(), lookups=None):
  """What `Rule.marks` and `guard` read of a collected test: `fixtures`
  it requests, `lookups` it may look up by name."""
  fixtures, lookups = fixtures or {}, lookups or {}
  return types.SimpleNamespace(
      obj=obj or _helper("_plain"), fixturenames=list(fixtures),
      _fixtureinfo=types.SimpleNamespace(name2fixturedefs={
          name: [types.SimpleNamespace(func=f, argnames=())]
          for name, f in dict(fixtures, **lookups).items()}),
      callspec=types.SimpleNamespace(params=params) if params else None,
      iter_markers=lambda: [types.SimpleNamespace(name=m) for m in marks])


# A table of cases naming the fixture each looks up.
_CASES = {"glue": ("_reading_fixture", 3)}


def _looks_up(request):
  return request.getfixturevalue(_CASES["glue"][0])


def test_the_rule_follows_helpers_fixtures_and_parameters():
  marks = _tiers.Rule().marks
  assert marks(_item(_helper("_reads_through_another"))) == {"data"}
  assert marks(_item(fixtures=dict(f=_helper("_starts")))) == {"subprocess"}
  assert marks(_item(params=dict(make=_helper("_Starter")))) == {"subprocess"}
  both = dict(a=_helper("_reads"), b=_helper("_Starter"))
  assert marks(_item(fixtures=both)) == {"data", "subprocess"}
  # A fixture looked up by a name from a table, or from a parameter.
  lookups = dict(_reading_fixture=_helper("_reads"))
  assert marks(_item(_helper("_looks_up"), lookups=lookups)) == {"data"}
  assert marks(_item(_helper("_looks_up"),
                     params=dict(name="_reading_fixture"),
                     lookups=lookups)) == {"data"}
  # Negative controls: a test that uses neither gets no mark; nor one whose
  # helper names a fixture it never looks up.
  assert marks(_item(_helper("_plain"), params=dict(x=3))) == set()
  assert marks(_item(_helper("_plain"), params=dict(x="_reading_fixture"),
                     lookups=lookups)) == set()


def test_this_test_is_in_the_fast_tier(request):
  marks = {m.name for m in request.node.iter_markers()}
  assert "fast" in marks and not marks & {"data", "subprocess"}


def test_the_guard_hides_the_data_and_refuses_processes():
  # This test has neither mark: conftest's guard is on.
  with pytest.raises(FileNotFoundError, match="no-shared-data-without"):
    _helper("_reads")("glue")
  with pytest.raises(AssertionError, match="no `subprocess` mark"):
    _helper("_starts")()


def test_the_guard_lets_marked_tests_be():
  env = os.environ.get("BERT_SHARED_DATA")
  with pytest.MonkeyPatch.context() as mp:
    with _tiers.guard(_item(marks=("data", "subprocess")), mp):
      assert os.environ.get("BERT_SHARED_DATA") == env
    assert not mp._setattr and not mp._setitem   # pylint: disable=protected-access
  with pytest.MonkeyPatch.context() as mp:
    with _tiers.guard(_item(marks=("data",)), mp):
      assert len(mp._setattr) == 4               # pylint: disable=protected-access
