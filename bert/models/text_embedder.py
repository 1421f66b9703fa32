"""`BertTextEmbedder`: one vector per text (sentence embeddings), for
similarity and semantic search; trained with contrastive losses."""

from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert.checkpoints import sentence_transformers as st_layout
from bert.layers.sentence_pooling import SentencePooling, check_modes
from bert.models import embedding_objective as objective_lib
from bert.models._base import EncoderModel
from bert.models.embedder_layout import build_embedder, prompt_arguments
from bert.models.embedder_preprocessor import TextEmbedderPreprocessor
from bert.models.pretrained import load_pretrained
from bert.validation import ConfigError, check_int


def _dense_layers(dense: Sequence[dict]):
  """(layer, residual layer or None) per dense config."""
  out = []
  for i, d in enumerate(dense):
    layer = tf_keras.layers.Dense(
        int(d["units"]), activation=d.get("activation", "tanh"),
        use_bias=bool(d.get("use_bias", True)), dtype="float32",
        name=f"dense_{i}")
    residual = None
    if d.get("residual"):
      residual = tf_keras.layers.Dense(int(d["units"]), use_bias=False,
                                       dtype="float32", name=f"residual_{i}")
    out.append((layer, residual))
  return out


@tf_keras.utils.register_keras_serializable(package="bert")
class BertTextEmbedder(objective_lib.EmbeddingTraining, EncoderModel):
  """Texts -> embeddings [batch, dim]: the encoder's `sequence_output`
  pooled over real tokens (`pooling`: "mean", "cls", "max", ...; see
  `SentencePooling`), then optional dense layers, then optional L2
  normalisation: sentence-transformers' Transformer -> Pooling -> Dense ->
  Normalize pipeline, which `from_pretrained` reads from its folder.

  Inputs: the encoder's dict ([batch, seq]) -> {"embeddings": [batch, dim]};
  or columns `{"text_0": inputs, "text_1": inputs, ...}` (what training
  batches hold: anchors, positives, ...) -> {"embeddings": [batch, k, dim]}.
  Output float32.

  dense: a list of {"units", "activation" (Keras name), "use_bias",
    "residual"} (sentence-transformers' Dense modules).
  """

  _head_config = ("pooling", "dense", "normalize")
  preprocessor_class = TextEmbedderPreprocessor
  main_output = "embeddings"

  def __init__(self, encoder, pooling: Sequence[str] = ("mean",),
               dense: Sequence[dict] = (), normalize: bool = False, **kwargs):
    kwargs.setdefault("name", "bert_text_embedder")
    super().__init__(encoder, **kwargs)
    self.pooling = list(check_modes("BertTextEmbedder", pooling))
    self.dense = [dict(d) for d in dense]
    for i, d in enumerate(self.dense):
      check_int("BertTextEmbedder", f"dense[{i}]['units']", d.get("units"), 1)
    if not isinstance(normalize, bool):
      raise ConfigError(f"BertTextEmbedder: normalize must be True or False, "
                        f"got {normalize!r}")
    self.normalize = normalize
    self.pool = SentencePooling(self.pooling, name="pooling")
    self._dense = _dense_layers(self.dense)
    width = self.hidden_size * len(self.pooling)
    heads = {self.pool: [None, None, self.hidden_size]}
    for layer, residual in self._dense:
      heads[layer] = [None, width]
      if residual is not None:
        heads[residual] = [None, width]
      width = layer.units
    self.dim = width
    self._built_with(heads)

  def _embed(self, inputs, training):
    """Encoder inputs [batch, seq] -> embeddings [batch, dim], float32."""
    sequence = self._encode(inputs, training)["sequence_output"]
    x = self.pool(sequence, inputs["input_mask"])          # [batch, width]
    for layer, residual in self._dense:
      y = layer(x)
      x = y + residual(x) if residual is not None else y
    if self.normalize:
      x = tf.math.l2_normalize(x, -1, epsilon=1e-24)   # torch's eps 1e-12
    return x

  def call(self, inputs, training=None):
    if "input_word_ids" in inputs:
      return {"embeddings": self._embed(inputs, training)}
    columns = [inputs[f"text_{i}"] for i in range(len(inputs))]
    return {"embeddings": tf.stack([self._embed(c, training) for c in columns],
                                   1)}                     # [batch, k, dim]

  # ----------------------------------------------------- from_pretrained
  @classmethod
  def from_pretrained(cls, source, *, seq_length: Optional[int] = None,
                      pooling=None, dense=None, normalize=None,
                      lower_case=None, prompts=None, default_prompt_name=None,
                      precision: Optional[str] = None):
    """An embedder on `source`: a checkpoint folder of any format the
    loader reads, or a preset. A sentence-transformers folder gives the
    pooling, dense layers (with weights), normalisation, max_seq_length and
    prompts; arguments override them, and any other folder needs `pooling`.

    seq_length: the longest text in word pieces (default: the folder's
      max_seq_length, else 128); `precision`: as the other models'
      `from_pretrained` ("auto": bf16 where the CPU runs it fast).
    """
    owner = f"{cls.__name__}.from_pretrained"
    layout = {}

    def build(ckpt):
      found = st_layout.read_layout(ckpt.folder) if ckpt.folder else None
      layout["found"] = found
      return build_embedder(cls, ckpt.encoder, found, pooling=pooling,
                            dense=dense, normalize=normalize, owner=owner,
                            source=source)

    ckpt, model = load_pretrained(source, build, owner=owner,
                                  precision=precision)
    found = layout["found"]
    kwargs = prompt_arguments(found, prompts, default_prompt_name,
                              owner=owner, source=source)
    if lower_case is not None:
      kwargs["lower_case"] = lower_case
    if seq_length is None and found is not None and found.max_seq_length:
      seq_length = min(found.max_seq_length,
                       ckpt.config.max_position_embeddings)
    if seq_length is not None:
      kwargs["seq_length"] = seq_length
    model.attach_preprocessor(TextEmbedderPreprocessor.from_checkpoint(
        ckpt, **kwargs))
    return model

  similarity = "cosine"

  # -------------------------------------------------------------- encode
  def encode(self, texts, batch_size: int = 32, normalize: Optional[bool] = None,
             prompt_name: Optional[str] = None, prompt: Optional[str] = None,
             show_progress: Optional[bool] = None) -> np.ndarray:
    """Embeddings of `texts` (a list of strings), float32 [n, dim], in
    order. Rows run in length order, each batch cut to its length bucket.

    normalize: L2-normalise the rows (None: only if the model's last step
      does). prompt / prompt_name: text put before each input (None: the
      model's default prompt, if any). show_progress: a progress bar (None:
      for more than 20 batches).
    """
    pre = self._needs_preprocessor("encode")
    batch_size = check_int(f"{self.name}.encode", "batch_size", batch_size, 1)
    features = pre.encode_texts(texts, pre.prompt(prompt_name, prompt))
    n = len(features["input_word_ids"])
    if show_progress is None:
      show_progress = n > 20 * batch_size
    bar = tf_keras.utils.Progbar(n, unit_name="text") if show_progress else None
    fn = self.inference_forward(features, "inference_embeddings")

    def run(batch):
      out = fn(batch)
      if bar is not None:
        bar.add(int(out.shape[0]))
      return {"embeddings": out}

    out = pre.predict_features(run, features, batch_size)["embeddings"]
    if normalize:
      out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out.astype(np.float32, copy=False)

  def inference_embeddings(self, batch):
    """The embeddings of `batch` ([batch, dim]) in inference mode, before
    `encode`'s normalisation."""
    return self._embed(batch, False)

  def encode_queries(self, texts, **kwargs) -> np.ndarray:
    """`encode` with the model's "query" prompt, if it has one."""
    return self._encode_as("query", texts, kwargs)

  def encode_documents(self, texts, **kwargs) -> np.ndarray:
    """`encode` with the model's "document" prompt, if it has one."""
    return self._encode_as("document", texts, kwargs)

  def _encode_as(self, name, texts, kwargs):
    pre = self._needs_preprocessor("encode")
    if "prompt" not in kwargs and "prompt_name" not in kwargs:
      if name in pre.prompts:
        kwargs["prompt_name"] = name
      elif pre.default_prompt_name is not None:
        kwargs["prompt"] = ""
    return self.encode(texts, **kwargs)

  def export(self, path: str, precision: Optional[str] = None, gate=None,
             runtime=None) -> dict:
    """Serving SavedModel: raw strings -> `embeddings` (float32 [batch,
    dim]), TF Hub's text-embedding interface (`tf.saved_model.load(path)
    (texts)`); the rows `encode` gives, normalised as the model does, with
    its default prompt. `precision`: fp32, bf16, int8 or auto (see
    `bert.export.write_serving`); a reduced one needs `gate`: an
    `AccuracyGate` or a dev file (`bert.serving.gate.embedding_gate`: a
    SQuAD json for recall@1, an STS tsv for Spearman), and is refused when
    it scores more than 0.5 points below fp32. `runtime`: what runs the
    network (`bert.export.write_serving`). Returns the manifest."""
    from bert import export  # pylint: disable=g-import-not-at-top
    pre = self._needs_preprocessor("export")
    return export.export_embedder(
        self, path, pre.vocabulary, pre.lower_case, pre.seq_length,
        precision=precision, length_buckets=pre.length_buckets, gate=gate,
        prompt=pre.prompt(), runtime=runtime)

  def get_config(self):
    return dict(super().get_config(), pooling=list(self.pooling),
                dense=[dict(d) for d in self.dense], normalize=self.normalize)
