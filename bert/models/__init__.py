"""Models: networks composed with task heads."""

from bert.models.bert_pretrainer import BertPretrainer, build_pretraining_heads

__all__ = ["BertPretrainer", "build_pretraining_heads"]
