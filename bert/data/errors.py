"""The error of malformed input data."""

from bert.errors import UserError


class DataError(UserError, ValueError):
  """Malformed input data; the message names the file and line."""
