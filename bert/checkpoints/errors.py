"""Errors raised when a checkpoint cannot be read as asked."""

from bert.errors import UserError


class CheckpointError(UserError, ValueError):
  """A checkpoint folder or file is missing, unreadable or of unknown format."""


class CheckpointMismatchError(CheckpointError):
  """The checkpoint's variables do not match the model variable for variable.

  The message names every variable at fault, with expected and found shapes,
  and the file.
  """
