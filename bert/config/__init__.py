"""`BertConfig`, the hyper-parameters of a BERT encoder, and its files.

  bert_config  `BertConfig` (google-research field names) and
               `resolve_bert_config`
  fields       the field names and choices the class and the formats share
  hf_format    Hugging Face `config.json` <-> the fields
  presets      the released shapes by name (`BertConfig.preset`)
"""

from bert.config.bert_config import BertConfig, resolve_bert_config
from bert.config.fields import ACTIVATIONS, FAMILIES
from bert.config.hf_format import hf_family
from bert.config.presets import PRESETS

__all__ = ["ACTIVATIONS", "FAMILIES", "PRESETS", "BertConfig", "hf_family",
           "resolve_bert_config"]
