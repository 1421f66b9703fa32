"""The error of malformed input data (defined with the others in
`bert.errors`, which every layer may import)."""

from bert.errors import DataError  # noqa: F401 pylint: disable=unused-import
