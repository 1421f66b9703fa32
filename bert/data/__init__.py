"""Input pipelines and data preparation (TFRecords, tokenization, packing)."""

from bert.data import length_buckets
from bert.data.dynamic_masking import DynamicMasker
from bert.data.pretraining_data import PretrainingDataConfig
from bert.data.pretraining_dataset import pretraining_dataset
from bert.data.pretraining_shards import create_pretraining_data
from bert.data.tokenization import Tokenizer
from bert.data.vocab import Vocab

__all__ = ["DynamicMasker", "length_buckets", "PretrainingDataConfig", "Tokenizer",
           "Vocab", "create_pretraining_data", "pretraining_dataset"]
