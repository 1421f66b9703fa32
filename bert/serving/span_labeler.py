"""Span labeler serving: `question`, `context` -> `answer`, `score`, `start`,
`end`, over every window of the context."""

from typing import Sequence

import tensorflow as tf

from bert.data.squad_config import SquadConfig
from bert.features import ENCODER_INPUTS
from bert.layers.bert_pack_inputs import PackTemplate
from bert.layers.bert_tokenizer import BertTokenizer
from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.serving import host, squad_windows
from bert.serving.host_squad import WINDOW_KEYS
from bert.serving.stages import ServingModule, cut_to_bucket


class SpanServing(ServingModule):
  """Question + context strings -> the answer span.

  The context is cut into windows of `seq_length` every `doc_stride`
  pieces (`squad`, the training and predict settings), as in training and
  `predict`; the batch of windows runs at its length bucket, and the answer
  is the best span over all windows, each piece scored only in its
  max-context window (`squad_windows`). `start`/`end` are UTF-8 byte
  offsets in the context; `answer` is "" (score 0) when no span qualifies
  or (`version_2`) the null score wins.
  """

  string_inputs = ("question", "context")

  def __init__(self, model, vocab, lower_case: bool, squad: SquadConfig,
               buckets: Sequence[int]):
    self.tokenizer, _ = tokenizer_and_packer(vocab, lower_case,
                                             squad.seq_length)
    self.template = PackTemplate.of(self.tokenizer)
    squad.check_room(self.template.special_count(2))
    self.squad = squad
    super().__init__(model, buckets, name="span_labeler_serving")

  def _preprocess(self, strings):
    question = self.tokenizer(strings["question"])                  # [q, (n)]
    context, c_start, c_end = self.tokenizer.tokenize(
        strings["context"], with_offsets=True)                       # [q, (m)]
    t = self.template
    windows = squad_windows.window_inputs(
        question, context, self.squad, t.start_of_sequence_id,
        t.end_of_segment_id, t.padding_id, t.separators_between_segments,
        t.segment_type_ids)
    features = cut_to_bucket({k: windows[k] for k in ENCODER_INPUTS},
                             self.buckets)                           # [w, L]
    features.update({k: windows[k] for k in WINDOW_KEYS})
    # Byte offsets of the context pieces, dense for the signature.
    features["context_pieces"] = tf.cast(context.row_lengths(), tf.int32)
    features["piece_start"] = c_start.to_tensor(0)                   # [q, m]
    features["piece_end"] = c_end.to_tensor(0)
    return features

  def host(self):
    """Small batches in Python (`bert.serving.host`) where the tokenizer is
    BERT's WordPiece with no whole-matched special tokens."""
    if (not isinstance(self.tokenizer, BertTokenizer)
        or self.tokenizer.special_tokens):
      return None
    return host.span_labeler_spec(self.template, self.squad,
                                  self.buckets), self.tokenizer

  def _postprocess(self, strings, features, outputs):
    context = strings["context"]
    spans = squad_windows.best_spans(
        outputs["start_logits"], outputs["end_logits"],
        {k: features[k] for k in WINDOW_KEYS}, tf.shape(context)[0],
        self.squad)
    lengths = features["context_pieces"]
    start, end = squad_windows.answer_byte_offsets(
        spans, tf.RaggedTensor.from_tensor(features["piece_start"], lengths),
        tf.RaggedTensor.from_tensor(features["piece_end"], lengths))
    return dict(answer=tf.strings.substr(context, start, end - start,
                                         unit="BYTE"),
                score=tf.where(spans["answered"], spans["score"], 0.0),
                start=start, end=end)
