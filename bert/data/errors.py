"""The error of malformed input data."""


class DataError(ValueError):
  """Malformed input data; the message names the file and line."""
