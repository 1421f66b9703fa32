"""Loading and writing BERT checkpoints: TF1, Model Garden TF2, Hugging Face."""

from bert.checkpoints.compat import check_same_shapes, check_vocab_size
from bert.checkpoints.errors import CheckpointError, CheckpointMismatchError
from bert.checkpoints.initialize import init_from_checkpoint
from bert.checkpoints.loader import (FORMATS, BertCheckpoint,
                                     CheckedCheckpoint, build,
                                     build_discriminator_head,
                                     build_pretraining_heads, detect_format,
                                     load, read)
from bert.checkpoints.saver import save

__all__ = ["BertCheckpoint", "CheckedCheckpoint", "CheckpointError",
           "CheckpointMismatchError", "FORMATS", "build",
           "build_discriminator_head", "build_pretraining_heads", "check_same_shapes", "check_vocab_size",
           "detect_format", "init_from_checkpoint", "load", "read", "save"]
