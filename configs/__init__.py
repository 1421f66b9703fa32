"""Bundled gin configs (`bert-train --gin_file=NAME.gin` finds them by name)."""
