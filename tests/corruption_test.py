"""The fuzz harness can fail: each rule of `check_reader` has a negative
control, and `corrupt_cases` is deterministic and really damages its input."""

import pytest

import corruption
from bert.data.errors import DataError


def test_cases_are_seeded_distinct_and_damaged():
  data = bytes(range(256)) * 4
  a = corruption.corrupt_cases(data, 200, seed=3)
  assert a == corruption.corrupt_cases(data, 200, seed=3)
  assert a != corruption.corrupt_cases(data, 200, seed=4)
  assert len(a) == 200 and len({blob for _, blob in a}) == 200
  assert all(blob != data for _, blob in a)
  kinds = {label.split("@")[0].rstrip("0123456789") for label, _ in a}
  assert kinds == {"truncate", "bitflip", "random", "zero"}


def test_check_reader_accepts_only_one_line_library_errors_naming_the_file(
    tmp_path):
  path = str(tmp_path / "data.json")

  def raises(error):
    def load(p):
      raise error
    return load

  assert corruption.check_reader(lambda p: None, path, "ok") == "ok"
  assert isinstance(corruption.check_reader(
      raises(DataError(f"{path}:3: bad")), path, "named"), DataError)
  assert isinstance(corruption.check_reader(
      raises(FileNotFoundError("data.json: gone")), path, "basename"),
                    FileNotFoundError)
  for error, why in [(DataError("line 3: bad"), "does not name"),
                     (DataError(f"{path}: bad\nmore"), "not one line"),
                     (KeyError(path), "not a library error"),
                     (ValueError(path), "not a library error")]:
    with pytest.raises(AssertionError, match=why):
      corruption.check_reader(raises(error), path, "case")


def test_check_reader_ends_a_hang(monkeypatch):
  monkeypatch.setattr(corruption, "TIMEOUT_SECONDS", 1)

  def hang(p):
    while True:
      pass

  with pytest.raises(AssertionError, match="no outcome after 1 s"):
    corruption.check_reader(hang, "x", "hang")
