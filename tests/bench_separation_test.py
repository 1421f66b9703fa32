"""tests/ and bench/ do not import each other (what both need lives in the
library, e.g. `bert.testing`): every import statement of every file,
function-local ones included, is read from the syntax tree."""

import ast
import os

from conftest import REPO_ROOT


def imported_modules(path):
  """(line, module) of each import in a Python file: `import a.b` gives
  a.b, `from a import b` gives a and a.b, `importlib.import_module("a")`
  and `__import__("a")` give a."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  out = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      out += [(node.lineno, alias.name) for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      out.append((node.lineno, node.module))
      out += [(node.lineno, f"{node.module}.{alias.name}")
              for alias in node.names]
    elif (isinstance(node, ast.Call) and node.args
          and isinstance(node.args[0], ast.Constant)
          and isinstance(node.args[0].value, str)
          and (getattr(node.func, "attr", None) == "import_module"
               or getattr(node.func, "id", None) == "__import__")):
      out.append((node.lineno, node.args[0].value))
  return out


def python_files(folder):
  """The project's Python files under `folder`: not those of hidden folders
  (bench's own venvs, bench/.venv_*, and its work folders)."""
  for root, dirs, files in os.walk(folder):
    dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
    yield from (os.path.join(root, f) for f in sorted(files)
                if f.endswith(".py"))


def top_level_names(folder):
  """The names a file of `folder` is imported by when `folder` (or one of
  its subfolders, as pytest puts them) is on sys.path: its modules and
  packages, and the folder itself."""
  names = {os.path.basename(folder)}
  for path in python_files(folder):
    names.add(os.path.splitext(os.path.basename(path))[0])
    for part in os.path.relpath(os.path.dirname(path), folder).split(os.sep):
      if part != ".":
        names.add(part)
  return names - {"__init__"}


def crossings(importer, imported):
  """'file:line: module' for each import in `importer`'s files of a module
  of folder `imported`."""
  names = top_level_names(imported)
  out = []
  for path in python_files(importer):
    for line, module in imported_modules(path):
      if module.split(".")[0] in names:
        out.append(f"{os.path.relpath(path, REPO_ROOT)}:{line}: {module}")
  return out


def test_tests_do_not_import_bench():
  assert not crossings(os.path.join(REPO_ROOT, "tests"),
                       os.path.join(REPO_ROOT, "bench"))


def test_bench_does_not_import_tests():
  assert not crossings(os.path.join(REPO_ROOT, "bench"),
                       os.path.join(REPO_ROOT, "tests"))


def test_the_scan_sees_every_kind_of_import(tmp_path):
  """Negative control: a tree whose files import the other folder in each
  way the scan reads, top-level and inside functions."""
  bench = tmp_path / "bench"
  (bench / "sub").mkdir(parents=True)
  (bench / "step_parity.py").write_text("X = 1\n")
  (bench / "sub" / "tool.py").write_text("Y = 1\n")
  tests = tmp_path / "tests"
  tests.mkdir()
  (tests / "a_test.py").write_text(
      "import os\n"
      "from bench import step_parity\n"
      "def f():\n"
      "  import bench.sub.tool\n"
      "  from sub import tool\n"
      "  import importlib\n"
      "  importlib.import_module('step_parity')\n"
      "  return __import__('bench')\n")
  found = crossings(str(tests), str(bench))
  assert sorted(c.split(": ")[1] for c in found) == sorted([
      "bench", "bench.step_parity", "bench.sub.tool", "sub", "sub.tool",
      "step_parity", "bench"]), found
  (tests / "a_test.py").write_text("import os\nfrom bert import testing\n")
  assert not crossings(str(tests), str(bench))
