"""The layering of the library (docs/design.md), enforced.

Every module of `bert/` (and `scripts/`, installed as `bert.scripts`) has a
layer; an import may only go to the same layer or a lower one, and the import
graph has no cycle. Imports inside functions count like any other: hiding an
upward import in a function does not make it go away. A module in no layer
fails too, so a new package must be placed before it can land.

The checker reads the sources with `ast` (nothing is imported), so the
negative controls below can feed it a tree with one bad import added.
"""

import ast
import io
import re
import tokenize
import os
from typing import Dict, List, Optional, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = {"bert": "bert", "bert.scripts": "scripts", "bert.configs": "configs"}

# Lowest first. A module's layer is that of its longest listed prefix.
LAYERS: Tuple[Tuple[str, ...], ...] = (
    # leaf: below everything, imported by anything
    ("bert.errors", "bert.untrusted", "bert.validation", "bert.features",
     "bert.config", "bert.flops", "bert.hardware", "bert.precision", "bert.io",
     "bert.registry", "bert.configs", "bert.retrieval"),
    ("bert.pretrained",),          # presets: download and cache
    ("bert.layers",),
    ("bert.data",),                # text -> records; uses the tokenizer layers
    ("bert.networks",),            # encoders and pre-training heads
    ("bert.checkpoints",),         # every format -> networks
    ("bert.losses", "bert.embedding_losses", "bert.metrics",
     "bert.optimization", "bert.train_step",
     "bert.distillation"),         # what training computes, below models
    ("bert.serving", "bert.export"),
    ("bert.models",),
    ("bert.tasks",),
    ("bert.training",),
    # the commands; what the tests and benchmarks share (real data and
    # weights, the step-parity run: nothing in the library imports it); and
    # the front door (bert/__init__.py), which registers the few functions a
    # lower layer looks up in `bert.registry`
    ("bert.scripts", "bert.testing", "bert"),
)


def modules(root: str = ROOT) -> Dict[str, str]:
  """Module name -> source text, for every .py file of the packages."""
  found = {}
  for prefix, folder in PACKAGES.items():
    base = os.path.join(root, folder)
    for path, text in _python_sources(base):
      rel = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
      name = (prefix if rel == "__init__"
              else f"{prefix}.{rel.removesuffix('.__init__')}")
      found[name] = text
  return found


def _python_sources(base: str):
  """(path, source text) of every .py file under `base`."""
  for dirpath, _, files in os.walk(base):
    for f in sorted(files):
      if f.endswith(".py"):
        path = os.path.join(dirpath, f)
        with open(path, encoding="utf-8") as fh:
          yield path, fh.read()


def _package(name: str, sources) -> bool:
  return any(m.startswith(name + ".") for m in sources)


def imports(sources: Dict[str, str]) -> Dict[str, List[Tuple[str, int]]]:
  """Module -> [(imported module, line)], top-level and function-local alike.
  `from pkg import name` depends on pkg.name when that is a module, else on
  pkg's __init__. An explicit import of a module's own package counts too
  (its __init__ imports the siblings, which may import the module back);
  the initialisation Python does of the parents anyway is no import."""
  def resolve(name):
    while name and name not in sources:
      name = name.rpartition(".")[0]
    return name or None

  graph = {}
  for mod, text in sources.items():
    is_pkg = _package(mod, sources) or mod == "bert"
    edges = []
    for node in ast.walk(ast.parse(text)):
      if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom):
        if node.level:
          base = mod if is_pkg else mod.rpartition(".")[0]
          for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
          target = base + ("." + node.module if node.module else "")
        else:
          target = node.module or ""
        targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in sources
                   else target for a in node.names]
      else:
        continue
      for t in targets:
        r = resolve(t)
        if r is None or r == mod:
          continue
        edges.append((r, node.lineno))
    graph[mod] = edges
  return graph


def layer_of(module: str) -> Optional[int]:
  best, rank = -1, None
  for i, names in enumerate(LAYERS):
    for name in names:
      # "bert" is the front door alone, not everything under it.
      inside = module.startswith(name + ".") and name != "bert"
      if (module == name or inside) and len(name) > best:
        best, rank = len(name), i
  return rank


def upward_imports(graph) -> List[str]:
  bad = []
  for mod, edges in sorted(graph.items()):
    for target, line in edges:
      if layer_of(target) > layer_of(mod):
        bad.append(f"{mod}:{line} imports {target} (layer {layer_of(target)} "
                   f"> {layer_of(mod)})")
  return bad


def in_cycles(graph) -> Set[str]:
  """Modules on an import cycle (Tarjan's strongly connected components)."""
  index, low, stack, on_stack, cyclic = {}, {}, [], set(), set()
  counter = [0]

  def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on_stack.add(v)
    for w, _ in graph.get(v, ()):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        cyclic.update(component)

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return cyclic


def problems(sources: Dict[str, str]) -> List[str]:
  graph = imports(sources)
  unplaced = [f"{m}: in no layer (add it to LAYERS)" for m in sorted(graph)
              if layer_of(m) is None]
  if unplaced:
    return unplaced
  cycles = sorted(in_cycles(graph))
  return upward_imports(graph) + [f"{m}: on an import cycle" for m in cycles]


def added_problems(changes: Dict[str, str]) -> List[str]:
  """The problems a tree has beyond the real one's, once `changes` (module ->
  text appended, or a new module's text) are made to it."""
  real = modules()
  changed = dict(real)
  for name, text in changes.items():
    changed[name] = changed.get(name, "") + text
  before = set(problems(real))
  return [p for p in problems(changed) if p not in before]


# ------------------------------------------------------------------- tests
def test_imports_run_one_way_and_form_no_cycle():
  sources = modules()
  assert len(sources) > 100 and "bert.layers.dropout" in sources
  assert problems(sources) == []


def test_an_upward_import_inside_a_function_is_found():
  # Negative control: the real tree plus one function-local import from the
  # layers to the tasks.
  found = added_problems({"bert.layers.dropout": (
      "\n\ndef _sneaky():\n  from bert.tasks import base\n  return base\n")})
  assert found[0].startswith("bert.layers.dropout:") and found[0].endswith(
      "imports bert.tasks.base (layer 9 > 2)"), found
  assert problems(modules()) == []   # and without it, none


def test_a_cycle_within_one_layer_is_found():
  # output_keras imports output_file
  found = added_problems({"bert.io.output_file":
                          "\nfrom bert.io import output_keras\n"})
  assert sorted(found) == ["bert.io.output_file: on an import cycle",
                           "bert.io.output_keras: on an import cycle"], found


def test_the_front_door_is_not_a_way_up():
  # `import bert` from inside the library would reach every layer through
  # the front door's lazy attributes.
  found = added_problems({"bert.networks.bert_encoder": "\nimport bert\n"})
  assert [p for p in found if p.startswith("bert.networks.bert_encoder:")], found


def test_a_new_package_must_be_placed():
  found = added_problems({"bert.unplaced": "import os\n"})
  assert found == ["bert.unplaced: in no layer (add it to LAYERS)"], found


# ------------------------------------------------- comments keep the why
# A machine's timing in a comment goes stale with the next CPU or release;
# figures live in bench/*.md. Matches "1.3-1.4x faster", "12 ms", "31 s ->
# 20 s", "~15% of the step", "3 seconds".
TIMING = re.compile(
    r"\d(?:[\d.]*)(?:\s*-\s*[\d.]+)?\s*[x×]\s+(?:faster|slower|speed)"
    r"|\b\d[\d.,]*\s*(?:ms|µs|us|msec|seconds?|secs?|minutes?|mins?|hours?)\b"
    r"|\b\d[\d.,]*\s?s\b(?!')"
    r"|\d[\d.]*\s*%\s+of\s+(?:the|a|its)\s+(?:step|run|time)\b", re.I)


def timing_comments(text: str, name: str) -> List[str]:
  """Comments and docstrings of a module that quote a timing."""
  found = []
  tokens = tokenize.generate_tokens(io.StringIO(text).readline)
  previous = None
  for tok in tokens:
    is_doc = (tok.type == tokenize.STRING and previous in (
        None, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL))
    if tok.type == tokenize.COMMENT or is_doc:
      match = TIMING.search(tok.string)
      if match:
        found.append(f"{name}:{tok.start[0]}: {match.group(0)!r}")
    if tok.type not in (tokenize.COMMENT, tokenize.NL):
      previous = tok.type
  return found


def test_no_comment_quotes_a_machine_timing():
  found = [hit for name, text in sorted(modules().items())
           for hit in timing_comments(text, name)]
  assert found == []


def test_a_timing_in_a_comment_or_docstring_is_found():
  text = ('"""Doc: runs 1.3-1.4x faster (Zen 5)."""\n'
          "x = 1  # about 12 ms per call, 31 s -> 20 s\n"
          "y = '40 s per step'   # a string, not a comment: allowed\n"
          "def f():\n  \"\"\"~15% of the step.\"\"\"\n")
  assert [h.split(":")[1] for h in timing_comments(text, "m")] == ["1", "2", "5"]


def keras_3_uses(text: str, name: str) -> List[str]:
  """Code (not comments or strings) that reaches Keras through `tf.keras`:
  Keras 3 in a process that did not ask for Keras 2 (a user's, pytest's).
  Its state is not tf_keras': `tf.keras.utils.set_random_seed` there leaves
  the seeds tf_keras' initializers draw, so a model built after it depends
  on what ran before in the process."""
  found = []
  names = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
           if t.type in (tokenize.NAME, tokenize.OP)]
  for a, dot, b in zip(names, names[1:], names[2:]):
    if (a.string, dot.string, b.string) == ("tf", ".", "keras"):
      found.append(f"{name}:{a.start[0]}")
  return found


def test_no_code_reaches_keras_through_tf_keras():
  sources = dict(modules(), **{
      os.path.relpath(path, ROOT): text for folder in ("tests", "bench")
      for path, text in _python_sources(os.path.join(ROOT, folder))})
  found = [hit for name, text in sorted(sources.items())
           for hit in keras_3_uses(text, name)]
  assert found == [], "use tf_keras, not tf.keras: " + ", ".join(found)


def test_a_use_of_tf_keras_is_found():
  text = ("import tensorflow as tf\n"
          "tf.keras.utils.set_random_seed(0)   # tf.keras in a comment: allowed\n"
          "code = 'tf.keras.Model'   # a string (a subprocess' code): allowed\n"
          "layer = tf . keras.layers.Dense(2)\n")
  assert keras_3_uses(text, "m") == ["m:2", "m:4"]
