"""SQuAD window and answer settings: one object, checked once, passed whole.

The task (`QuestionAnsweringTask`, which builds it from its gin concerns
`SquadData`, `AnswerConfig` and `FinetuningInputs.seq_length`), the Keras
preprocessor, the serving export and its in-graph windows all take a
`SquadConfig`, so the defaults below and the window check are stated once.
"""

import dataclasses

from bert.validation import ConfigError, check_bool, check_float, check_int


@dataclasses.dataclass(frozen=True)
class SquadConfig:
  """How contexts are cut into windows and answers searched (the flags of
  google-research `run_squad.py`).

  Attributes:
    seq_length: the length of a window's row, [CLS] question [SEP] context
      [SEP], in word pieces.
    doc_stride: a new window every `doc_stride` context pieces.
    max_query_length: the question is cut to this many pieces.
    n_best_size: the start and end positions of a window the answer search
      keeps (the best by logit).
    max_answer_length: the longest answer, in pieces.
    version_2: SQuAD 2.0: the answer is "" when the null score ([CLS]) beats
      the best span by more than `null_score_diff_threshold`.
  """
  seq_length: int = 384
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2: bool = False
  null_score_diff_threshold: float = 0.0

  def __post_init__(self):
    owner = type(self).__name__
    for name, value in check_fields(owner, **dataclasses.asdict(self)).items():
      object.__setattr__(self, name, value)
    # The window check: every question leaves room for one context piece.
    self.check_room(3)

  def check_room(self, special_tokens: int) -> None:
    """A ConfigError unless a question of `max_query_length` pieces and a
    row's `special_tokens` (BERT 3, RoBERTa 4: `PackTemplate.special_count(2)`)
    leave room for a context piece."""
    if self.max_query_length + special_tokens >= self.seq_length:
      raise ConfigError(
          f"{type(self).__name__}.max_query_length={self.max_query_length} "
          f"leaves no room for the context in seq_length={self.seq_length} "
          f"(query + context + {special_tokens} special tokens)")

  def replace(self, **settings) -> "SquadConfig":
    """This config with some fields changed (and checked again)."""
    unknown = sorted(set(settings) - set(FIELDS))
    if unknown:
      raise ConfigError(f"{', '.join(unknown)}: not a SquadConfig field "
                        f"(the fields: {', '.join(FIELDS)})")
    return dataclasses.replace(self, **settings)


FIELDS = tuple(f.name for f in dataclasses.fields(SquadConfig))


def _checked(owner: str, name: str, value):
  if name == "version_2":
    return check_bool(owner, name, value)
  if name == "null_score_diff_threshold":
    return check_float(owner, name, value)
  return check_int(owner, name, value, minimum=1)


def check_fields(owner: str, **values):
  """The given `SquadConfig` fields, checked (errors name `owner.field`) and
  normalised; also the check of the task configs that carry some of them
  (`SquadData`, `AnswerConfig`)."""
  unknown = sorted(set(values) - set(FIELDS))
  if unknown:
    raise ConfigError(f"{owner}: {', '.join(unknown)} is not a SquadConfig "
                      "field")
  return {name: _checked(owner, name, value) for name, value in values.items()}
