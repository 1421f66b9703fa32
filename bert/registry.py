"""Where a lower layer finds code that lives in a layer above it.

Imports run one way (docs/design.md): `bert.checkpoints` sits below the tasks,
yet `checkpoints.load` reads a `bert-train` run, whose model only its task can
rebuild. The higher layer's function is registered here, under a kind and a
name, by the package's front door (`bert/__init__.py`), and the lower layer
looks it up by name: neither imports the other. Pure Python: importing it
loads nothing.
"""

from typing import Callable, Dict, Optional, Tuple

_ENTRIES: Dict[Tuple[str, str], Callable] = {}


def register(kind: str, name: str, fn: Callable) -> None:
  """Registers `fn` as the `name` of `kind` (the last registration wins)."""
  _ENTRIES[(kind, name)] = fn


def lookup(kind: str, name: str) -> Optional[Callable]:
  """The function registered as `name` of `kind`, or None."""
  return _ENTRIES.get((kind, name))
