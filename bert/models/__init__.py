"""Models: networks composed with task heads, each with its preprocessor.

A new head: subclass `EncoderModel` (one `call`, `get_config`), pair it with
a `BertPreprocessor` subclass, and `from_pretrained`, `fit`, `predict` and
`save` come with it (see the task models here, and docs/design.md).
"""

from bert.models._base import EncoderModel, per_example
from bert.models.bert_classifier import BertClassifier
from bert.models.bert_masked_lm import BertMaskedLM
from bert.models.bert_multiple_choice import BertMultipleChoice
from bert.models.bert_pretrainer import BertPretrainer
from bert.models.bert_span_labeler import BertSpanLabeler
from bert.models.bert_token_classifier import BertTokenClassifier
from bert.models.distiller import Distiller
from bert.models.electra_pretrainer import ElectraPretrainer
from bert.models.embedder_preprocessor import TextEmbedderPreprocessor
from bert.models.preprocessor_base import BertPreprocessor
from bert.models.preprocessors import (FillMaskPreprocessor,
                                       MultipleChoicePreprocessor,
                                       SpanLabelerPreprocessor,
                                       TextClassifierPreprocessor,
                                       TokenClassifierPreprocessor)
from bert.models.pretrained import load_encoder, load_pretrained
from bert.models.text_embedder import BertTextEmbedder
from bert.networks.pretraining_heads import build_pretraining_heads

__all__ = ["BertClassifier", "BertMaskedLM", "BertMultipleChoice",
           "BertPreprocessor", "FillMaskPreprocessor",
           "BertPretrainer", "BertSpanLabeler", "BertTokenClassifier",
           "BertTextEmbedder", "Distiller", "ElectraPretrainer", "EncoderModel", "MultipleChoicePreprocessor",
           "SpanLabelerPreprocessor", "TextClassifierPreprocessor",
           "TextEmbedderPreprocessor",
           "TokenClassifierPreprocessor", "build_pretraining_heads",
           "load_encoder", "load_pretrained", "per_example"]
