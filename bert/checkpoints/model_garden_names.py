"""The names of a Model Garden encoder's weights, as TF1's (`mapping.py`):
its block and embedding attributes, the path patterns of its layer list,
masked-LM head, other heads and `ElectraPretrainer` networks, and its
attention weights' shapes (`flatten`). `model_garden` reads and writes
checkpoints with them; the TF Hub and KerasHub readers reuse `flatten`.
"""

import re

# A transformer block's sub-layers (attribute paths) -> TF1's.
BLOCK = {
    "_attention_layer/_query_dense": "attention/self/query",
    "_attention_layer/_key_dense": "attention/self/key",
    "_attention_layer/_value_dense": "attention/self/value",
    "_attention_layer/_output_dense": "attention/output/dense",
    "_attention_layer_norm": "attention/output/LayerNorm",
    "_intermediate_dense": "intermediate/dense",
    "_output_dense": "output/dense",
    "_output_layer_norm": "output/LayerNorm",
}
_ATTRIBUTE_EMBEDDINGS = {
    "_embedding_layer/embeddings": "bert/embeddings/word_embeddings",
    "_position_embedding_layer/_position_embeddings":
        "bert/embeddings/position_embeddings",
    "_position_embedding_layer/embeddings": "bert/embeddings/position_embeddings",
    "_type_embedding_layer/embeddings": "bert/embeddings/token_type_embeddings",
    "_embedding_norm_layer/gamma": "bert/embeddings/LayerNorm/gamma",
    "_embedding_norm_layer/beta": "bert/embeddings/LayerNorm/beta",
    "_embedding_projection/kernel": "bert/encoder/embedding_hidden_mapping_in/kernel",
    "_embedding_projection/bias": "bert/encoder/embedding_hidden_mapping_in/bias",
    "_pooler_layer/kernel": "bert/pooler/dense/kernel",
    "_pooler_layer/bias": "bert/pooler/dense/bias",
}
_ATTRIBUTE_PATH = re.compile(
    r"(?:(?P<root>.+)/)?(?:(?P<emb>" +
    "|".join(re.escape(k) for k in _ATTRIBUTE_EMBEDDINGS) +
    r")|_transformer_layers/(?P<layer>\d+)/(?P<sub>" +
    "|".join(re.escape(k) for k in BLOCK) +
    r")/(?P<leaf>kernel|bias|gamma|beta))")
FUNCTIONAL_PATH = re.compile(r"(?:(?P<root>.+)/)?layer_with_weights-(?P<index>\d+)/(?P<sub>.+)")
MASKED_LM = {
    "dense/kernel": "cls/predictions/transform/dense/kernel",
    "dense/bias": "cls/predictions/transform/dense/bias",
    "layer_norm/gamma": "cls/predictions/transform/LayerNorm/gamma",
    "layer_norm/beta": "cls/predictions/transform/LayerNorm/beta",
    "output_bias.Sbias": "cls/predictions/output_bias",
    "bias": "cls/predictions/output_bias",
    # Only when not the encoder's own table (an untied head): not a BERT
    # weight, so strict loading names it.
    "embedding_table": "cls/predictions/embedding_table",
}
MASKED_LM_PATH = re.compile(r"(?:.+/)?masked_lm/(?P<sub>" +
                            "|".join(re.escape(k) for k in MASKED_LM) + ")")
OTHER_HEADS = re.compile(r"(?:.+/)?(?:next_sentence\.\.pooler_dense|"
                         r"classification_heads/\d+)/.+")
OTHER_HEADS_PREFIX = "cls/model_garden/"

# Model Garden's `ElectraPretrainer` (a training checkpoint,
# `tf.train.Checkpoint(model=pretrainer)`): its discriminator is the encoder
# read; the generator's network and heads are another model.
ELECTRA_ROOT = re.compile(r"(?P<root>(?:.+/)?)discriminator_network/.+")
ELECTRA_HEAD = {
    "discriminator_projection/kernel": "dense/kernel",
    "discriminator_projection/bias": "dense/bias",
    "discriminator_head/kernel": "dense_1/kernel",
    "discriminator_head/bias": "dense_1/bias",
}


def flatten(name, value):
  """Model Garden's [hidden, heads, size] / [heads, size] / [heads, size,
  hidden] attention weights -> TF1 2-D / 1-D."""
  if "attention/output/dense/kernel" in name and value.ndim == 3:
    return value.reshape(-1, value.shape[-1])
  if "attention/self/" in name:
    if name.endswith("/kernel") and value.ndim == 3:
      return value.reshape(value.shape[0], -1)
    if name.endswith("/bias") and value.ndim == 2:
      return value.reshape(-1)
  return value


def attribute_name(path: str):
  """(root, TF1 name) for an attribute path of the encoder, else None."""
  m = _ATTRIBUTE_PATH.fullmatch(path)
  if not m:
    return None
  if m.group("emb"):
    return m.group("root"), _ATTRIBUTE_EMBEDDINGS[m.group("emb")]
  return m.group("root"), (f"bert/encoder/layer_{m.group('layer')}/"
                           f"{BLOCK[m.group('sub')]}/{m.group('leaf')}")
