"""`FillMaskPreprocessor`: texts holding the mask token as a masked LM's
inputs and mask positions; its logits back as the best tokens per mask,
as transformers' fill-mask pipeline gives them.
"""

from typing import Optional

import numpy as np
import tf_keras

from bert.data.errors import DataError
from bert.models import inputs
from bert.models.preprocessor_base import BertPreprocessor
from bert.validation import check_int


@tf_keras.utils.register_keras_serializable(package="bert")
class FillMaskPreprocessor(BertPreprocessor):
  """Texts holding the vocabulary's mask token ("[MASK]", RoBERTa's
  "<mask>") -> the encoder inputs and `masked_lm_positions` (every mask of
  the row; 0 past the row's masks); `decode` gives, per text and per mask,
  the `top_k` tokens: {"token" (id), "token_str", "score" (probability),
  "sequence" (the text with that token in the mask's place)}, as
  transformers' fill-mask pipeline gives them.
  """

  def __init__(self, vocabulary, lower_case=None, seq_length=128,
               length_buckets=None, top_k: int = 5,
               clean_up_spaces: Optional[bool] = None, **kwargs):
    super().__init__(vocabulary, lower_case, seq_length, length_buckets,
                     **kwargs)
    self.top_k = check_int(type(self).__name__, "top_k", top_k, 1)
    # WordPiece sequences' spaces before punctuation: as the checkpoint's
    # tokenizer.json decoder says (`Vocabulary.clean_up_spaces`).
    self.clean_up_spaces = bool(self.vocabulary.clean_up_spaces
                                if clean_up_spaces is None else clean_up_spaces)
    self.mask_token = self.vocabulary.mask_token
    self.mask_id = self.tokenizer.get_special_tokens_dict().get("mask_id")
    if self.mask_id is None:
      raise DataError(f"{self.vocabulary.source} has no {self.mask_token} "
                      "token, which fill-mask needs")

  def _tokenizer_options(self, vocabulary):
    # The mask token is matched whole in the text (BytePairTokenizer and
    # SentencePieceTokenizer match theirs always; WordPiece's reference
    # tokenizer would split "[MASK]").
    if vocabulary.kind == "wordpiece":
      return dict(special_tokens=(vocabulary.mask_token,))
    return {}

  def model_inputs(self, features):
    return dict(super().model_inputs(features),
                masked_lm_positions=features["masked_lm_positions"])

  def check(self, x, y=None, num_classes=None):
    """x: a list of texts, each with at least one mask token."""
    del num_classes
    if y is not None:
      raise DataError("fill-mask takes texts alone (no labels)")
    texts = inputs.texts(x, "x")
    inputs.not_empty(texts, "x", "text")
    for i, text in enumerate(texts):
      text = text.decode("utf-8") if isinstance(text, bytes) else text
      if self.mask_token not in text:
        raise DataError(f"x[{i}] has no {self.mask_token} token: {text[:60]!r}")
    return texts, None

  def _encode(self, x, y):
    del y
    features = self.tokenizer.encode(x, seq_length=self.seq_length)
    is_mask = features["input_word_ids"] == self.mask_id         # [n, seq]
    counts = is_mask.sum(-1)
    for i, text in enumerate(x):
      text = text.decode("utf-8") if isinstance(text, bytes) else text
      if counts[i] < text.count(self.mask_token):
        raise DataError(f"x[{i}]: a {self.mask_token} token falls past "
                        f"seq_length={self.seq_length}")
    positions = np.zeros([len(x), max(1, int(counts.max()))], np.int32)
    for i, row in enumerate(is_mask):
      found = np.nonzero(row)[0]
      positions[i, :len(found)] = found
    features.update(masked_lm_positions=positions,
                    mask_count=counts.astype(np.int32))
    return features

  def decode(self, outputs, features, x):
    """Per text, per mask: the top_k [{"token", "token_str", "score",
    "sequence"}] best first."""
    logits = np.asarray(outputs["masked_lm_logits"], np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    pad = self.tokenizer.get_special_tokens_dict()["padding_id"]
    vocabulary = self.vocabulary
    out = []
    for i in range(len(probs)):
      count = int(features["mask_count"][i])
      ids = features["input_word_ids"][i][features["input_mask"][i] > 0]
      ids = ids[ids != pad]
      masks = []
      for m in range(count):
        p = probs[i, m]
        best = np.argsort(-p, kind="stable")[:self.top_k]
        where = features["masked_lm_positions"][i, m]
        row = []
        for token in best:
          filled = ids.copy()
          filled[where] = token
          row.append(dict(
              token=int(token), token_str=vocabulary.decode(
                  [token], clean_up_spaces=self.clean_up_spaces),
              score=float(p[token]),
              # One mask: special tokens left out; several: kept, so the
              # other masks show (as transformers' pipeline).
              sequence=vocabulary.decode(
                  filled, skip_special_tokens=count == 1,
                  clean_up_spaces=self.clean_up_spaces)))
        masks.append(row)
      out.append(masks)
    return out

  def get_config(self):
    return dict(super().get_config(), top_k=self.top_k,
                clean_up_spaces=self.clean_up_spaces)
