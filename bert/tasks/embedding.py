"""Sentence embeddings: contrastive fine-tuning of a `BertTextEmbedder`
(`bert-train --task=embedding`), the same objective as its Keras `fit`.

Data (`EmbeddingData`, `bert.data.text_columns`): columns of texts, one
example a row: (anchor, positive[, negative ...]) for the in-batch-negatives
ranking loss and the triplet loss, (a, b) with a score for CoSENT. Each
column is tokenized on its own ([CLS] text [SEP]) into `text_<i>/<input>`
features, as `TextEmbedderPreprocessor` encodes `fit`'s columns, and batched
as `fit` batches them (`bert.tasks.column_inputs`): so the same data and
seed give `fit` and `bert-train` the same batches, losses and weights.

The model is a `BertTextEmbedder` on the task's checkpoint, its pooling,
dense layers and normalisation from the checkpoint's sentence-transformers
layout (`EmbedderConfig` overrides them); the loss is `loss_stats` of
`bert.models.embedding_objective`, which `fit` minimises too.

Evaluation (`--mode=eval`, and during training): the loss on the eval
split, and with scores STS (Pearson and Spearman correlation of the pairs'
cosine with the scores), else retrieval: each first-column text (query)
searched among the eval split's distinct second-column texts (documents),
its own row's document relevant: recall@1/5/10, MRR@10, nDCG@10, ... as
`BertTextEmbedder.evaluate` computes them.
"""

from typing import Dict, List, Optional

import gin
import numpy as np
import tensorflow as tf

from bert.checkpoints import sentence_transformers as st_layout
from bert.data.text_columns import TextColumns, read_text_columns
from bert.metrics import sts_metrics
from bert.models import embedding_objective as objective
from bert.models.embedder_layout import (build_embedder, check_pooling,
                                         prompt_arguments)
from bert.models.embedder_preprocessor import (TextEmbedderPreprocessor,
                                               column_inputs, column_key)
from bert.models.text_embedder import BertTextEmbedder
from bert.tasks.column_inputs import ColumnInputs
from bert.tasks.configs import (EmbedderConfig, EmbeddingData, EncoderSource,
                                FinetuningInputs, ScheduleConfig, or_default)
from bert.tasks.finetuning import FinetuningTask
from bert.validation import ConfigError

OWNER = "EmbeddingTask"


@gin.configurable
class EmbeddingTask(FinetuningTask):
  """Fine-tunes a sentence embedder with a contrastive loss.

  Args:
    data: an `EmbeddingData` (files, text columns, score column).
    encoder: see `FinetuningTask`; a sentence-transformers folder (e.g.
      all-MiniLM-L6-v2) gives the pooling, dense layers, normalisation and
      similarity.
    inputs: see `FinetuningTask`; batches are never grouped by length.
    embedder: an `EmbedderConfig` (pooling, normalisation, loss, scale).
    schedule: see `FinetuningTask`.
  """

  loss_names = ("loss",)

  def __init__(self, data: Optional[EmbeddingData] = None,
               encoder: Optional[EncoderSource] = None,
               inputs: Optional[FinetuningInputs] = None,
               embedder: Optional[EmbedderConfig] = None,
               schedule: Optional[ScheduleConfig] = None):
    data = or_default(OWNER, "data", data, EmbeddingData)
    self.embedder = or_default(OWNER, "embedder", embedder, EmbedderConfig)
    self.num_columns = len(data.text_columns)
    self.scored = data.score_column is not None
    self.loss = objective.resolve_loss(
        f"{OWNER}: EmbedderConfig", self.embedder.loss, self.num_columns,
        self.scored, data=f"EmbeddingData has text_columns="
        f"{list(data.text_columns)} and score_column={data.score_column!r}")
    self.stat_names = objective.stat_names_of(self.loss)
    self._columns: Dict[str, TextColumns] = {}
    self._preprocessor: Optional[TextEmbedderPreprocessor] = None
    super().__init__(data, encoder, inputs, None, schedule)
    checkpoint = self.initial_checkpoint
    self.source = (checkpoint.folder if checkpoint is not None
                   else "a random encoder (EncoderSource.bert_config)")
    self.layout = (st_layout.read_layout(checkpoint.folder)
                   if checkpoint is not None else None)
    check_pooling(self.layout, self.embedder.pooling, owner=OWNER,
                  source=self.source, how_to_pool="set EmbedderConfig.pooling "
                  "= 'mean' (or 'cls', 'max')")
    self._prompts = prompt_arguments(self.layout, owner=OWNER,
                                     source=self.source)
    self.pipeline = ColumnInputs(self.encode, self.inputs, self.seq_length,
                                 self.length_buckets, OWNER,
                                 self.config.hidden_size, self.num_columns,
                                 records=self.pipeline.records)

  # ------------------------------------------------------------------ data
  def read_columns(self, split: str) -> TextColumns:
    """The rows of `split`'s file (train: the first max_train_examples)."""
    if split not in self._columns:
      path = self.files[split]
      if not path:
        raise ConfigError(f"EmbeddingData.{split}_file is not set")
      d = self.data
      self._columns[split] = read_text_columns(
          path, d.text_columns, d.score_column,
          d.max_train_examples if split == "train" else 0)
    return self._columns[split]

  def source_file(self, split) -> str:
    return self.read_columns(split).path

  def serving_gate(self, max_drop=None):
    """The accuracy gate of a reduced-precision export, on the eval split:
    retrieval recall@1 of its first column against its distinct second-
    column texts, or STS Spearman with scores (points)."""
    from bert.serving import gate  # pylint: disable=g-import-not-at-top
    rows = self.read_columns("eval")
    if self.scored:
      return gate.sts_gate(rows.texts[0], rows.texts[1], rows.scores,
                           rows.path, max_drop)
    documents, relevant = objective.unique_texts(rows.texts[1])
    return gate.retrieval_gate(rows.texts[0], documents, relevant, rows.path,
                               max_drop)

  def row_origins(self, split) -> List[str]:
    return [f"line {n}" for n in self.read_columns(split).lines]

  def records_task_name(self):
    score = (f",score_column={self.data.score_column}" if self.scored else "")
    return (f"EmbeddingTask(text_columns={','.join(self.data.text_columns)}"
            f"{score})")

  def encode(self, split):
    """`text_<i>/<input>` features of each column, as `fit` encodes them
    (`TextEmbedderPreprocessor.encode`); with scores, `score`; without,
    `document_id`: each row's second-column text's index among the
    split's distinct ones (the documents of retrieval evaluation)."""
    rows = self.read_columns(split)
    features = self.preprocessor().encode(tuple(rows.texts), rows.scores)
    if not self.scored:
      _, ids = objective.unique_texts(rows.texts[1])
      features["document_id"] = ids.astype(np.int32)
    return features

  # ----------------------------------------------------------------- model
  def preprocessor(self) -> TextEmbedderPreprocessor:
    """The model's preprocessor: this task's vocabulary, casing,
    seq_length, buckets and the checkpoint's prompts."""
    if self._preprocessor is None:
      self._preprocessor = TextEmbedderPreprocessor(
          **self._preprocessor_args(), **self._prompts)
    return self._preprocessor

  def build_model(self) -> BertTextEmbedder:
    return build_embedder(BertTextEmbedder, self.build_checkpoint().encoder,
                          self.layout, pooling=self.embedder.pooling,
                          normalize=self.embedder.normalize, owner=OWNER,
                          source=self.source)

  def model_inputs(self, features):
    return column_inputs(features, self.num_columns)

  def loss_denominators(self, features):
    # CoSENT is one value of the whole batch (`bert.losses.cosent_stats`):
    # 1 per replica; the other losses are means over the anchors.
    if self.loss == "cosent":
      return dict(loss=tf.constant(1.0))
    rows = tf.shape(features[column_key(0, "input_mask")])[0]
    return dict(loss=tf.cast(rows, tf.float32))

  def compute_stats(self, features, outputs):
    # embeddings [batch, columns, dim]; score [batch].
    e = self.embedder
    return objective.loss_stats(self.loss, outputs["embeddings"],
                                features.get("score"), scale=e.scale,
                                margin=e.margin)

  # ------------------------------------------------------------ evaluation
  def eval_outputs(self, features, outputs):
    out = dict(embeddings=outputs["embeddings"],
               example_row=features["example_row"])
    out.update({k: features[k] for k in ("score", "document_id")
                if k in features})
    return out

  def eval_metrics(self, collected):
    """STS of the pairs with scores, else retrieval of the documents."""
    order = np.argsort(collected["example_row"], kind="stable")
    embeddings = collected["embeddings"][order]         # [rows, columns, dim]
    if self.scored:
      return sts_metrics(embeddings[:, 0], embeddings[:, 1],
                         collected["score"][order])
    # Each distinct document once (its first row's vector); `relevant`:
    # each query's document among them.
    _, first, relevant = np.unique(collected["document_id"][order],
                                   return_index=True, return_inverse=True)
    similarity = self.layout.similarity if self.layout else "cosine"
    return objective.retrieval_of_embeddings(
        embeddings[:, 0], embeddings[first, 1], relevant, similarity)

  def predict(self, model, output_dir):
    raise ConfigError(f"{OWNER} has no predict mode: encode texts with the "
                      "trained model (BertTextEmbedder.encode) or its export")
