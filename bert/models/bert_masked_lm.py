"""`BertMaskedLM`: an encoder and its masked-LM head, asked to fill masks."""

from typing import Optional

import tf_keras

from bert.layers.masked_lm_head import MaskedLMHead
from bert.models._base import EncoderModel
from bert.models.preprocessors import FillMaskPreprocessor
from bert.networks.encoder_scaffold import EncoderScaffold
from bert.networks.pretraining_heads import build_pretraining_heads, check_tied


@tf_keras.utils.register_keras_serializable(package="bert")
class BertMaskedLM(EncoderModel):
  """Fill-mask: which tokens fit where the text has the mask token.

    model = BertMaskedLM.from_pretrained("folder_with_mlm_head")
    model.predict(["The [MASK] sat on the mat."])
    # [[[{"token": ..., "token_str": "cat", "score": 0.41,
    #     "sequence": "the cat sat on the mat."}, ...]]]

  Inputs: the encoder's dict plus `masked_lm_positions` int32 [batch, P].
  Output: `masked_lm_logits` float32 [batch, P, vocab], computed only at
  those positions. The head is the checkpoint's (tied to the word
  embeddings); `from_pretrained` refuses a checkpoint without one.
  """

  extra_inputs = ("masked_lm_positions",)
  preprocessor_class = FillMaskPreprocessor
  _needs_pretraining_heads = True
  main_output = "masked_lm_logits"

  @classmethod
  def _from_checkpoint(cls, checkpoint, labels=None, **head_args):
    del labels
    if not checkpoint.has_heads:
      raise ValueError(f"{checkpoint.folder or 'the checkpoint'}: no "
                       "masked-LM head, which fill-mask needs (a checkpoint "
                       "saved with its pre-training heads)")
    return cls(checkpoint.encoder, masked_lm=checkpoint.masked_lm, **head_args)

  def __init__(self, encoder: EncoderScaffold,
               masked_lm: Optional[MaskedLMHead] = None, **kwargs):
    if masked_lm is None:
      masked_lm, _ = build_pretraining_heads(encoder, next_sentence=False)
    else:
      check_tied(masked_lm, encoder)
    kwargs.setdefault("name", "bert_masked_lm")
    super().__init__(encoder, **kwargs)
    self.masked_lm = masked_lm
    self._built_with({})

  def call(self, inputs, training=None):
    sequence = self._encode(inputs, training)["sequence_output"]  # [b, s, h]
    return dict(masked_lm_logits=self.masked_lm(
        sequence, inputs["masked_lm_positions"]))                 # [b, P, v]

  def export(self, path: str, precision: Optional[str] = None, runtime=None) -> dict:
    """Serving SavedModel: `text` -> per mask the top-k `token`,
    `token_str` and `score` (`bert.export.export_fill_mask`; top_k as the
    preprocessor's; `precision`, `runtime`: `bert.export.write_serving`)."""
    from bert import export  # pylint: disable=g-import-not-at-top
    pre = self._needs_preprocessor("export")
    return export.export_fill_mask(
        self, path, pre.vocabulary, pre.lower_case, pre.seq_length,
        top_k=pre.top_k, clean_up_spaces=pre.clean_up_spaces,
        precision=precision, length_buckets=pre.length_buckets,
        runtime=runtime)
