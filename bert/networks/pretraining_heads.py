"""BERT's two pre-training heads on an encoder: a network of their own, so
that checkpoint loaders (which restore them) and the pre-training model
(which trains them) build the same layers."""

import tensorflow as tf

from bert.layers.classification_head import ClassificationHead
from bert.layers.masked_lm_head import MaskedLMHead


def build_pretraining_heads(encoder, next_sentence: bool = True):
  """BERT's pre-training heads for `encoder`, built: (masked_lm, next_sentence).

  The masked-LM head is tied to the encoder's word-embedding table; the
  next-sentence head (ALBERT's sentence-order head has the same shape) is a
  dense layer to 2 logits on `pooled_output` (no dropout, as google-research
  `get_next_sentence_output`); None without `next_sentence`.
  """
  config = encoder.config
  masked_lm = MaskedLMHead(
      vocab_size=config.vocab_size, activation=config.hidden_act,
      initializer_range=config.initializer_range,
      layer_norm_epsilon=config.layer_norm_epsilon,
      embedding_table=encoder.get_embedding_table(), name="masked_lm")
  masked_lm(tf.zeros([1, 1, config.hidden_size]), tf.zeros([1, 1], tf.int32))
  if not next_sentence:
    return masked_lm, None
  sentence = ClassificationHead(
      num_classes=2, dropout_rate=0.0,
      initializer_range=config.initializer_range, name="next_sentence")
  sentence(tf.zeros([1, config.hidden_size]))
  return masked_lm, sentence


def check_tied(masked_lm: MaskedLMHead, encoder) -> None:
  """A ValueError unless `masked_lm` projects with `encoder`'s own word
  embeddings: a head given to a model must be tied to that model's encoder
  (an untied copy would train apart from the embeddings it predicts)."""
  if masked_lm.embedding_table is not encoder.get_embedding_table():
    raise ValueError("masked_lm must be tied to this encoder's word "
                     "embeddings (embedding_table=encoder.get_embedding_table())")
