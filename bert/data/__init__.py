"""Input pipelines and data preparation (TFRecords, tokenization, packing)."""

from bert.data.tokenization import Tokenizer

__all__ = ["Tokenizer"]
