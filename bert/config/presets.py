"""`BertConfig.preset`'s table: the released shapes by name (BERT's
compact models, Base and Large, and the BERT family's), as BertConfig
fields.
"""

from typing import Any, Dict


def _shape(layers: int, hidden: int, **extra) -> Dict[str, Any]:
  d = dict(num_hidden_layers=layers, hidden_size=hidden,
           num_attention_heads=hidden // 64, intermediate_size=4 * hidden)
  d.update(extra)
  return d


# The 24 compact models of "Well-Read Students Learn Better" (Turc et al.,
# 2019; heads = H/64, intermediate = 4H) plus BERT-Base and BERT-Large, all with
# the 30,522-id uncased English vocabulary unless the name says otherwise.
PRESETS: Dict[str, Dict[str, Any]] = {}
for _l in (2, 4, 6, 8, 10, 12):
  for _h in (128, 256, 512, 768):
    PRESETS[f"bert_L{_l}_H{_h}"] = _shape(_l, _h)
PRESETS["bert_tiny"] = PRESETS["bert_L2_H128"]
PRESETS["bert_mini"] = PRESETS["bert_L4_H256"]
PRESETS["bert_small"] = PRESETS["bert_L4_H512"]
PRESETS["bert_medium"] = PRESETS["bert_L8_H512"]
PRESETS["bert_base"] = _shape(12, 768)
PRESETS["bert_large"] = _shape(24, 1024)
# Released vocabularies other than uncased English.
PRESETS["bert_base_cased"] = _shape(12, 768, vocab_size=28996)
PRESETS["bert_large_cased"] = _shape(24, 1024, vocab_size=28996)
PRESETS["bert_base_multilingual_cased"] = _shape(12, 768, vocab_size=119547)
PRESETS["bert_base_chinese"] = _shape(12, 768, vocab_size=21128)
# all-MiniLM-L6-v2 (the real weights used in tests): 12 heads of 32, exact GELU.
PRESETS["all_minilm_l6_v2"] = dict(
    num_hidden_layers=6, hidden_size=384, num_attention_heads=12,
    intermediate_size=1536, hidden_act="gelu_exact")
del _l, _h


# The BERT family's released shapes (their Hugging Face config.json files).
def _roberta(layers, hidden, heads):
  return dict(family="roberta", vocab_size=50265, num_hidden_layers=layers,
              hidden_size=hidden, num_attention_heads=heads,
              intermediate_size=4 * hidden, hidden_act="gelu_exact",
              max_position_embeddings=514, type_vocab_size=1,
              layer_norm_epsilon=1e-5, pad_token_id=1, position_offset=2,
              use_pooler=False)


def _albert(hidden, layers, heads):
  return dict(family="albert", vocab_size=30000, embedding_size=128,
              hidden_size=hidden, num_hidden_layers=layers,
              num_attention_heads=heads, intermediate_size=4 * hidden,
              hidden_act="gelu", hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0, num_hidden_groups=1)


def _distilbert(vocab_size):
  return dict(family="distilbert", vocab_size=vocab_size, num_hidden_layers=6,
              hidden_size=768, num_attention_heads=12, intermediate_size=3072,
              hidden_act="gelu_exact", type_vocab_size=0, use_pooler=False)


def _electra(embedding, hidden, layers, heads):
  return dict(family="electra", embedding_size=embedding, hidden_size=hidden,
              num_hidden_layers=layers, num_attention_heads=heads,
              intermediate_size=4 * hidden, hidden_act="gelu_exact",
              use_pooler=False)


PRESETS.update(
    roberta_base=_roberta(12, 768, 12),
    roberta_large=_roberta(24, 1024, 16),
    distilroberta_base=_roberta(6, 768, 12),
    albert_base_v2=_albert(768, 12, 12),
    albert_large_v2=_albert(1024, 24, 16),
    albert_xlarge_v2=_albert(2048, 24, 16),
    albert_xxlarge_v2=_albert(4096, 12, 64),
    distilbert_base_uncased=_distilbert(30522),
    distilbert_base_cased=_distilbert(28996),
    electra_small_discriminator=_electra(128, 256, 12, 4),
    electra_small_generator=_electra(128, 256, 12, 4),
    electra_base_discriminator=_electra(768, 768, 12, 12),
    electra_base_generator=_electra(768, 256, 12, 4),
    electra_large_discriminator=_electra(1024, 1024, 24, 16),
    electra_large_generator=_electra(1024, 256, 24, 4),
)
