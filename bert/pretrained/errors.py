"""The errors a preset download raises.

They are `OSError`s, because every one of them is a failure to get files onto
disk, and a caller that already handles I/O errors handles these too. Each
message is one line that names the URL or file and says what to do.
"""

from bert.errors import UserError


class DownloadError(UserError, OSError):
  """A preset could not be downloaded (network, HTTP status, truncated body),
  or what was downloaded does not read as a checkpoint."""


class ChecksumError(DownloadError):
  """A downloaded or cached file does not have the expected content."""


class UnsafeArchiveError(DownloadError):
  """An archive member would be written outside its folder, or is a link."""
