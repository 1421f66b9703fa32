"""Networks composed of `bert.layers`: encoders that later models wrap."""

from bert.networks.bert_encoder import BertEncoder, scaffold_kwargs
from bert.networks.preprocessing_model import make_preprocessing_model
from bert.networks.electra_generator import (SharedEmbedding, build_generator,
                                             generator_config)
from bert.networks.encoder_scaffold import EncoderScaffold
from bert.networks.pretraining_heads import build_pretraining_heads

__all__ = ["BertEncoder", "EncoderScaffold", "SharedEmbedding",
           "build_generator", "build_pretraining_heads", "generator_config",
           "make_preprocessing_model",
           "scaffold_kwargs"]

# The former name (not a `bert.models.BertPreprocessor`), still read.
make_preprocessor = make_preprocessing_model
