"""Span labeler serving: `question`, `context` -> `answer`, `score`, `start`,
`end`, over every window of the context."""

from typing import Sequence

import tensorflow as tf

from bert.features import ENCODER_INPUTS
from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.serving import squad_windows
from bert.serving.stages import ServingModule, cut_to_bucket

# The window bookkeeping preprocess hands to postprocess.
_WINDOW_KEYS = ("window_question", "window_offset", "window_start",
                "window_length", "max_context")


class SpanServing(ServingModule):
  """Question + context strings -> the best answer span (SQuAD v1.1).

  The context is cut into windows of `seq_length` every `doc_stride`
  pieces, as in training and `bert-train --mode=predict`; the batch of
  windows runs at its length bucket, and the answer is the best span over
  all windows, each piece scored only in its max-context window
  (`squad_windows`). `start`/`end` are UTF-8 byte offsets in the context;
  `answer` is "" (score 0) when no span qualifies.
  """

  string_inputs = ("question", "context")

  def __init__(self, model, vocab, lower_case: bool, seq_length: int,
               max_query_length: int, max_answer_length: int,
               doc_stride: int, buckets: Sequence[int], n_best_size: int = 20):
    self.tokenizer, _ = tokenizer_and_packer(vocab, lower_case, seq_length)
    self.special = self.tokenizer.get_special_tokens_dict()
    self.seq_length = seq_length
    self.max_query_length = max_query_length
    self.max_answer_length = max_answer_length
    self.doc_stride = doc_stride
    self.n_best_size = n_best_size
    super().__init__(model, buckets, name="span_labeler_serving")

  def _preprocess(self, strings):
    question = self.tokenizer(strings["question"])                  # [q, (n)]
    context, c_start, c_end = self.tokenizer.tokenize(
        strings["context"], with_offsets=True)                       # [q, (m)]
    windows = squad_windows.window_inputs(
        question, context, self.seq_length, self.doc_stride,
        self.max_query_length, self.special["start_of_sequence_id"],
        self.special["end_of_segment_id"], self.special["padding_id"])
    features = cut_to_bucket({k: windows[k] for k in ENCODER_INPUTS},
                             self.buckets)                           # [w, L]
    features.update({k: windows[k] for k in _WINDOW_KEYS})
    # Byte offsets of the context pieces, dense for the signature.
    features["context_pieces"] = tf.cast(context.row_lengths(), tf.int32)
    features["piece_start"] = c_start.to_tensor(0)                   # [q, m]
    features["piece_end"] = c_end.to_tensor(0)
    return features

  def _postprocess(self, strings, features, outputs):
    context = strings["context"]
    spans = squad_windows.best_spans(
        outputs["start_logits"], outputs["end_logits"],
        {k: features[k] for k in _WINDOW_KEYS}, tf.shape(context)[0],
        self.n_best_size, self.max_answer_length)
    lengths = features["context_pieces"]
    start, end = squad_windows.answer_byte_offsets(
        spans, tf.RaggedTensor.from_tensor(features["piece_start"], lengths),
        tf.RaggedTensor.from_tensor(features["piece_end"], lengths))
    return dict(answer=tf.strings.substr(context, start, end - start,
                                         unit="BYTE"),
                score=spans["score"], start=start, end=end)
