"""Keras training and evaluation of `BertTextEmbedder`: the contrastive
losses (`bert.losses`), sentence-transformers' default recipe for
`compile()`, and `evaluate` as STS or retrieval."""

from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from bert.models import _keras_raw as raw_inputs
from bert.validation import ConfigError, check_choice, check_float

# The objectives (`bert.losses`); "auto" picks by the data: scored pairs
# (x=(a, b), y=scores) -> cosent, else the in-batch-negatives ranking loss.
LOSSES = ("auto", "ranking", "symmetric_ranking", "cosent", "triplet")


def default_recipe():
  """sentence-transformers' trainer defaults (Hugging Face
  TrainingArguments): AdamW lr 5e-5, eps 1e-8, no weight decay, no warmup,
  linear decay to 0, gradient norm clipped to 1."""
  from bert.optimization import OptimizerConfig  # pylint: disable=g-import-not-at-top
  return OptimizerConfig(learning_rate=5e-5, warmup_fraction=0.0,
                         weight_decay=0.0, epsilon=1e-8, clip_norm=1.0)


class EmbeddingTraining:
  """Mixed into `BertTextEmbedder` before `EncoderModel` (whose
  `KerasTraining` runs the step: `bert.train_step`, as `bert-train`)."""

  needs_y = False
  _loss_choice = "auto"
  _loss_name = "ranking"
  scale = 20.0
  margin = 5.0

  def compile(self, optimizer="auto", loss="auto", metrics="auto",
              scale: float = 20.0, margin: float = 5.0, **kwargs):
    """Keras `compile`; the defaults are sentence-transformers' recipe.

    optimizer: "auto": `default_recipe()` (the schedule spans the steps
      the first `fit` runs); or an `OptimizerConfig` or Keras optimizer.
    loss: "auto" (ranking without scores, CoSENT with them), "ranking"
      (MultipleNegativesRankingLoss: x=(anchors, positives[, negatives]),
      cosine * scale, the other rows' positives as negatives),
      "symmetric_ranking" (also positives -> anchors), "cosent"
      (x=(a, b), y=gold scores), "triplet" (x=(anchors, positives,
      negatives): Euclidean distances, `margin`).
    scale: the similarity scale of the ranking and CoSENT losses (1 /
      temperature; 20 as sentence-transformers).
    jit_compile (in kwargs): off unless given (see below).
    """
    owner = f"{type(self).__name__}.compile"
    if not isinstance(loss, str):
      raise ConfigError(f"{owner}: loss must be one of {list(LOSSES)}, got "
                        f"{type(loss).__name__}")
    check_choice(owner, "loss", loss, LOSSES)
    self.scale = check_float(owner, "scale", scale, 0, min_open=True)
    self.margin = check_float(owner, "margin", margin, 0)
    if isinstance(optimizer, str) and optimizer == "auto":
      optimizer = default_recipe()
    self._loss_choice = loss
    self._loss_name = "ranking" if loss == "auto" else loss
    if isinstance(metrics, str) and metrics == "auto":
      metrics = []
    self.__dict__.pop("_stat_metrics", None)
    # XLA compiles the step once per input shape, and every text column is
    # cut to its own length bucket, so a run meets up to buckets^columns
    # shapes; the step is faster without XLA (bench/EMBEDDINGS.md).
    if kwargs.get("jit_compile") is None:
      kwargs["jit_compile"] = False
    super().compile(optimizer=optimizer, loss="auto", metrics=metrics, **kwargs)

  @property
  def stat_names(self):
    return stat_names_of(self._loss_name)

  def _use_loss(self, columns: int, scored: bool) -> None:
    """Resolves "auto" for data of `columns` text columns (with scores or
    not) and checks the loss fits that data."""
    name = resolve_loss(f"{self.name}.fit", self._loss_choice, columns,
                        scored)
    if name != self._loss_name:
      self._loss_name = name
      names = self.stat_names
      from bert import train_step as step  # pylint: disable=g-import-not-at-top
      object.__setattr__(self, "_stat_metrics", step.stat_means(names))
    self.train_function = self.test_function = None

  def fit(self, x=None, y=None, batch_size=None, epochs=1, **kwargs):
    """Keras `fit` on raw columns of texts: x=(anchors, positives[,
    negatives ...]) for the ranking and triplet losses, x=(a, b) with
    y=scores for CoSENT; or batches as `TextEmbedderPreprocessor.dataset`
    makes them. Batches are drawn at random, each column cut to its own
    length: the order `bert-train --task=embedding` draws at its default
    `FinetuningInputs.seed` (`length_buckets.SHUFFLE_SEED`); another order
    is `fit(preprocessor.dataset(features, training=True, seed=...))`."""
    raw, peeled = raw_inputs.raw(self, x)
    if raw:
      columns = len(peeled) if isinstance(peeled, tuple) else 1
      self._use_loss(columns, y is not None)
    elif isinstance(x, tf.data.Dataset):
      spec = x.element_spec
      scored = isinstance(spec, tuple) and len(spec) > 1
      self._use_loss(len(spec[0] if isinstance(spec, tuple) else spec), scored)
    return super().fit(peeled if raw else x, y, batch_size=batch_size,
                       epochs=epochs, **kwargs)

  def objective(self, x, y, outputs):
    """Stats of a batch of columns; embeddings [batch, k, dim]."""
    del x
    if outputs["embeddings"].shape.rank != 3:
      raise ValueError(f"{self.name}: training takes columns of texts "
                       "({'text_0': inputs, 'text_1': inputs, ...})")
    return loss_stats(self._loss_name, outputs["embeddings"], y,
                      scale=self.scale, margin=self.margin)

  # ------------------------------------------------------------ evaluate
  def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
    """On raw texts, the metrics of embeddings (a dict):
      x=(a, b), y=gold scores: STS, the Pearson and Spearman correlation of
        cosine similarity with the scores (`bert.metrics.sts_metrics`);
      x=(queries, documents), no y: retrieval, each query against every
        distinct document, its own pair's document relevant: recall@1/5/10,
        MRR@10, nDCG@10 (`bert.metrics.retrieval_metrics`).
    Otherwise Keras `evaluate` of the loss on batches of columns.
    """
    raw, peeled = raw_inputs.raw(self, x)
    if not raw:
      return super().evaluate(x, y, batch_size=batch_size, **kwargs)
    size = raw_inputs.batch_size(self, "evaluate", batch_size, 32)
    columns, scores = self.preprocessor.check(peeled, y)
    if len(columns) != 2:
      raise ConfigError(f"{self.name}.evaluate: x must be (a, b) with y=scores"
                        " or (queries, documents)")
    if scores is not None:
      return sts_evaluation(self, columns[0], columns[1], scores, size)
    return retrieval_evaluation(self, columns[0], columns[1], size)


# ------------------------------------------------------------- the loss
# One definition each, shared by `fit` (`objective`) and `bert-train
# --task=embedding` (`EmbeddingTask.compute_stats`).
def resolve_loss(owner: str, choice: str, columns: int, scored: bool,
                 data: Optional[str] = None) -> str:
  """The loss `choice` ("auto" resolved) for data of `columns` text
  columns, with scores or not; a ConfigError naming `owner` if it does not
  fit that data, saying what it takes in `fit`'s terms (x, y) or, given
  `data` (where the data comes from), in general terms and then `data`."""
  name = choice
  if name == "auto":
    name = "cosent" if scored else "ranking"
  kind = name if name in ("cosent", "triplet") else "ranking"
  fits = {"cosent": (columns, scored) == (2, True),
          "triplet": (columns, scored) == (3, False),
          "ranking": columns >= 2 and not scored}[kind]
  if not fits:
    takes = ({"cosent": "x=(a, b) pairs and y=scores",
              "triplet": "x=(anchors, positives, negatives) and no y",
              "ranking": "x=(anchors, positives[, negatives ...]) and no y"}
             if data is None else
             {"cosent": "(a, b) pairs with scores",
              "triplet": "(anchor, positive, negative) triplets, no scores",
              "ranking": "(anchor, positive[, negative ...]) columns, no "
                         "scores"})[kind]
    raise ConfigError(f"{owner}: loss={name!r} takes {takes}"
                      + (f"; {data}" if data else ""))
  return name


def stat_names_of(loss: str):
  """The stats `loss_stats` gives for the (resolved) `loss`."""
  return ("loss",) if loss == "cosent" else ("loss", "accuracy")


def loss_stats(loss: str, embeddings, scores=None, scale: float = 20.0,
               margin: float = 5.0):
  """`bert.embedding_losses` stats of the (resolved) `loss` on a batch of
  columns: embeddings [batch, k, dim] (anchors, positives, ...), scores
  [batch] (CoSENT's gold similarities)."""
  from bert import embedding_losses as losses  # pylint: disable=g-import-not-at-top
  columns = [embeddings[:, i] for i in range(embeddings.shape[1])]
  if loss == "cosent":
    return losses.cosent_stats(columns[0], columns[1], scores, scale=scale)
  if loss == "triplet":
    return losses.triplet_stats(*columns[:3], margin=margin)
  return losses.ranking_stats(columns[0], columns[1:], scale=scale,
                              symmetric=loss == "symmetric_ranking")


# ----------------------------------------------------------- evaluation
def sts_evaluation(model, a, b, scores, batch_size: int = 32) -> Dict[str, float]:
  from bert import metrics  # pylint: disable=g-import-not-at-top
  return metrics.sts_metrics(model.encode(a, batch_size=batch_size),
                             model.encode(b, batch_size=batch_size), scores)


def retrieval_evaluation(model, queries, documents, batch_size: int = 32,
                         k: int = 100) -> Dict[str, float]:
  """Retrieval metrics of `queries` against the distinct `documents`, the
  i-th query's relevant document being documents[i]."""
  corpus, doc_ids = unique_texts(documents)
  return retrieval_of_embeddings(
      model.encode_queries(list(queries), batch_size=batch_size),
      model.encode_documents(corpus, batch_size=batch_size), doc_ids,
      model.similarity, k)


def retrieval_of_embeddings(queries, corpus, relevant_ids, similarity: str,
                            k: int = 100) -> Dict[str, float]:
  """Retrieval metrics of queries [n, dim] searched in corpus [m, dim]
  (`bert.retrieval.Index`, exact, by `similarity`), query i's relevant
  document being corpus[relevant_ids[i]]."""
  from bert import metrics  # pylint: disable=g-import-not-at-top
  from bert import retrieval  # pylint: disable=g-import-not-at-top
  index = retrieval.Index(corpus.shape[1], metric=similarity)
  index.add(corpus)
  depth = min(k, len(corpus))
  _, ranked = index.search(queries, k=depth)
  # A corpus under 10 documents: the cutoffs it can hold.
  cut = min(10, depth)
  return metrics.retrieval_metrics(
      ranked, [{int(i)} for i in relevant_ids],
      ks=tuple(c for c in (1, 5, 10) if c <= depth), mrr_at=cut, ndcg_at=cut)


def unique_texts(texts):
  """(distinct texts in first-seen order, each text's index among them)."""
  first: Dict[object, int] = {}
  ids = np.asarray([first.setdefault(t, len(first)) for t in texts], np.int64)
  return list(first), ids
