"""`init_from_checkpoint`: a checkpoint copied into a model built elsewhere
(a task builds its model from the checkpoint instead: `loader.build`)."""

from typing import Union

from bert.checkpoints.compat import check_same_shapes
from bert.checkpoints.loader import BertCheckpoint, load


def init_from_checkpoint(model, source: Union[str, BertCheckpoint]
                         ) -> BertCheckpoint:
  """Copies a checkpoint into `model`: its encoder weights, and the
  pre-training heads when the model has them (`masked_lm`,
  `next_sentence`) and so does the checkpoint.

  `source` is a checkpoint folder (any format `load` reads), a preset name,
  or a checkpoint `load` returned. `model` is an encoder or a
  model with an `encoder`; the checkpoint's config must give the same
  variable shapes (`check_same_shapes`). Returns the checkpoint.
  """
  encoder = getattr(model, "encoder", model)
  with_heads = hasattr(model, "masked_lm") and hasattr(model, "next_sentence")
  ckpt = (source if isinstance(source, BertCheckpoint)
          else load(source, with_heads=with_heads))
  name = source if isinstance(source, str) else f"({ckpt.format} format)"
  check_same_shapes(ckpt.config, encoder.config, name)
  encoder.set_weights(ckpt.encoder.get_weights())
  if with_heads and ckpt.has_heads:
    model.masked_lm.set_weights(ckpt.masked_lm.get_weights())
    model.next_sentence.set_weights(ckpt.next_sentence.get_weights())
  return ckpt
