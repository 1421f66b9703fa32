"""Task preprocessors: what a task model built by `from_pretrained` carries as
`model.preprocessor`, so `fit`, `evaluate` and `predict` take raw inputs.

A preprocessor holds the checkpoint's vocabulary and casing and the
`seq_length`; it turns a task's raw inputs into the model's int inputs (the
same ids and packing as the task classes and `bert-train`: one tokenizer,
`bert.data.Tokenizer`, run in-graph over batches), builds the `tf.data`
pipeline over them (for training, the stream `bert-train` draws from:
shuffled, batches of one length bucket, cut to it: no compute on padding), and turns the model's outputs back into
what the task means (labels and probabilities, one tag per word).

  TextClassifierPreprocessor   strings, or (a, b) pairs of string lists
  TokenClassifierPreprocessor  lists of words (one list per sentence)
  SpanLabelerPreprocessor      (questions, contexts)
  MultipleChoicePreprocessor   (contexts, endings)
  FillMaskPreprocessor         texts with the mask token

Each is in a module of its own, named after it; they are imported from
here.
"""

from bert.models.fill_mask_preprocessor import FillMaskPreprocessor
from bert.models.multiple_choice_preprocessor import MultipleChoicePreprocessor
from bert.models.span_labeler_preprocessor import SpanLabelerPreprocessor
from bert.models.text_classifier_preprocessor import TextClassifierPreprocessor
from bert.models.token_classifier_preprocessor import (
    TokenClassifierPreprocessor)

__all__ = ["FillMaskPreprocessor", "MultipleChoicePreprocessor",
           "SpanLabelerPreprocessor", "TextClassifierPreprocessor",
           "TokenClassifierPreprocessor"]
