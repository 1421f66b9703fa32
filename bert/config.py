"""`BertConfig`: the hyper-parameters of a BERT encoder.

Field names follow google-research `bert_config.json`, so a released config
file maps onto this class one to one. Hugging Face `config.json` files are read
and written too, translating the fields whose names or meanings differ.

The one field whose *meaning* differs between ecosystems is `hidden_act`:
google-research `modeling.py` (and so every released TF checkpoint) and Model
Garden call the tanh approximation of GELU "gelu", while Hugging Face calls the
exact erf form "gelu" and the tanh form "gelu_new". This class follows
google-research: "gelu" is the tanh form and "gelu_exact" the erf form.
Reading or writing a Hugging Face config translates, so the numbers a model
computes never change with the file format.

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

from bert.untrusted import read_json
from bert.validation import (ConfigError, check_bool, check_choice,
                             check_float, check_int)

# Activation names this library understands (see bert/layers/activations.py).
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "silu", "tanh", "linear")

# Hugging Face name -> ours. HF "gelu" is exact; "gelu_new" & co. are tanh.
_HF_TO_OURS_ACT = {
    "gelu": "gelu_exact",
    "gelu_python": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
    "tanh": "tanh",
    "linear": "linear",
}
_OURS_TO_HF_ACT = {
    "gelu": "gelu_new",
    "gelu_exact": "gelu",
    "relu": "relu",
    "silu": "silu",
    "tanh": "tanh",
    "linear": "linear",
}

# Model Garden `EncoderConfig` (type "bert") name -> google-research name.
_ENCODER_CONFIG_NAMES = {
    "num_layers": "num_hidden_layers",
    "hidden_activation": "hidden_act",
    "dropout_rate": "hidden_dropout_prob",
    "attention_dropout_rate": "attention_probs_dropout_prob",
}

_GOOGLE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)

FAMILIES = ("bert", "roberta", "albert", "distilbert", "electra")

# Our extensions of the google-research fields, written to bert_config.json
# only when they differ from BERT's (so plain BERT configs stay byte-for-byte
# google-research's).
_EXTENSIONS = dict(embedding_size=None, norm_first=False,
                   layer_norm_epsilon=1e-12, family="bert", position_offset=0,
                   use_pooler=True, num_hidden_groups=None, pad_token_id=0)

# Fields that fix the weight shapes: a config file must state them.
_STRUCTURAL_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                      "num_attention_heads", "intermediate_size",
                      "max_position_embeddings")


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
    missing = [k for k in _STRUCTURAL_FIELDS if k not in d]
    if missing:
      raise ConfigError(f"bert_config is missing field(s): {', '.join(missing)}")
    kwargs = {k: d[k] for k in _GOOGLE_FIELDS if k in d}
    for extra in _EXTENSIONS:
      if d.get(extra) is not None:
        kwargs[extra] = d[extra]
    return cls(**kwargs)

  @classmethod
  def from_hf_dict(cls, d: Dict[str, Any]) -> "BertConfig":
    """Reads a Hugging Face `config.json` dict of a BERT-family model
    (`model_type` bert, roberta, albert, distilbert or electra; older files
    without `model_type` are told apart by `architectures`)."""
    family = hf_family(d)
    if family == "distilbert":
      d = _from_distilbert(d)
    pos_type = d.get("position_embedding_type", "absolute")
    if pos_type != "absolute":
      raise ConfigError("config.json has position_embedding_type="
                       f"{pos_type!r}; only 'absolute' is supported")
    hf_act = d.get("hidden_act", "gelu")
    if hf_act not in _HF_TO_OURS_ACT:
      raise ConfigError(f"config.json has hidden_act={hf_act!r}, which has no "
                       "equivalent here")
    missing = [k for k in _STRUCTURAL_FIELDS if k not in d]
    if missing:
      raise ConfigError(f"config.json is missing field(s): {', '.join(missing)}")
    kwargs = {k: d[k] for k in _GOOGLE_FIELDS if k in d and k != "hidden_act"}
    kwargs["hidden_act"] = _HF_TO_OURS_ACT[hf_act]
    kwargs["family"] = family
    if "layer_norm_eps" in d:
      kwargs["layer_norm_epsilon"] = float(d["layer_norm_eps"])
    if d.get("pad_token_id") is not None:
      kwargs["pad_token_id"] = d["pad_token_id"]
    if family in ("albert", "electra") and d.get("embedding_size") is not None:
      kwargs["embedding_size"] = d["embedding_size"]
    if family == "roberta":
      # Positions start past the padding id (fairseq's make_positions).
      kwargs.setdefault("pad_token_id", 1)
      kwargs["position_offset"] = kwargs["pad_token_id"] + 1
    if family == "albert":
      if d.get("inner_group_num", 1) != 1:
        raise ConfigError("config.json has inner_group_num="
                          f"{d['inner_group_num']!r}; only 1 (every released "
                          "ALBERT) is supported")
      kwargs["num_hidden_groups"] = d.get("num_hidden_groups", 1)
    if family in ("distilbert", "electra"):
      kwargs["use_pooler"] = False
    return cls(**kwargs)

  def to_google_dict(self) -> Dict[str, Any]:
    d = {k: getattr(self, k) for k in _GOOGLE_FIELDS}
    # Extensions are written only when they change the model, so plain BERT
    # configs stay byte-compatible with google-research's reader.
    for name, default in _EXTENSIONS.items():
      value = getattr(self, name)
      if name == "embedding_size" and value == self.hidden_size:
        continue
      if value != default:
        d[name] = value
    return d

  def to_hf_dict(self) -> Dict[str, Any]:
    """The Hugging Face `config.json` of this encoder's family."""
    if self.norm_first:
      raise ConfigError("BertConfig.norm_first=True has no Hugging Face "
                        "equivalent")
    family = self.family
    if self.embedding_width != self.hidden_size and family not in (
        "albert", "electra"):
      raise ConfigError(f"BertConfig.embedding_size={self.embedding_size} "
                        f"differs from hidden_size; Hugging Face's {family} "
                        "models cannot express factorised embeddings")
    expected = _HF_LAYOUT[family]
    for name, value in expected.items():
      if getattr(self, name) != value(self):
        raise ConfigError(
            f"BertConfig.{name}={getattr(self, name)!r} has no Hugging Face "
            f"{family} equivalent (it needs {value(self)!r})")
    d = {k: getattr(self, k) for k in _GOOGLE_FIELDS}
    d["hidden_act"] = _OURS_TO_HF_ACT[self.hidden_act]
    d.update(
        architectures=[_HF_ARCHITECTURE[family]],
        model_type=family,
        layer_norm_eps=self.layer_norm_epsilon,
        pad_token_id=self.pad_token_id,
        position_embedding_type="absolute",
    )
    if family in ("albert", "electra"):
      d["embedding_size"] = self.embedding_width
    if family == "albert":
      d.update(num_hidden_groups=self.num_hidden_groups, inner_group_num=1)
    if family == "roberta":
      d.update(bos_token_id=0, eos_token_id=2)
    if family == "distilbert":
      d = _to_distilbert(d)
    return d

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


# Hugging Face's class for each family (what `architectures` names).
_HF_ARCHITECTURE = dict(bert="BertModel", roberta="RobertaModel",
                        albert="AlbertModel", distilbert="DistilBertModel",
                        electra="ElectraModel")
# The encoder fields each Hugging Face family fixes, as functions of the
# config; any other value has no Hugging Face equivalent.
_HF_LAYOUT = dict(
    bert=dict(position_offset=lambda c: 0, num_hidden_groups=lambda c: None),
    roberta=dict(position_offset=lambda c: c.pad_token_id + 1,
                 num_hidden_groups=lambda c: None),
    albert=dict(position_offset=lambda c: 0, use_pooler=lambda c: True,
                num_hidden_groups=lambda c: c.num_hidden_groups or 1),
    distilbert=dict(position_offset=lambda c: 0, use_pooler=lambda c: False,
                    num_hidden_groups=lambda c: None,
                    type_vocab_size=lambda c: 0,
                    layer_norm_epsilon=lambda c: 1e-12),
    electra=dict(position_offset=lambda c: 0, use_pooler=lambda c: False,
                 num_hidden_groups=lambda c: None),
)
# DistilBERT's config.json names -> the google-research names.
_DISTILBERT_NAMES = dict(dim="hidden_size", n_layers="num_hidden_layers",
                         n_heads="num_attention_heads",
                         hidden_dim="intermediate_size", activation="hidden_act",
                         dropout="hidden_dropout_prob",
                         attention_dropout="attention_probs_dropout_prob")


def hf_family(d: Dict[str, Any]) -> str:
  """The family of a Hugging Face config.json dict: its `model_type`, or for
  older files without one, the class `architectures` names."""
  model_type = d.get("model_type")
  if model_type is None:
    names = [a for a in d.get("architectures") or () if isinstance(a, str)]
    found = [f for f in FAMILIES for a in names if a.lower().startswith(f)]
    model_type = found[0] if found else "bert"
  if model_type not in FAMILIES:
    raise ConfigError(f"config.json has model_type={model_type!r}; the BERT "
                      f"family models read here are {', '.join(FAMILIES)}")
  return model_type


def _from_distilbert(d: Dict[str, Any]) -> Dict[str, Any]:
  if d.get("sinusoidal_pos_embds"):
    raise ConfigError("config.json has sinusoidal_pos_embds=true: fixed "
                      "sinusoidal positions are not supported (the released "
                      "DistilBERT models learn theirs)")
  out = {_DISTILBERT_NAMES.get(k, k): v for k, v in d.items()}
  out.update(type_vocab_size=0, layer_norm_eps=1e-12)
  return out


def _to_distilbert(d: Dict[str, Any]) -> Dict[str, Any]:
  ours = {v: k for k, v in _DISTILBERT_NAMES.items()}
  out = {ours.get(k, k): v for k, v in d.items()
         if k not in ("type_vocab_size", "layer_norm_eps",
                      "position_embedding_type")}
  out.update(sinusoidal_pos_embds=False, tie_weights_=True)
  return out


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
