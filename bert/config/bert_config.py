"""`BertConfig`: the hyper-parameters of a BERT encoder.

Field names follow google-research `bert_config.json`, so a released config
file maps onto this class one to one. Hugging Face `config.json` files are read
and written too, translating the fields whose names or meanings differ
(`hf_format`; "gelu" here is the tanh form, as google-research's).

The BERT family are configurations of the same encoder (`family`):
RoBERTa (no token types, positions offset past the padding id, no pooler in
the released weights), ALBERT (factorised embeddings, one block shared by
every layer), DistilBERT (6 layers, no token types, no pooler) and ELECTRA
(factorised embeddings in the small models, no pooler).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Optional, Union

from bert.config import hf_format
from bert.config.fields import (ACTIVATIONS, EXTENSIONS, FAMILIES,
                                GOOGLE_FIELDS, STRUCTURAL_FIELDS)
from bert.config.presets import PRESETS
from bert.untrusted import read_json
from bert.validation import (ConfigError, check_bool, check_choice,
                             check_float, check_int)

# Model Garden `EncoderConfig` (type "bert") name -> google-research name.
_ENCODER_CONFIG_NAMES = {
    "num_layers": "num_hidden_layers",
    "hidden_activation": "hidden_act",
    "dropout_rate": "hidden_dropout_prob",
    "attention_dropout_rate": "attention_probs_dropout_prob",
}


@dataclasses.dataclass
class BertConfig:
  """Hyper-parameters of a BERT encoder (google-research field names).

  Attributes:
    vocab_size: number of wordpiece ids.
    hidden_size: width H of every transformer layer.
    num_hidden_layers: number of transformer layers L.
    num_attention_heads: heads per layer; must divide `hidden_size`.
    intermediate_size: width of the feed-forward layer (4H in released models).
    hidden_act: feed-forward activation; "gelu" is the tanh approximation as in
      google-research BERT, "gelu_exact" the erf form (Hugging Face "gelu").
    hidden_dropout_prob: dropout on embeddings and on every residual branch.
    attention_probs_dropout_prob: dropout on the attention probabilities.
    max_position_embeddings: longest sequence the position table covers.
    type_vocab_size: number of segment (token type) ids.
    initializer_range: stddev of the truncated-normal weight initialiser.
    embedding_size: width E of the embedding tables when factorised (E != H,
      then projected to H); None means E = H as in BERT.
    norm_first: pre-LayerNorm blocks (LN before attention and feed-forward);
      False is BERT's post-LN.
    layer_norm_epsilon: epsilon of every LayerNorm (1e-12 in BERT).
    family: which member of the BERT family ("bert", "roberta", "albert",
      "distilbert", "electra"): its tokenizer, special tokens, objectives and
      checkpoint names. The fields below say how its encoder differs.
    position_offset: the row of the position table the first token uses
      (RoBERTa: 2, past its padding id 1); the longest input is
      `max_position_embeddings - position_offset`.
    use_pooler: a dense + tanh pooler on the first token (BERT, ALBERT);
      without one (RoBERTa, DistilBERT, ELECTRA) `pooled_output` is the
      first token's `sequence_output`.
    num_hidden_groups: None gives every layer its own weights; G > 0 makes G
      blocks whose weights layers share (ALBERT: 1, one block for all
      layers), layer i using block `i * G // num_hidden_layers`.
    pad_token_id: the padding id of the family's vocabulary (RoBERTa: 1).
    type_vocab_size: 0 means no token-type table (DistilBERT).
  """

  vocab_size: int = 30522
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02
  embedding_size: Optional[int] = None
  norm_first: bool = False
  layer_norm_epsilon: float = 1e-12
  family: str = "bert"
  position_offset: int = 0
  use_pooler: bool = True
  num_hidden_groups: Optional[int] = None
  pad_token_id: int = 0

  def __post_init__(self):
    self.validate()

  # ---------------------------------------------------------------- checks
  def validate(self) -> None:
    """Raises ConfigError naming the first field that is out of range."""
    for name in ("vocab_size", "hidden_size", "num_hidden_layers",
                 "num_attention_heads", "intermediate_size",
                 "max_position_embeddings"):
      check_int("BertConfig", name, getattr(self, name), minimum=1)
    check_int("BertConfig", "type_vocab_size", self.type_vocab_size, minimum=0)
    check_int("BertConfig", "embedding_size", self.embedding_size, minimum=1,
              optional=True)
    check_choice("BertConfig", "family", self.family, FAMILIES)
    check_int("BertConfig", "position_offset", self.position_offset,
              minimum=0, maximum=self.max_position_embeddings - 1)
    check_bool("BertConfig", "use_pooler", self.use_pooler)
    check_int("BertConfig", "num_hidden_groups", self.num_hidden_groups,
              minimum=1, maximum=self.num_hidden_layers, optional=True)
    check_int("BertConfig", "pad_token_id", self.pad_token_id, minimum=0,
              maximum=self.vocab_size - 1)
    if self.hidden_size % self.num_attention_heads:
      raise ConfigError(
          f"BertConfig.hidden_size={self.hidden_size} is not divisible by "
          f"BertConfig.num_attention_heads={self.num_attention_heads}")
    check_choice("BertConfig", "hidden_act", self.hidden_act, ACTIVATIONS)
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      check_float("BertConfig", name, getattr(self, name), 0.0, 1.0,
                  max_open=True)
    for name in ("initializer_range", "layer_norm_epsilon"):
      check_float("BertConfig", name, getattr(self, name), 0.0, min_open=True)
    check_bool("BertConfig", "norm_first", self.norm_first)

  # ----------------------------------------------------------- derived
  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_attention_heads

  @property
  def sentence_task(self) -> Optional[str]:
    """The family's sentence-pair pre-training task: "nsp" (BERT's next
    sentence), "sop" (ALBERT's sentence order) or None."""
    return dict(bert="nsp", albert="sop").get(self.family)

  @property
  def max_seq_length(self) -> int:
    """The longest input the position table covers."""
    return self.max_position_embeddings - self.position_offset

  @property
  def num_blocks(self) -> int:
    """How many blocks hold weights: one per layer, or one per group."""
    return self.num_hidden_groups or self.num_hidden_layers

  def block_of_layer(self, layer: int) -> int:
    """The block whose weights layer `layer` uses."""
    if self.num_hidden_groups is None:
      return layer
    return layer * self.num_hidden_groups // self.num_hidden_layers

  @property
  def embedding_width(self) -> int:
    """Width of the embedding tables (E); equals hidden_size unless factorised."""
    return self.embedding_size or self.hidden_size

  # ---------------------------------------------------------- dict / json
  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: Dict[str, Any]) -> "BertConfig":
    """Builds from our own field names; unknown keys are an error."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
      raise ConfigError(f"Unknown BertConfig field(s): {', '.join(unknown)}")
    return cls(**d)

  @classmethod
  def from_google_dict(cls, d: Dict[str, Any]) -> "BertConfig":
    """Reads a google-research / Model Garden `bert_config.json` dict.

    Model Garden's `EncoderConfig` spelling is read too (`num_layers`,
    `hidden_activation`, `dropout_rate`, ..., optionally inside
    {"type": "bert", "bert": {...}}); its "gelu" is the tanh form, as here.
    """
    if isinstance(d.get("bert"), dict) and d.get("type", "bert") == "bert":
      d = d["bert"]
    elif d.get("type") == "albert" and isinstance(d.get("albert"), dict):
      # Model Garden's AlbertEncoder: one block shared by every layer.
      d = dict(d["albert"], family="albert", num_hidden_groups=1)
      if "embedding_width" in d:
        d["embedding_size"] = d.pop("embedding_width")
    if "num_layers" in d and "num_hidden_layers" not in d:
      d = {_ENCODER_CONFIG_NAMES.get(k, k): v for k, v in d.items()}
    missing = [k for k in STRUCTURAL_FIELDS if k not in d]
    if missing:
      raise ConfigError(f"bert_config is missing field(s): {', '.join(missing)}")
    kwargs = {k: d[k] for k in GOOGLE_FIELDS if k in d}
    for extra in EXTENSIONS:
      if d.get(extra) is not None:
        kwargs[extra] = d[extra]
    return cls(**kwargs)

  @classmethod
  def from_hf_dict(cls, d: Dict[str, Any]) -> "BertConfig":
    """Reads a Hugging Face `config.json` dict of a BERT-family model
    (`model_type` bert, roberta, albert, distilbert or electra; older files
    without `model_type` are told apart by `architectures`)."""
    return cls(**hf_format.fields_of_hf_dict(d))

  def to_google_dict(self) -> Dict[str, Any]:
    d = {k: getattr(self, k) for k in GOOGLE_FIELDS}
    # Extensions are written only when they change the model, so plain BERT
    # configs stay byte-compatible with google-research's reader.
    for name, default in EXTENSIONS.items():
      value = getattr(self, name)
      if name == "embedding_size" and value == self.hidden_size:
        continue
      if value != default:
        d[name] = value
    return d

  def to_hf_dict(self) -> Dict[str, Any]:
    """The Hugging Face `config.json` of this encoder's family."""
    return hf_format.hf_dict(self)

  @classmethod
  def from_json_file(cls, path: str, format: Optional[str] = None) -> "BertConfig":
    """Reads `bert_config.json` (google-research) or `config.json` (HF).

    Args:
      path: the json file.
      format: "google" or "hf"; None detects it (HF files carry `model_type`).
    """
    if not os.path.exists(path):
      raise FileNotFoundError(f"No config file at {path}")
    d = read_json(path, ConfigError)
    if format is None:
      format = "hf" if "model_type" in d or "architectures" in d else "google"
    try:
      if format == "hf":
        return cls.from_hf_dict(d)
      if format == "google":
        return cls.from_google_dict(d)
    except (ValueError, TypeError) as e:
      raise ConfigError(f"{path}: {e}") from e
    raise ConfigError(f"format must be 'google' or 'hf', got {format!r}")

  def to_json_file(self, path: str, format: str = "google") -> None:
    """Writes `bert_config.json` ("google") or HF `config.json` ("hf")."""
    if format == "google":
      d = self.to_google_dict()
    elif format == "hf":
      d = self.to_hf_dict()
    else:
      raise ConfigError(f"format must be 'google' or 'hf', got {format!r}")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(d, f, indent=2, sort_keys=True)
      f.write("\n")

  # --------------------------------------------------------------- presets
  @classmethod
  def preset(cls, name: str, **overrides) -> "BertConfig":
    """The config of a released BERT shape, e.g. "bert_base" or "bert_L4_H256".

    Keyword overrides replace fields (e.g. `vocab_size=28996`).
    """
    if name not in PRESETS:
      raise ConfigError(f"Unknown BERT preset {name!r}; known presets: "
                       f"{', '.join(sorted(PRESETS))}")
    d = dict(PRESETS[name])
    d.update(overrides)
    return cls(**d)

  @staticmethod
  def preset_names():
    return sorted(PRESETS)


def resolve_bert_config(bert_config: Union[str, Dict[str, Any], BertConfig]
                        ) -> BertConfig:
  """A BertConfig from itself, its fields as a dict, a preset name, or a
  bert_config.json / HF config.json path: what a task's or a gin file's
  `bert_config` may be."""
  if isinstance(bert_config, BertConfig):
    return bert_config
  if isinstance(bert_config, dict):
    return BertConfig.from_dict(bert_config)
  if not isinstance(bert_config, str):
    raise ConfigError("bert_config must be a preset name, a config json path, "
                      f"a dict of fields or a BertConfig, got {bert_config!r}")
  if bert_config.endswith(".json") or os.path.sep in bert_config:
    return BertConfig.from_json_file(bert_config)
  return BertConfig.preset(bert_config)
