"""The concerns of the sentence-embedding task (`EmbeddingTask`): its files
and columns, and the embedder's pooling and contrastive loss."""

from typing import Optional, Tuple

import gin

from bert.layers.sentence_pooling import check_modes
from bert.models.embedding_objective import LOSSES
from bert.tasks.configs.common import config_class, set_field
from bert.tasks.configs.data import DataFiles
from bert.validation import (ConfigError, check_bool, check_choice,
                             check_float, check_int, check_str)


@gin.configurable
@config_class
class EmbeddingData(DataFiles):
  """Columns of texts, one example a row (`bert.data.text_columns`).

  Files: JSON lines (`.jsonl`: one object a line, the columns its keys) or
  a table with a header row naming the columns (`.tsv`, `.csv`).

  Attributes:
    text_columns: the texts of a row, in order: (anchor, positive) pairs,
      (anchor, positive, negative, ...) with hard negatives, or (a, b)
      pairs with a score column. For evaluation, the first column is the
      queries and the second their documents (retrieval), or the pairs of
      the scores (STS).
    score_column: the gold similarity of each (a, b) pair (CoSENT and STS
      evaluation); None: no scores.
    max_train_examples: use only the first N training rows (0 = all).
  """
  text_columns: Tuple[str, ...] = ("anchor", "positive")
  score_column: Optional[str] = None
  max_train_examples: int = 0

  def __post_init__(self):
    super().__post_init__()
    owner = type(self).__name__
    given = self.text_columns
    if isinstance(given, str) or not hasattr(given, "__iter__"):
      raise ConfigError(f"{owner}.text_columns must be a list of column "
                        f"names, got {given!r}")
    columns = tuple(given)
    if (len(columns) < 2 or len(set(columns)) != len(columns)
        or not all(isinstance(c, str) and c for c in columns)):
      raise ConfigError(f"{owner}.text_columns must name 2 or more distinct "
                        f"columns, got {given!r}")
    set_field(self, "text_columns", columns)
    check_str(owner, "score_column", self.score_column, optional=True)
    if self.score_column is not None and (
        self.score_column in columns or len(columns) != 2):
      raise ConfigError(f"{owner}.score_column={self.score_column!r} scores "
                        "(a, b) pairs: give it with two other text_columns, "
                        f"got {list(columns)!r}")
    check_int(owner, "max_train_examples", self.max_train_examples, minimum=0)


@gin.configurable
@config_class
class EmbedderConfig:
  """The embedder (`BertTextEmbedder`) and its training objective.

  Attributes:
    pooling: "mean", "cls", "max", ... or a list of them; None: the
      checkpoint's sentence-transformers layout (1_Pooling/config.json).
    normalize: L2-normalise the embeddings; None: as the layout says
      (a Normalize module), else False.
    loss: "auto" (CoSENT with a score column, else "ranking"), "ranking"
      (in-batch negatives, sentence-transformers'
      MultipleNegativesRankingLoss), "symmetric_ranking", "cosent" or
      "triplet" (as `BertTextEmbedder.compile`).
    scale: the similarity scale of the ranking and CoSENT losses (20 as
      sentence-transformers).
    margin: the triplet loss' margin (5 as sentence-transformers).
  """
  pooling: Optional[Tuple[str, ...]] = None
  normalize: Optional[bool] = None
  loss: str = "auto"
  scale: float = 20.0
  margin: float = 5.0

  def __post_init__(self):
    owner = type(self).__name__
    if self.pooling is not None:
      set_field(self, "pooling", check_modes(f"{owner}.pooling", self.pooling))
    check_bool(owner, "normalize", self.normalize, optional=True)
    check_choice(owner, "loss", self.loss, LOSSES)
    set_field(self, "scale", check_float(owner, "scale", self.scale, 0,
                                         min_open=True))
    set_field(self, "margin", check_float(owner, "margin", self.margin, 0))
