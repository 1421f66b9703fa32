"""google-research ELECTRA TF1 checkpoints: their variable names <-> ours
(google-research BERT's, `mapping.py`), and the config of a released one,
which comes without a config file.

Names are those of github.com/google-research/electra's `modeling.py` and
`run_pretraining.py` (one checkpoint holds both networks):
  electra/embeddings/...              the word, position and type tables and
                                      their LayerNorm (the generator shares
                                      them unless its embeddings are untied:
                                      generator/embeddings/...)
  electra/embeddings_project/...      bert/encoder/embedding_hidden_mapping_in
                                      (only when embedding_size != hidden)
  electra/encoder/layer_i/...         bert/encoder/layer_i/... (BERT's block)
  discriminator_predictions/dense/... and .../dense_1/...
                                      cls/discriminator_predictions/...
  generator/embeddings_project/..., generator/encoder/layer_i/...
                                      the generator, a smaller encoder
  generator_predictions/{dense,LayerNorm}/..., .../output_bias
                                      its masked-LM head: cls/predictions/
                                      transform/..., cls/predictions/output_bias
The discriminator is read when the file has one, else the generator (and
the generator also when the folder's config file describes its width, not
the discriminator's); the other network's weights are kept under
`mapping.OTHER_NETWORK_PREFIX`, so strict loading reports them as ignored.
ELECTRA's `modeling.py` computes "gelu" exactly (erf), which is our
"gelu_exact".
"""

from typing import Dict, Optional

import numpy as np
from absl import logging

from bert.checkpoints import mapping
from bert.checkpoints.errors import CheckpointError
from bert.config import BertConfig
from bert.validation import ConfigError

# (their prefix, ours), first match wins; a name keeps what follows the
# prefix (so an optimizer slot, `.../kernel/adam_m`, follows its weight).
_DISCRIMINATOR = (
    ("electra/embeddings/", "bert/embeddings/"),
    ("electra/embeddings_project/",
     "bert/encoder/embedding_hidden_mapping_in/"),
    ("electra/encoder/", "bert/encoder/"),
    ("discriminator_predictions/", mapping.DISCRIMINATOR_PREFIX),
)
_GENERATOR = (
    ("generator/embeddings/", "bert/embeddings/"),   # untied embeddings
    ("electra/embeddings/", "bert/embeddings/"),     # shared with the
                                                     # discriminator
    ("generator/embeddings_project/",
     "bert/encoder/embedding_hidden_mapping_in/"),
    ("generator/encoder/", "bert/encoder/"),
    ("generator_predictions/dense/", "cls/predictions/transform/dense/"),
    ("generator_predictions/LayerNorm/",
     "cls/predictions/transform/LayerNorm/"),
    ("generator_predictions/output_bias", "cls/predictions/output_bias"),
)
ELECTRA_SCOPES = ("electra/", "generator/", "discriminator_predictions/",
                   "generator_predictions/")


def electra_to_canonical(arrays: Dict[str, np.ndarray], source: str,
                         hidden_size: Optional[int] = None
                         ) -> Dict[str, np.ndarray]:
  """{our TF1 name: array} of ELECTRA's: the discriminator's, or the
  generator's when the file has no discriminator or `hidden_size` (the
  width the folder's config file describes) is the generator's width and
  not the discriminator's. Names of no rule are kept."""
  widths = {scope: np.shape(arrays.get(
      f"{scope}/encoder/layer_0/attention/self/query/kernel", ()))[-1:]
            for scope in ("electra", "generator")}
  generator = (hidden_size is not None
               and widths["generator"] == (hidden_size,)
               and widths["electra"] != (hidden_size,))
  discriminator = not generator and any(n.startswith("electra/encoder/")
                                        for n in arrays)
  rules = _DISCRIMINATOR if discriminator else _GENERATOR
  untied = any(n.startswith("generator/embeddings/") for n in arrays)
  out = mapping.RenamedArrays(source)
  for name, value in arrays.items():
    target = None
    for theirs, ours in rules:
      if name.startswith(theirs):
        if not discriminator and untied and theirs == "electra/embeddings/":
          break           # the discriminator's own tables: not the generator's
        target = ours + name[len(theirs):]
        break
    if target is not None:
      out.put(target, value, name)
    elif name.startswith(ELECTRA_SCOPES):
      # The other network of the pair (and its head): not this model's.
      out.put(mapping.OTHER_NETWORK_PREFIX + name, value, name)
    else:
      out.put(name, value, name)
  return dict(out)


def electra_from_canonical(arrays: Dict[str, np.ndarray]
                           ) -> Dict[str, np.ndarray]:
  """{our TF1 name: array} in ELECTRA's names: the encoder as
  google-research's discriminator (with its head when it has one), or, with
  a masked-LM head, as its generator; names of neither (a pooler) keep
  BERT's."""
  generator = any(n.startswith("cls/predictions/") for n in arrays)
  if generator and any(n.startswith(mapping.DISCRIMINATOR_PREFIX)
                       for n in arrays):
    raise CheckpointError(
        "save: google-research ELECTRA keeps the masked-LM head on the "
        "generator, a network of its own; a TF1 checkpoint holds an encoder "
        "with the discriminator head or with the masked-LM head, not both")
  rules = [r for r in (_GENERATOR if generator else _DISCRIMINATOR)
           if r[0] != "generator/embeddings/"]
  out = {}
  for name, value in arrays.items():
    theirs = next((t + name[len(o):] for t, o in rules if name.startswith(o)),
                  name)
    out[theirs] = value
  return out


def electra_config(arrays, source: str) -> BertConfig:
  """The config of a released ELECTRA checkpoint (no config file): shapes
  from the weights, the rest as ELECTRA's `get_bert_config` sets them:
  `num_attention_heads = max(1, hidden_size // 64)`, exact GELU, dropout
  0.1, no pooler."""
  def shape(name):
    if name not in arrays or np.ndim(arrays[name]) == 0:
      raise CheckpointError(f"{source}: no variable {name}; cannot infer the "
                            "ELECTRA config (add a bert_config.json)")
    return arrays[name].shape

  vocab_size, width = shape("bert/embeddings/word_embeddings")
  hidden = shape("bert/encoder/layer_0/attention/self/query/kernel")[-1]
  layers = mapping.num_layer_blocks(arrays)
  config = dict(
      family="electra", vocab_size=vocab_size, hidden_size=hidden,
      num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64),
      intermediate_size=shape(
          "bert/encoder/layer_0/intermediate/dense/kernel")[-1],
      hidden_act="gelu_exact",
      max_position_embeddings=shape("bert/embeddings/position_embeddings")[0],
      type_vocab_size=shape("bert/embeddings/token_type_embeddings")[0],
      embedding_size=width if width != hidden else None,
      use_pooler="bert/pooler/dense/kernel" in arrays)
  logging.info("%s: no config file; ELECTRA config inferred: %s", source,
               config)
  try:
    return BertConfig(**config)
  except ConfigError as e:
    raise CheckpointError(f"{source}: the variables' shapes make no ELECTRA "
                          f"config ({e})") from None
