"""Serving on CPU: raw-string serving graphs, reduced-precision runtimes, and
the loader that hides which one an export uses."""
