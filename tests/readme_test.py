"""Every code block of the README and of docs/*.md is kept true here.

Python blocks run as written, in order, one namespace per page (a later
block may use what an earlier one made), in a temporary folder, on small real
data: the names a page leaves to the reader (`sentences_a`, `ids`,
`vocab_file`, ...) are bound to MRPC rows and the MiniLM checkpoint's files
first, and a page that uses `model` without making it gets the README's
fine-tuned classifier (built once per test process). A block that truly
cannot run here (it needs a TPU) follows a line `<!-- not run: <reason> -->`;
it is still compiled.

Shell blocks are real runs of minutes to hours (their results are in
bench/): they are not run, but every `bert-*` command in them must name flags
the command defines, bundled gin configs that exist and `--gin_param`
bindings of fields gin knows. `text` blocks are output.
"""

import ast
import builtins
import glob
import os
import re
import shlex
import tomllib

import numpy as np
import pytest
import tensorflow as tf

from bert.data import classification_data as cd
from conftest import REPO_ROOT, random_inputs, shared_data, vocab

README = os.path.join(REPO_ROOT, "README.md")
DOCS = sorted(glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))
LANGUAGES = ("python", "bash", "text")
FENCE = re.compile(r"^(?:<!-- not run: (?P<reason>.*?) -->\n)?"
                   r"```(?P<lang>\S*)\n(?P<code>.*?)^```$", re.S | re.M)


def blocks(path):
  """[(language, code, not-run reason or None, line)] of a Markdown page.

  Refuses what the test could otherwise pass over: an indented fence (in a
  list), a fence without a known language, a `not run` marker without a
  reason or before a block that is not Python."""
  with open(path, encoding="utf-8") as f:
    text = f.read()
  name = os.path.relpath(path, REPO_ROOT)
  for i, line in enumerate(text.splitlines()):
    if line.lstrip().startswith("```") and line != line.lstrip():
      raise AssertionError(f"{name}:{i + 1}: an indented code block; the "
                           "doc test reads fences at the start of a line")
  found = []
  for m in FENCE.finditer(text):
    where = f"{name}:{text.count(chr(10), 0, m.start('lang')) + 1}"
    if m.group("lang") not in LANGUAGES:
      raise AssertionError(f"{where}: a code block in {m.group('lang')!r}; "
                           f"the doc test knows {', '.join(LANGUAGES)}")
    reason = m.group("reason")
    if reason is not None and (not reason.strip()
                               or m.group("lang") != "python"):
      raise AssertionError(f"{where}: `not run` needs a reason and a Python "
                           "block")
    found.append((m.group("lang"), m.group("code"), reason, where))
  fences = sum(1 for line in text.splitlines() if line.startswith("```"))
  assert fences == 2 * len(found), f"{name}: an unclosed code block"
  return found


def python_blocks(path=README):
  return [code for lang, code, reason, _ in blocks(path)
          if lang == "python" and reason is None]


def reader_names():
  """What the pages' blocks take from the reader's own code."""
  examples = cd.read_glue("mrpc", shared_data("glue", "MRPC", "train.tsv"))[:16]
  inputs = random_inputs(2, 16, vocab_size=30522)
  vocab_file = vocab()
  return dict(
      sentences_a=[e.text_a for e in examples],
      sentences_b=[e.text_b for e in examples],
      labels=["paraphrase" if e.label == "1" else "different" for e in examples],
      ids=inputs["input_word_ids"], mask=inputs["input_mask"],
      types=inputs["input_type_ids"], vocab_file=vocab_file,
      corpus=shared_data("corpus", "sample_text.txt"),
      texts=tf.constant(["Hello, world!", "A second text."]),
      ids_a=tf.ragged.constant([[7592, 1010]]), ids_b=tf.ragged.constant([[2088]]))


def run_page(path, namespace):
  """Runs the page's Python blocks in order in `namespace` (compiling the
  ones marked not run); a failure names the page, the block and its line."""
  runnable = 0
  for i, (lang, code, reason, where) in enumerate(blocks(path)):
    if lang != "python":
      continue
    label = f"{where} (code block {i + 1})"
    try:
      compiled = compile(code, label, "exec")
      if reason is None:
        runnable += 1
        exec(compiled, namespace)  # pylint: disable=exec-used
    except Exception as e:
      raise AssertionError(f"{label} failed: {type(e).__name__}: {e}\n"
                           f"{code}") from e
  return runnable


def free_names(path):
  """Names the page's Python blocks read but none of them assigns."""
  loaded, stored = set(), set()
  for lang, code, reason, _ in blocks(path):
    if lang != "python" or reason is not None:
      continue
    for node in ast.walk(ast.parse(code)):
      if isinstance(node, ast.Name):
        (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
      elif isinstance(node, (ast.Import, ast.ImportFrom)):
        stored.update((a.asname or a.name).split(".")[0] for a in node.names)
  return loaded - stored - set(dir(builtins))


@pytest.fixture(scope="module")
def readme_namespace(tmp_path_factory):
  """The README's blocks, run once per process: its names afterwards."""
  namespace = reader_names()
  cwd = os.getcwd()
  os.chdir(tmp_path_factory.mktemp("readme"))
  try:
    run_page(README, namespace)
  finally:
    os.chdir(cwd)
  return namespace


def test_readme_python_blocks_run_as_written(readme_namespace):
  code = python_blocks()
  assert len(code) >= 2, "the README lost its Python examples"
  assert ("from_pretrained" in code[0] and ".fit(" in code[0]
          and ".predict(" in code[0]), "the README must open with the Python path"
  assert len(code[0].strip().splitlines()) <= 5
  # The opening block's model predicts task-level outputs.
  predictions = readme_namespace["model"].predict(
      (readme_namespace["sentences_a"][:2], readme_namespace["sentences_b"][:2]))
  assert set(predictions["labels"]) <= {"different", "paraphrase"}
  assert np.allclose(predictions["probabilities"].sum(-1), 1.0, atol=1e-6)


PAGES_WITH_CODE = [p for p in DOCS if python_blocks(p)]


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=os.path.basename)
def test_docs_python_blocks_run_as_written(page, tmp_path, monkeypatch,
                                           request):
  namespace = reader_names()
  if "model" in free_names(page):   # the README's fine-tuned classifier
    namespace["model"] = request.getfixturevalue("readme_namespace")["model"]
  monkeypatch.chdir(tmp_path)
  assert run_page(page, namespace) == len(python_blocks(page))


def test_the_pages_with_code_are_found():
  names = {os.path.basename(p) for p in PAGES_WITH_CODE}
  # Control: the glob sees docs/, and the pages of the Python paths.
  assert {"fine-tuning.md", "export-and-serving.md", "distillation.md"} <= names


def write_page(folder, text):
  path = os.path.join(folder, "page.md")
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def test_a_broken_block_fails_naming_its_page_block_and_line(tmp_path):
  good = "```python\nx = 1\n```\n\n```python\ny = x + 1\n```\n"
  namespace = {}
  assert run_page(write_page(tmp_path, good), namespace) == 2
  assert namespace["y"] == 2          # later blocks see earlier ones' names
  broken = good.replace("y = x + 1", "y = x + undefined_name")
  with pytest.raises(AssertionError,
                     match=r"page.md:5 \(code block 2\) failed: NameError"):
    run_page(write_page(tmp_path, broken), {})


def test_a_block_marked_not_run_is_compiled_but_not_run(tmp_path):
  marked = "<!-- not run: needs a TPU -->\n```python\nraise SystemExit(1)\n```\n"
  assert run_page(write_page(tmp_path, marked), {}) == 0
  with pytest.raises(AssertionError, match="SyntaxError"):
    run_page(write_page(tmp_path, marked.replace("raise", "raise raise")), {})
  with pytest.raises(AssertionError, match="needs a reason"):
    blocks(write_page(tmp_path, marked.replace("needs a TPU", " ")))
  with pytest.raises(AssertionError, match="indented"):
    blocks(write_page(tmp_path, "- a list\n  ```python\n  x = 1\n  ```\n"))
  with pytest.raises(AssertionError, match="'sh'"):
    blocks(write_page(tmp_path, "```sh\nls\n```\n"))


# ---- shell blocks: flags, bundled configs and gin bindings ----

def command_flags():
  """bert-* command -> the flags its script defines (read, not imported:
  the scripts define absl flags on one global registry)."""
  with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
    scripts = tomllib.load(f)["project"]["scripts"]

  def defined(name):
    with open(os.path.join(REPO_ROOT, "scripts", f"{name}.py"),
              encoding="utf-8") as f:
      source = f.read()
    names = set(re.findall(r"flags\.DEFINE_\w+\(\s*\"(\w+)\"", source))
    if "_gin_config.define_task_flags()" in source:
      names |= defined("_gin_config")
    return names

  common = defined("_cli") | {"help", "helpfull", "helpshort", "flagfile"}
  return {cmd: defined(target.split(":")[0].rsplit(".", 1)[1]) | common
          for cmd, target in scripts.items()}


def commands(code):
  """The argument lists of the `bert-*` commands of a shell block."""
  code = code.replace("\\\n", " ")
  for line in code.splitlines():
    words = shlex.split(line, comments=True)
    start = [i for i, w in enumerate(words)
             if w.startswith("bert-") and (i == 0 or words[i - 1] == "&&")]
    for s in start:
      end = next((i for i in range(s + 1, len(words)) if words[i] == "&&"),
                 len(words))
      yield words[s:end]


def check_command(argv, known, gin_fields):
  """Problems of one command line: unknown flags, configs and bindings."""
  problems = []
  cmd, args = argv[0], argv[1:]
  if cmd not in known:
    return [f"{cmd}: no such command (pyproject.toml [project.scripts])"]
  bundled = os.path.join(REPO_ROOT, "configs")
  for arg in args:
    if not arg.startswith("--"):
      continue
    name, _, value = arg[2:].partition("=")
    if name not in known[cmd] and not (name.startswith("no")
                                       and name[2:] in known[cmd]):
      problems.append(f"{cmd} has no flag --{name}")
    elif name == "task" and not os.path.exists(
        os.path.join(bundled, f"{value}.gin")):
      problems.append(f"--task={value}: no configs/{value}.gin")
    elif (name == "gin_file" and os.sep not in value
          and not os.path.exists(os.path.join(bundled, value))):
      problems.append(f"--gin_file={value}: no configs/{value}")
    elif name == "gin_param":
      binding = value.split("=", 1)[0].strip()
      if binding not in gin_fields(binding):
        problems.append(f"--gin_param={value}: gin knows no {binding}")
  return problems


def gin_field_checker():
  """binding 'Class.field' -> {binding} if gin knows it, else set()."""
  import gin  # pylint: disable=g-import-not-at-top
  import bert.tasks  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
  import bert.training  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top

  def check(binding):
    gin.clear_config()
    try:
      gin.parse_config(f"{binding} = None")
      return {binding}
    except (ValueError, KeyError):
      return set()
    finally:
      gin.clear_config()
  return check


def shell_problems(path):
  known, gin_fields = command_flags(), gin_field_checker()
  problems = []
  for lang, code, _, where in blocks(path):
    if lang == "bash":
      for argv in commands(code):
        problems += [f"{where}: {p}" for p in
                     check_command(argv, known, gin_fields)]
  return problems


@pytest.mark.parametrize("page", [README] + DOCS, ids=os.path.basename)
def test_shell_blocks_name_real_flags_configs_and_gin_fields(page):
  assert shell_problems(page) == []


def test_the_shell_check_finds_a_wrong_flag_config_or_binding(tmp_path):
  good = ("```bash\nbert-train --task=glue_mrpc --model_dir=runs/x \\\n"
          "    --gin_param=RuntimeConfig.train_steps=10 --nojit_compile\n"
          "pip install -e . && bert-quickstart --seed=1  # a comment\n```\n")
  assert shell_problems(write_page(tmp_path, good)) == []
  assert len(list(commands(good.split("\n", 1)[1]))) == 2   # control
  for wrong, found in [("--model_dir", "has no flag --model_dirs"),
                       ("--task=glue_mrpc", "no configs/glue_mrpcx.gin"),
                       ("RuntimeConfig.train_steps", "gin knows no"),
                       ("--seed", "has no flag --seeds")]:
    bad = good.replace(wrong, {"--model_dir": "--model_dirs",
                               "--task=glue_mrpc": "--task=glue_mrpcx",
                               "RuntimeConfig.train_steps":
                                   "RuntimeConfig.train_stepz",
                               "--seed": "--seeds"}[wrong])
    problems = shell_problems(write_page(tmp_path, bad))
    assert len(problems) == 1 and found in problems[0], problems


# ---- the front page ----

def links(path):
  with open(path, encoding="utf-8") as f:
    text = f.read()
  return re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text)


def test_readme_is_a_front_page_linking_every_docs_page():
  with open(README, encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert len(lines) <= 250, f"README.md has {len(lines)} lines (at most 250)"
  assert "## Contents" in lines
  linked = {os.path.normpath(os.path.join(REPO_ROOT, l)) for l in links(README)}
  assert set(DOCS) - linked == set(), "docs pages the README does not link"


@pytest.mark.parametrize("page", [README] + DOCS + sorted(
    glob.glob(os.path.join(REPO_ROOT, "bench", "*.md"))), ids=os.path.basename)
def test_links_to_pages_resolve(page):
  missing = [l for l in links(page) if not os.path.exists(
      os.path.join(os.path.dirname(page), l))]
  assert missing == []
