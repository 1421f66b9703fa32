"""The base class of every error that means "the input is wrong".

The library's user-facing errors (bad data, checkpoint, config, serving
export, download, a model_dir in use) all derive from `UserError`, so one
`except UserError` tells a user's mistake from a bug: the command-line tools
print it as one line (`error: ...`), and the fuzz tests accept it as the
outcome of a damaged file. Each also keeps its historical built-in base
(ValueError, OSError, RuntimeError), so existing `except` clauses still work.
This module imports nothing: every other module may use it.
"""


class UserError(Exception):
  """Wrong input (a file, field, argument or path the message names)."""


class DataError(UserError, ValueError):
  """Malformed input data; the message names the file and line."""
