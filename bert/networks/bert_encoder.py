"""`BertEncoder`: the BERT encoder network of a `BertConfig`."""

from typing import Any, Dict, Union

import tf_keras

from bert.config import BertConfig
from bert.layers.bert_embedding import BertEmbedding
from bert.layers.transformer_encoder_block import TransformerEncoderBlock
from bert.networks.encoder_scaffold import EncoderScaffold


def scaffold_kwargs(config: BertConfig) -> Dict[str, Any]:
  """The `EncoderScaffold` arguments that make up BERT for `config`."""
  return dict(
      embedding_cls=BertEmbedding,
      embedding_cfg=dict(
          vocab_size=config.vocab_size,
          hidden_size=config.hidden_size,
          max_position_embeddings=config.max_position_embeddings,
          type_vocab_size=config.type_vocab_size,
          embedding_size=config.embedding_size,
          dropout_rate=config.hidden_dropout_prob,
          initializer_range=config.initializer_range,
          layer_norm_epsilon=config.layer_norm_epsilon,
          position_offset=config.position_offset),
      block_cls=TransformerEncoderBlock,
      block_cfg=dict(
          num_attention_heads=config.num_attention_heads,
          intermediate_size=config.intermediate_size,
          intermediate_activation=config.hidden_act,
          hidden_dropout_rate=config.hidden_dropout_prob,
          attention_dropout_rate=config.attention_probs_dropout_prob,
          norm_first=config.norm_first,
          layer_norm_epsilon=config.layer_norm_epsilon,
          initializer_range=config.initializer_range),
      num_layers=config.num_hidden_layers,
      num_block_groups=config.num_hidden_groups,
      use_pooler=config.use_pooler,
      initializer_range=config.initializer_range)


@tf_keras.utils.register_keras_serializable(package="bert")
class BertEncoder(EncoderScaffold):
  """BERT (and its family, by `BertConfig.family`): `BertEmbedding` +
  `TransformerEncoderBlock` x L + pooler.

  Inputs and outputs follow the TF Hub BERT encoder interface; see
  `EncoderScaffold`. Example:

    encoder = BertEncoder(BertConfig.preset("bert_base"))
    outputs = encoder(dict(input_word_ids=ids, input_mask=mask,
                           input_type_ids=type_ids))
    outputs["pooled_output"]  # [batch, 768]
  """

  def __init__(self, config: Union[BertConfig, Dict[str, Any]],
               return_attention_probs: bool = False, **kwargs):
    if isinstance(config, dict):
      config = BertConfig.from_dict(config)
    config.validate()
    kwargs.setdefault("name", "bert_encoder")
    super().__init__(**scaffold_kwargs(config),
                     return_attention_probs=return_attention_probs, **kwargs)
    self._bert_config = config

  @property
  def config(self) -> BertConfig:
    return self._bert_config

  def get_config(self):
    return dict(config=self._bert_config.to_dict(),
                return_attention_probs=self._scaffold_config[
                    "return_attention_probs"],
                name=self.name, trainable=self.trainable)
