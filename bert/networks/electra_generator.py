"""ELECTRA's generator: a smaller encoder reading the discriminator's
embedding tables (`SharedEmbedding`, `build_generator`).

ELECTRA ties the generator's and the discriminator's token embeddings (and
with them, in google-research ELECTRA, the position and type tables and
their LayerNorm: both models build their embeddings in one variable scope),
while each keeps its own projection to its own hidden width. `BertEmbedding`
owns its projection, so the generator cannot simply reuse the
discriminator's layer: `SharedEmbedding` reads that layer's tables and
LayerNorm and projects to the generator's width itself.
"""

import dataclasses

import tf_keras

from bert.config import BertConfig
from bert.layers._util import build_sublayer, initializer
from bert.layers.bert_embedding import BertEmbedding
from bert.layers.dropout import Dropout
from bert.networks.bert_encoder import scaffold_kwargs
from bert.networks.encoder_scaffold import EncoderScaffold


@tf_keras.utils.register_keras_serializable(package="bert")
class SharedEmbedding(tf_keras.layers.Layer):
  """Another encoder's `BertEmbedding` tables, projected to `hidden_size`.

  `shared.embed` (word + position + token type, LayerNorm) from the same
  variables, dropout, then this layer's own dense projection when the
  tables' width differs from `hidden_size` (ELECTRA's generator:
  "embeddings_project"). Called as `BertEmbedding` is, so `EncoderScaffold`
  takes it as its embedding layer. Output: [batch, seq, hidden_size].

  `shared`'s weights are tracked here too (Keras lists a shared weight once
  per model). The config holds `shared`'s config: a layer rebuilt from it
  has tables of its own, as any layer from a config has fresh weights;
  `ElectraPretrainer` builds its generator from its discriminator, so the
  tables are shared again after a round trip.
  """

  def __init__(self, shared, hidden_size: int, dropout_rate: float = 0.1,
               initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    if isinstance(shared, dict):          # from get_config
      shared = tf_keras.layers.deserialize(shared)
    if not isinstance(shared, BertEmbedding):
      raise ValueError(f"SharedEmbedding: shared must be a BertEmbedding, got "
                       f"{type(shared).__name__}")
    self.shared = shared
    self.hidden_size = hidden_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.dropout = Dropout(dropout_rate)
    self.projection = None
    if shared.embedding_width != hidden_size:
      self.projection = tf_keras.layers.Dense(
          hidden_size, kernel_initializer=initializer(initializer_range),
          name="embedding_projection")

  def build(self, input_shape=None):
    if not self.shared.built:
      build_sublayer(self.shared, None)
    if self.projection is not None:
      build_sublayer(self.projection, [None, None, self.shared.embedding_width])
    super().build(input_shape)

  def call(self, input_word_ids, input_type_ids=None, input_positions=None,
           training=None):
    embeddings = self.shared.embed(input_word_ids, input_type_ids,
                                   input_positions)        # [b, s, width]
    embeddings = self.dropout(embeddings, training=training)
    if self.projection is not None:
      embeddings = self.projection(embeddings)               # [b, s, hidden]
    return embeddings

  def get_config(self):
    config = super().get_config()
    config.update(shared=tf_keras.layers.serialize(self.shared),
                  hidden_size=self.hidden_size,
                  dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config


def generator_config(config: BertConfig, fraction: float) -> BertConfig:
  """The generator's config for a discriminator of `config`: hidden size,
  attention heads and intermediate size times `fraction` (at least 1 head,
  the hidden size a multiple of the heads), as many layers, and embedding
  tables of the discriminator's width (they are the discriminator's)."""
  if not 0 < fraction <= 1:
    raise ValueError(f"generator_fraction must be in (0, 1], got {fraction!r}")
  heads = max(1, round(config.num_attention_heads * fraction))
  hidden = max(heads, round(config.hidden_size * fraction / heads) * heads)
  return dataclasses.replace(
      config, hidden_size=hidden, num_attention_heads=heads,
      intermediate_size=max(1, round(config.intermediate_size * fraction)),
      embedding_size=config.embedding_width, use_pooler=False,
      num_hidden_groups=None)


def build_generator(discriminator, fraction: float):
  """(generator encoder, its config): an `EncoderScaffold` of
  `generator_config(discriminator.config, fraction)` whose embedding layer
  reads `discriminator`'s tables (`SharedEmbedding`); built."""
  config = generator_config(discriminator.config, fraction)
  kwargs = scaffold_kwargs(config)
  kwargs.update(
      embedding_cls=SharedEmbedding,
      embedding_cfg=dict(shared=discriminator.embedding_layer,
                         hidden_size=config.hidden_size,
                         dropout_rate=config.hidden_dropout_prob,
                         initializer_range=config.initializer_range))
  return EncoderScaffold(**kwargs, name="generator"), config
