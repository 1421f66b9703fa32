"""Input pipelines and data preparation (TFRecords, tokenization, packing)."""
