"""pyproject.toml lists every package under bert/, so a non-editable
`pip install .` ships all of them (editable installs hide a missing one)."""

import os
import tomllib

from conftest import REPO_ROOT


def test_every_package_directory_is_listed():
  with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
    setuptools = tomllib.load(f)["tool"]["setuptools"]
  listed = set(setuptools["packages"])
  found = {"bert.scripts", "bert.configs"}       # mapped by package-dir
  for root, _, files in os.walk(os.path.join(REPO_ROOT, "bert")):
    if "__init__.py" in files:
      found.add(os.path.relpath(root, REPO_ROOT).replace(os.sep, "."))
  assert "bert.tasks.configs" in found           # control: the walk sees subpackages
  assert found - listed == set(), "packages missing from pyproject.toml"
  assert listed - found == set(), "pyproject.toml lists packages that do not exist"
