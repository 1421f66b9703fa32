"""Hugging Face `config.json` <-> the fields of a `BertConfig`.

The one field whose *meaning* differs between ecosystems is `hidden_act`:
google-research `modeling.py` (and so every released TF checkpoint) and Model
Garden call the tanh approximation of GELU "gelu", while Hugging Face calls the
exact erf form "gelu" and the tanh form "gelu_new". `BertConfig` follows
google-research: "gelu" is the tanh form and "gelu_exact" the erf form.
Reading or writing a Hugging Face config translates, so the numbers a model
computes never change with the file format.
"""

from typing import Any, Dict

from bert.config.fields import FAMILIES, GOOGLE_FIELDS, STRUCTURAL_FIELDS
from bert.validation import ConfigError

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


def fields_of_hf_dict(d: Dict[str, Any]) -> Dict[str, Any]:
  """The BertConfig fields of a Hugging Face `config.json` dict (see
  `BertConfig.from_hf_dict`)."""
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
  missing = [k for k in STRUCTURAL_FIELDS if k not in d]
  if missing:
    raise ConfigError(f"config.json is missing field(s): {', '.join(missing)}")
  kwargs = {k: d[k] for k in GOOGLE_FIELDS if k in d and k != "hidden_act"}
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
  return kwargs


def hf_dict(config) -> Dict[str, Any]:
  """The Hugging Face `config.json` of `config`'s family (see
  `BertConfig.to_hf_dict`)."""
  if config.norm_first:
    raise ConfigError("BertConfig.norm_first=True has no Hugging Face "
                      "equivalent")
  family = config.family
  if config.embedding_width != config.hidden_size and family not in (
      "albert", "electra"):
    raise ConfigError(f"BertConfig.embedding_size={config.embedding_size} "
                      f"differs from hidden_size; Hugging Face's {family} "
                      "models cannot express factorised embeddings")
  expected = _HF_LAYOUT[family]
  for name, value in expected.items():
    if getattr(config, name) != value(config):
      raise ConfigError(
          f"BertConfig.{name}={getattr(config, name)!r} has no Hugging Face "
          f"{family} equivalent (it needs {value(config)!r})")
  d = {k: getattr(config, k) for k in GOOGLE_FIELDS}
  d["hidden_act"] = _OURS_TO_HF_ACT[config.hidden_act]
  d.update(
      architectures=[_HF_ARCHITECTURE[family]],
      model_type=family,
      layer_norm_eps=config.layer_norm_epsilon,
      pad_token_id=config.pad_token_id,
      position_embedding_type="absolute",
  )
  if family in ("albert", "electra"):
    d["embedding_size"] = config.embedding_width
  if family == "albert":
    d.update(num_hidden_groups=config.num_hidden_groups, inner_group_num=1)
  if family == "roberta":
    d.update(bos_token_id=0, eos_token_id=2)
  if family == "distilbert":
    d = _to_distilbert(d)
  return d


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
