"""Networks composed of `bert.layers`: encoders that later models wrap."""

from bert.networks.bert_encoder import BertEncoder, scaffold_kwargs
from bert.networks.bert_preprocessor import make_preprocessor
from bert.networks.encoder_scaffold import EncoderScaffold
from bert.networks.pretraining_heads import build_pretraining_heads

__all__ = ["BertEncoder", "EncoderScaffold", "build_pretraining_heads",
           "make_preprocessor",
           "scaffold_kwargs"]
