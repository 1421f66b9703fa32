"""Command-line entry points (absl apps), installed as `bert-*` commands."""
