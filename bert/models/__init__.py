"""Models: networks composed with task heads."""

from bert.models.bert_classifier import BertClassifier
from bert.models.bert_multiple_choice import BertMultipleChoice
from bert.models.bert_span_labeler import BertSpanLabeler
from bert.models.bert_pretrainer import BertPretrainer, build_pretraining_heads
from bert.models.bert_token_classifier import BertTokenClassifier

__all__ = ["BertClassifier", "BertMultipleChoice", "BertPretrainer", "BertSpanLabeler",
           "BertTokenClassifier",
           "build_pretraining_heads"]
