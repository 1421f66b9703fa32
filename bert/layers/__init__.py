"""Keras layers of BERT; each is serialisable with `get_config`."""

from bert.layers.activations import gelu, gelu_exact, get_activation
from bert.layers.bert_embedding import BertEmbedding
from bert.layers.bert_pack_inputs import BertPackInputs
from bert.layers.bert_tokenizer import BertTokenizer
from bert.layers.byte_pair_tokenizer import BytePairTokenizer
from bert.layers.classification_head import ClassificationHead
from bert.layers.discriminator_head import DiscriminatorHead
from bert.layers.dropout import Dropout
from bert.layers.fused_self_attention import FusedSelfAttention
from bert.layers.layer_norm import LayerNormalization
from bert.layers.masked_lm_head import MaskedLMHead, gather_positions
from bert.layers.self_attention_mask import SelfAttentionMask
from bert.layers.sentence_pooling import SentencePooling
from bert.layers.sentencepiece_tokenizer import SentencePieceTokenizer
from bert.layers.span_head import SpanHead
from bert.layers.transformer_encoder_block import TransformerEncoderBlock
from bert.layers.vocabulary import Vocabulary

__all__ = [
    "BertEmbedding", "BertPackInputs", "BertTokenizer", "BytePairTokenizer",
    "ClassificationHead", "DiscriminatorHead", "Dropout", "FusedSelfAttention",
    "LayerNormalization", "MaskedLMHead",
    "SelfAttentionMask", "SentencePieceTokenizer", "SentencePooling",
    "SpanHead", "TransformerEncoderBlock", "Vocabulary", "gather_positions",
    "gelu", "gelu_exact", "get_activation",
]
