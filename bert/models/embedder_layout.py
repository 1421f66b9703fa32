"""A `BertTextEmbedder`'s head and prompts from a sentence-transformers
layout (`bert.checkpoints.sentence_transformers.read_layout`) or from
arguments: what `BertTextEmbedder.from_pretrained` and `EmbeddingTask`
(`bert-train --task=embedding`) both build their embedder with."""

from typing import Optional, Sequence

from bert.checkpoints import sentence_transformers as st_layout
from bert.validation import ConfigError


def check_pooling(layout: Optional[st_layout.SentenceLayout], pooling, *,
                  owner: str, source: str,
                  how_to_pool: str = "pass pooling='mean' (or 'cls', 'max')"
                  ) -> None:
  """Something says how to pool: the layout, or `pooling`; else a
  ConfigError naming `owner` and `source`, ending in `how_to_pool`."""
  if layout is None and pooling is None:
    raise ConfigError(
        f"{owner}: {source} has no sentence-transformers modules.json to "
        f"say how to pool; {how_to_pool}")


def build_embedder(cls, encoder, layout: Optional[st_layout.SentenceLayout],
                   *, pooling=None, dense: Optional[Sequence[dict]] = None,
                   normalize: Optional[bool] = None, owner: str,
                   source: str):
  """`cls` (a `BertTextEmbedder` class) on `encoder`, in the caller's
  scope and policy, with the layout's pooling, dense layers (and their
  weights) and normalisation; `pooling`, `dense`, `normalize` override
  them. Without a layout `pooling` is needed (`check_pooling`)."""
  check_pooling(layout, pooling, owner=owner, source=source)
  dense_config = dense
  if dense_config is None:
    dense_config = [dict(units=d.kernel.shape[1], activation=d.activation,
                         use_bias=d.bias is not None,
                         residual=d.residual is not None)
                    for d in (layout.dense if layout else ())]
  model = cls(encoder,
              pooling=pooling if pooling is not None else layout.pooling,
              dense=dense_config,
              normalize=(normalize if normalize is not None
                         else bool(layout and layout.normalize)))
  if dense is None and layout and layout.dense:
    layers = model._dense  # pylint: disable=protected-access
    for (layer, residual), weights in zip(
        layers, st_layout.dense_weights(list(layout.dense))):
      layer.set_weights(weights[:len(layer.weights)])
      if residual is not None:
        residual.set_weights(weights[len(layer.weights):])
  object.__setattr__(model, "similarity",
                     layout.similarity if layout else "cosine")
  return model


def prompt_arguments(layout: Optional[st_layout.SentenceLayout],
                     prompts=None, default_prompt_name=None, *, owner: str,
                     source: str) -> dict:
  """`prompts` and `default_prompt_name` as `TextEmbedderPreprocessor`
  takes them: the layout's (none without one), `prompts` replacing its
  prompts (and default), `default_prompt_name` its default."""
  out = dict(prompts=dict(layout.prompts) if layout else {},
             default_prompt_name=layout.default_prompt_name if layout else None)
  if prompts is not None:
    out.update(prompts=prompts, default_prompt_name=default_prompt_name)
  elif default_prompt_name is not None:
    out["default_prompt_name"] = default_prompt_name
  if layout is not None and not layout.include_prompt and out["prompts"]:
    raise ConfigError(f"{owner}: {source} pools without its prompt tokens "
                      "(include_prompt false), which is not supported yet")
  return out
