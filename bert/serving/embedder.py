"""Text-embedder serving: raw strings -> float32 embeddings [batch, dim].

The export follows TF Hub's text-embedding interface for TF2 SavedModels:
`obj = tf.saved_model.load(path); obj(["a text", ...])` -> [batch, dim]
(`hub.KerasLayer(path)` works the same way), and `serving_default` takes
`text` (string [batch]) and returns `embeddings` (float32 [batch, dim]).
The pooling, dense layers and L2 normalisation are the model's, in the
network stage; the model's default prompt, if any, is put before each text
in the graph, as `BertTextEmbedder.encode` does.

`ServedEmbedder` is what `load_serving` returns for such an export: the
serving callable plus `encode(texts)`, which runs a list in length order and
returns NumPy rows in the list's order, as the model's `encode` does.
"""

from typing import Callable, Dict, Sequence

import numpy as np
import tensorflow as tf

from bert.errors import DataError
from bert.layers.bert_pack_inputs import PackTemplate
from bert.layers.bert_tokenizer import BertTokenizer
from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.serving import host
from bert.serving.stages import ServingModule, cut_to_bucket

OUTPUT = "embeddings"


class EmbedderServing(ServingModule):
  """Raw strings -> the model's embeddings (its `call` on encoder inputs
  gives {"embeddings": [batch, dim]})."""

  string_inputs = ("text",)

  def __init__(self, model, vocab, lower_case: bool, seq_length: int,
               buckets: Sequence[int], prompt: str = ""):
    self.tokenizer, self.packer = tokenizer_and_packer(vocab, lower_case,
                                                       seq_length)
    self.prompt = str(prompt)
    super().__init__(model, buckets, name="embedder_serving")

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, text):
    """TF Hub's text-embedding call: string [batch] -> float32 [batch, dim]."""
    return self._serve({"text": text})[OUTPUT]

  def _trackable_children(self, save_type="checkpoint", **kwargs):
    # The Reusable SavedModel API's `obj.variables` (what hub.KerasLayer
    # reports), in the SavedModel only: checkpoint keys stay as they are.
    children = super()._trackable_children(save_type, **kwargs)
    if save_type == "savedmodel":
      children["variables"] = self.model_variables
    return children

  def _preprocess(self, strings):
    text = strings["text"]
    if self.prompt:
      text = tf.strings.join([self.prompt, text])
    return cut_to_bucket(self.packer([self.tokenizer(text)]), self.buckets)

  def host(self):
    """Small batches in Python (`bert.serving.host`) where the tokenizer is
    BERT's WordPiece with no whole-matched special tokens."""
    if (not isinstance(self.tokenizer, BertTokenizer)
        or self.tokenizer.special_tokens):
      return None
    return host.embedder_spec(PackTemplate.of(self.tokenizer),
                              self.packer.seq_length, self.buckets,
                              self.prompt), self.tokenizer

  def _postprocess(self, strings, features, outputs):
    return {OUTPUT: tf.cast(outputs[OUTPUT], tf.float32)}


def check_texts(texts, name: str = "texts") -> list:
  """`texts` as a non-empty list of str/bytes, or a DataError (one line)
  naming the first bad item."""
  if texts is None or isinstance(texts, (str, bytes, dict)) or not hasattr(
      texts, "__len__"):
    raise DataError(f"{name} is {type(texts).__name__}; give a list of strings")
  texts = list(texts)
  if not texts:
    raise DataError(f"{name} is empty: give at least one text")
  for i, text in enumerate(texts):
    if not isinstance(text, (str, bytes)):
      raise DataError(f"{name}[{i}] is {type(text).__name__}, not a string")
  return texts


class ServedEmbedder:
  """An embedder export as `load_serving` runs it (any precision).

  `served(text=[...])` -> {"embeddings": float32 [batch, dim]} tensors, one
  call, as the other exports; `served.encode(texts, batch_size=32)` -> NumPy
  [n, dim] over any number of texts.
  """

  def __init__(self, serve: Callable[..., Dict[str, tf.Tensor]]):
    self._serve = serve
    self.string_inputs = ("text",)

  def __call__(self, **strings) -> Dict[str, tf.Tensor]:
    return self._serve(**strings)

  def encode(self, texts, batch_size: int = 32) -> np.ndarray:
    """Embeddings of `texts`, float32 [n, dim], in order. Texts run in
    order of their UTF-8 length, so a batch's short texts are cut to a
    short bucket rather than padded to a long neighbour's."""
    texts = check_texts(texts)
    if (isinstance(batch_size, bool) or not isinstance(batch_size, int)
        or batch_size < 1):
      raise DataError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    data = []
    for i, text in enumerate(texts):
      try:
        data.append(text if isinstance(text, bytes) else text.encode("utf-8"))
      except UnicodeEncodeError as e:
        raise DataError(f"texts[{i}] is not valid Unicode: a lone surrogate "
                        f"at character {e.start}") from None
    order = np.argsort([len(t) for t in data], kind="stable")
    parts = [self._serve(text=[data[i] for i in order[s:s + batch_size]])
             [OUTPUT].numpy() for s in range(0, len(data), batch_size)]
    out = np.empty((len(data), parts[0].shape[1]), np.float32)
    out[order] = np.concatenate(parts)
    return out
