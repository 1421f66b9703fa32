"""The suite's tiers: which tests read the shared data folder and which start
processes, found by a rule over what each test uses instead of marks
written by hand on hundreds of tests.

  data        the test, a fixture it uses (also one it looks up by name
              with `request.getfixturevalue`), a parameter it is given, or
              a test helper any of these calls or lists in a table of
              cases (transitively) names `shared_data`, `shared_texts` or
              `shared_data_dir` (bert.testing: $BERT_SHARED_DATA,
              ../shared/data).
  subprocess  ... names `subprocess`, `multiprocessing`, `Popen` or
              `sys.executable` (a command line to start).

A module or test may carry either mark itself (`pytestmark = ...`) for what
the rule cannot see. The rule is checked while the tests run (`guard`): a
test without `data` sees $BERT_SHARED_DATA pointing at a missing folder,
and one without `subprocess` cannot start a process, so a test the rule
misses fails in every tier, naming the mark it needs.

  heavy       (by hand) one of the longest tests: training runs, exports,
              sweeps of several seconds or more each.
  fast        (set here) every test with none of data, subprocess, heavy
              and slow: `python -m pytest -m fast` is the fast tier, for a
              machine without the shared data and for quick rounds.
              `python -m pytest` (`-m 'not slow'`) runs the fast tier and
              all the others.
"""

import contextlib
import inspect
import os
import types

import pytest

MARKS = ("data", "subprocess")
# What keeps a test out of the fast tier.
NOT_FAST = ("data", "subprocess", "heavy", "slow")
NAMES = {
    "data": frozenset({"shared_data", "shared_texts", "shared_data_dir"}),
    "subprocess": frozenset({"subprocess", "multiprocessing", "Popen",
                             "executable"}),
}
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
# Where a test without the `data` mark finds the shared data.
MISSING_DATA = os.path.join(TESTS_DIR, "no-shared-data-without-the-data-mark")


def _code_names(code: types.CodeType) -> frozenset:
  """Global and attribute names a code object and the functions, lambdas
  and comprehensions inside it refer to."""
  names = set(code.co_names)
  for const in code.co_consts:
    if isinstance(const, types.CodeType):
      names |= _code_names(const)
  return frozenset(names)


def _own_function(obj) -> bool:
  """A function (or method) defined in a file of the test suite."""
  obj = inspect.unwrap(obj) if callable(obj) else obj
  code = getattr(obj, "__code__", None)
  # This module's own functions (the guard) are the rule, not a use.
  return (code is not None and code.co_filename.startswith(TESTS_DIR)
          and os.path.abspath(code.co_filename) != os.path.abspath(__file__))


def _functions_of(obj):
  """The suite's own functions an object stands for: itself, a class's
  methods, nothing for anything else."""
  if isinstance(obj, (staticmethod, classmethod)):
    obj = obj.__func__
  if inspect.ismethod(obj):
    obj = obj.__func__
  if getattr(obj, "hypothesis", None) is not None:   # @given: the test body
    obj = obj.hypothesis.inner_test
  if inspect.isclass(obj):
    return [f for v in vars(obj).values() for f in _functions_of(v)]
  if callable(obj) and _own_function(obj):
    return [inspect.unwrap(obj)]
  return []


def _code_strings(code: types.CodeType) -> frozenset:
  """The identifier-like string constants of a code object and the code
  inside it (fixture names a test may look up by name)."""
  out = set()
  for const in code.co_consts:
    if isinstance(const, types.CodeType):
      out |= _code_strings(const)
    elif isinstance(const, str) and const.isidentifier():
      out.add(const)
  return frozenset(out)


def _contents(value, depth=3):
  """What a table of cases (a dict, list or tuple global) holds: its
  identifier strings and other values, a few levels down."""
  if isinstance(value, str):
    return [value] if value.isidentifier() else []
  if depth and isinstance(value, dict):
    inner = list(value.keys()) + list(value.values())
  elif depth and isinstance(value, (list, tuple, set, frozenset)):
    inner = list(value)
  else:
    return [value]
  return [x for v in inner for x in _contents(v, depth - 1)]


class Rule:
  """What each of the suite's functions reaches, memoised: the names it and
  the suite's functions it refers to name, and their identifier strings."""

  def __init__(self):
    self._reached = {}

  def reached(self, func):
    """(names, strings) of `func` and of the suite's functions it refers to
    through its globals, an attribute of one of the suite's modules, or a
    table of cases."""
    key = func.__code__
    if key in self._reached:
      return self._reached[key]
    self._reached[key] = (frozenset(), frozenset())   # a cycle adds nothing
    names = set(_code_names(key))
    strings = set(_code_strings(key))
    module_globals = getattr(func, "__globals__", {})
    for name in list(names):
      value = module_globals.get(name)
      if inspect.ismodule(value) and getattr(value, "__file__", "") and \
          os.path.abspath(value.__file__).startswith(TESTS_DIR):
        found = [getattr(value, n) for n in names if hasattr(value, n)]
      elif isinstance(value, (dict, list, tuple, set, frozenset)):
        found = _contents(value)
      else:
        found = [] if value is None else [value]
      for obj in found:
        if isinstance(obj, str):
          strings.add(obj)
        for f in _functions_of(obj):
          more_names, more_strings = self.reached(f)
          names |= more_names
          strings |= more_strings
    self._reached[key] = (frozenset(names), frozenset(strings))
    return self._reached[key]

  def marks(self, item) -> set:
    """The tier marks `item` needs: from its function, its parameters and
    its fixtures, also those it looks up by name (`getfixturevalue`)."""
    functions = _functions_of(getattr(item, "obj", None))
    callspec = getattr(item, "callspec", None)
    params = []
    for value in (callspec.params.values() if callspec else ()):
      params += value if isinstance(value, (list, tuple)) else [value]
    for obj in params:
      functions += _functions_of(obj)
    # Fixtures looked up by name (`request.getfixturevalue`) are named by
    # the test's own strings (its parameters, its code and its helpers').
    names, strings = set(), {p for p in params if isinstance(p, str)}
    for f in functions:
      more_names, more_strings = self.reached(f)
      names |= more_names
      strings |= more_strings
    seen, todo = set(), list(getattr(item, "fixturenames", ()))
    if "getfixturevalue" in names:
      todo += sorted(strings)
    functions = []
    while todo:                        # fixtures, and the fixtures they use
      name = todo.pop()
      if name in seen:
        continue
      seen.add(name)
      for fixturedef in _fixturedefs(item, name):
        todo += list(fixturedef.argnames)
        for f in _functions_of(fixturedef.func):
          names |= self.reached(f)[0]
    return {mark for mark in MARKS if names & NAMES[mark]}


def _fixturedefs(item, name):
  """The fixture definitions `name` stands for, seen from `item`."""
  info = getattr(item, "_fixtureinfo", None)
  if info is not None and name in info.name2fixturedefs:
    return info.name2fixturedefs[name]
  session = getattr(item, "session", None)
  manager = getattr(session, "_fixturemanager", None)
  return (manager.getfixturedefs(name, item) or ()) if manager else ()


def mark_items(items) -> None:
  """Adds the tier marks each collected test needs, then `fast` to those
  that have none of `NOT_FAST`."""
  rule = Rule()
  for item in items:
    marked = {m.name for m in item.iter_markers()}
    for mark in rule.marks(item) - marked:
      item.add_marker(getattr(pytest.mark, mark))
      marked.add(mark)
    if not marked & set(NOT_FAST):
      item.add_marker(pytest.mark.fast)


def _refuse_processes(*args, **kwargs):
  del args, kwargs
  raise AssertionError(
      "this test starts a process but has no `subprocess` mark: tests/"
      "_tiers.py did not see it; mark the test or its module "
      "(pytestmark = pytest.mark.subprocess)")


@contextlib.contextmanager
def guard(item, monkeypatch):
  """Runs `item` without the shared data folder unless it has the `data`
  mark, and unable to start a process unless it has `subprocess`."""
  marked = {m.name for m in item.iter_markers()}
  if "data" not in marked:
    monkeypatch.setenv("BERT_SHARED_DATA", MISSING_DATA)
  if "subprocess" not in marked:
    import _posixsubprocess  # pylint: disable=g-import-not-at-top
    import subprocess  # pylint: disable=g-import-not-at-top
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse_processes)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", _refuse_processes)
    monkeypatch.setattr(os, "fork", _refuse_processes)
    monkeypatch.setattr(os, "posix_spawn", _refuse_processes)
  yield
