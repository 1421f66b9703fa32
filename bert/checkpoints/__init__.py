"""Loading and writing BERT checkpoints: TF1, Model Garden TF2, Hugging Face."""

from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.checkpoints.loader import (FORMATS, BertCheckpoint,
                                     build_pretraining_heads, detect_format,
                                     load, save)

__all__ = ["BertCheckpoint", "CheckpointError", "CheckpointMismatchError",
           "FORMATS", "build_pretraining_heads", "detect_format", "load", "save"]
