"""`SpanLabelerPreprocessor`: (questions, contexts) as a span labeler's
windows, as `bert.data.squad_examples` encodes SQuAD; its start and end
logits back as answers cut from the contexts (`bert.data.squad_eval`).
"""

import dataclasses
from typing import Optional

import tf_keras

from bert.data import squad_config, squad_eval, squad_examples
from bert.data.squad_config import SquadConfig
from bert.models import inputs
from bert.models.preprocessor_base import BertPreprocessor


@tf_keras.utils.register_keras_serializable(package="bert")
class SpanLabelerPreprocessor(BertPreprocessor):
  """(questions, contexts) -> windows, answers cut from the contexts.

  `squad` (a `bert.data.squad_config.SquadConfig`; its fields may also be
  given one by one, e.g. `doc_stride=64`, and `seq_length` overrides its
  own) says how: each (question, context) becomes windows of `seq_length`
  pieces every `doc_stride` context pieces, the question (at most
  `max_query_length` pieces) first, as `bert.data.squad_examples` encodes
  SQuAD. Targets for `fit`: one answer per question, `(text,
  answer_start)` with the start in characters of the context (or `None`
  for no answer: SQuAD 2.0). `predict` runs the task's post-processing
  (`bert.data.squad_eval.postprocess`): n-best spans inside the context,
  each piece scored only in its max-context window, at most
  `max_answer_length` pieces, the answer cut from the original context with
  its character offsets; with `version_2`, "" when the null score wins by
  more than `null_score_diff_threshold`.
  """

  sequence_outputs = ("start_logits", "end_logits")

  def __init__(self, vocabulary, lower_case=None, seq_length=None,
               length_buckets=None, squad: Optional[SquadConfig] = None,
               **kwargs):
    settings = {k: kwargs.pop(k) for k in squad_config.FIELDS if k in kwargs}
    if seq_length is not None:
      settings["seq_length"] = seq_length
    squad = (squad or SquadConfig()).replace(**settings)
    super().__init__(vocabulary, lower_case, squad.seq_length,
                     length_buckets, **kwargs)
    # RoBERTa's rows have one special token more than BERT's.
    squad.check_room(self.tokenizer.template.special_count(2))
    self.squad = squad

  def check(self, x, y=None, num_classes=None):
    """x: (questions, contexts); y: per question (text, answer_start), a
    dict of them, or None (no answer)."""
    del num_classes
    return inputs.questions_and_answers(x, y)

  def examples(self, x, y=None):
    """SQuAD examples of checked `x` and answers `y`."""
    return [squad_examples.SquadExample(
        str(i), question, context,
        [] if y is None or y[i] is None else [y[i]],
        y is not None and y[i] is None)
            for i, (question, context) in enumerate(zip(*x))]

  def _encode(self, x, y):
    examples = self.examples(x, y)
    arrays, meta = squad_examples.encode_examples(
        examples, self.tokenizer, self.squad, training=y is not None)
    # The windows' bookkeeping for `decode` (not model inputs).
    return dict(arrays, examples=examples, meta=meta)

  def targets(self, features):
    return {k: features[k] for k in ("start_positions", "end_positions")}

  def decode(self, outputs, features, x):
    """{"answers": text per question (`postprocess`' predictions), "start",
    "end": its character offsets in the context (None for no answer),
    "nbest": the n-best lists}."""
    examples = features["examples"]
    predictions, nbest, _ = squad_eval.postprocess(
        examples, features["meta"], outputs["start_logits"],
        outputs["end_logits"], self.squad)
    answers = [predictions[e.qas_id] for e in examples]
    # The answer's entry of its n-best list (texts there are distinct).
    chosen = [next((b for b in nbest[e.qas_id] if a and b["text"] == a),
                   dict(start=None, end=None))
              for e, a in zip(examples, answers)]
    return dict(answers=answers, start=[b["start"] for b in chosen],
                end=[b["end"] for b in chosen],
                nbest=[nbest[e.qas_id] for e in examples])

  def get_config(self):
    # The fields one by one (seq_length is the base's), as models saved
    # before `squad` existed hold them.
    settings = dataclasses.asdict(self.squad)
    del settings["seq_length"]
    return dict(super().get_config(), **settings)
