"""The one path from a pretrained source to a model: `load_pretrained`, under
every model's `from_pretrained` and under `load_encoder` (the bare encoder
and its preprocessor)."""

from typing import Callable, Optional, Tuple

from absl import logging

from bert import checkpoints
from bert import precision as precision_lib
from bert.models.preprocessors import TextClassifierPreprocessor


def load_pretrained(source: str, build: Callable, *, owner: str,
                    precision: Optional[str] = None, with_heads: bool = False
                    ) -> Tuple[object, object]:
  """(checkpoint, built): `source` loaded (`bert.checkpoints.load`: a folder
  of any format it reads, or a preset name) and `build(checkpoint)`, both in
  the compute policy `precision` names (None: the default, "auto" unless
  BERT_PRECISION says otherwise; "auto": `bert.precision.choose`, logged;
  the choice is kept on the result as `precision_choice`)."""
  choice = precision_lib.choose(precision)
  with precision_lib.policy_scope(choice.policy):
    ckpt = checkpoints.load(source, with_heads=with_heads)
    built = build(ckpt)
  object.__setattr__(built, "precision_choice", choice)
  if precision in (None, "auto"):
    logging.info("%s: %s", owner, choice.describe())
  return ckpt, built


def load_encoder(source: str, *, seq_length: int = 128,
                 precision: Optional[str] = None):
  """The `BertEncoder` of `source` with its weights, and
  `encoder.preprocessor`: strings (or a pair of string tensors) -> its
  inputs, with the checkpoint's vocabulary and casing:

    encoder = bert.models.load_encoder("all_minilm_l6_v2")
    encoder(encoder.preprocessor(tf.constant(["a sentence"])))

  `precision` as in the models' `from_pretrained`.
  """
  ckpt, encoder = load_pretrained(source, lambda c: c.encoder,
                                  owner="load_encoder", precision=precision)
  # Not a tracked layer of the encoder: saving the encoder saves the encoder
  # alone.
  object.__setattr__(encoder, "preprocessor",
                     TextClassifierPreprocessor.from_checkpoint(
                         ckpt, seq_length=seq_length))
  return encoder
