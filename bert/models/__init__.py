"""Models: networks composed with task heads."""

from bert.models.bert_classifier import BertClassifier
from bert.models.bert_pretrainer import BertPretrainer, build_pretraining_heads

__all__ = ["BertClassifier", "BertPretrainer", "build_pretraining_heads"]
