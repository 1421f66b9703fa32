"""The sentence-transformers folder layout: what turns an encoder's token
vectors into a text's embedding.

    modules.json                      the pipeline, in order
    (path of the Transformer module)  the encoder checkpoint ("hf" format)
    1_Pooling/config.json             pooling modes, include_prompt
    2_Dense/config.json + model.safetensors   optional dense layers
    2_Normalize                       L2 normalisation (no files needed)
    sentence_bert_config.json         max_seq_length
    config_sentence_transformers.json prompts, default_prompt_name,
                                      similarity_fn_name

`read_layout` reads and checks it without building anything; a folder
without modules.json has no layout (None). Dense weights are read from
safetensors only: a pytorch_model.bin (pickle) is refused, never unpickled.
"""

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

import numpy as np

from bert.checkpoints.errors import CheckpointError
from bert.untrusted import kind, named_path, read_json

MODULES_FILE = "modules.json"
# sentence-transformers' legacy boolean pooling keys, and its mode names,
# in this library's pooling vocabulary (`bert.layers.SentencePooling`).
_LEGACY_POOLING = {
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weighted_mean",
    "pooling_mode_lasttoken": "last"}
_POOLING_NAMES = {"cls": "cls", "max": "max", "mean": "mean",
                  "mean_sqrt_len_tokens": "mean_sqrt_len",
                  "weightedmean": "weighted_mean", "lasttoken": "last"}
# torch activations a Dense module may name -> Keras activations.
_ACTIVATIONS = {"Tanh": "tanh", "Identity": "linear", "ReLU": "relu",
                "GELU": "gelu", "Sigmoid": "sigmoid"}


@dataclasses.dataclass(frozen=True)
class DenseLayer:
  """One sentence-transformers Dense module: activation(x @ kernel + bias)
  (+ x, or x projected, with `use_residual`)."""
  kernel: np.ndarray                 # [in, out]
  bias: Optional[np.ndarray]         # [out]
  activation: str                    # a Keras activation name
  residual: Optional[np.ndarray] = None   # [in, out] when in != out


@dataclasses.dataclass(frozen=True)
class SentenceLayout:
  """What a sentence-transformers folder says beyond its encoder."""
  encoder_folder: str
  pooling: Tuple[str, ...]
  include_prompt: bool = True
  dense: Tuple[DenseLayer, ...] = ()
  normalize: bool = False
  max_seq_length: Optional[int] = None
  prompts: Dict[str, str] = dataclasses.field(default_factory=dict)
  default_prompt_name: Optional[str] = None
  similarity: str = "cosine"


def _module_type(entry, path: str) -> str:
  kind_name = entry.get("type")
  if not isinstance(kind_name, str):
    raise CheckpointError(f"{path}: a module's \"type\" must be a string, "
                          f"got {kind(kind_name)}")
  return kind_name.rsplit(".", 1)[-1]


def read_layout(folder: str) -> Optional[SentenceLayout]:
  """The layout of a sentence-transformers `folder`; None without
  modules.json. One-line CheckpointErrors name the file at fault."""
  path = os.path.join(folder, MODULES_FILE)
  if not os.path.isfile(path):
    return None
  modules = read_json(path, CheckpointError, expect=list)
  fields = dict(encoder_folder=None, pooling=None, include_prompt=True,
                dense=[], normalize=False)
  for i, entry in enumerate(modules):
    if not isinstance(entry, dict):
      raise CheckpointError(f"{path}: module {i} must be an object, got "
                            f"{kind(entry)}")
    name = _module_type(entry, path)
    sub = entry.get("path", "")
    sub = folder if sub == "" else named_path(
        folder, sub, CheckpointError, f"{path}: module {i}'s \"path\"")
    if name == "Transformer" and fields["encoder_folder"] is None and i == 0:
      fields["encoder_folder"] = sub
    elif name == "Pooling" and fields["pooling"] is None:
      fields["pooling"], fields["include_prompt"] = _pooling(sub)
    elif name == "Dense" and fields["pooling"] is not None:
      fields["dense"].append(_dense(sub))
    elif name == "Normalize":
      fields["normalize"] = True
    else:
      raise CheckpointError(
          f"{path}: module {i} ({entry.get('type')}) is not supported here: a "
          "text embedder is a Transformer, then Pooling, then Dense and "
          "Normalize modules")
  if fields["encoder_folder"] is None or fields["pooling"] is None:
    raise CheckpointError(f"{path}: needs a Transformer module first and a "
                          "Pooling module")
  return SentenceLayout(dense=tuple(fields.pop("dense")), **fields,
                        **_model_config(folder))


def _pooling(sub: str) -> Tuple[Tuple[str, ...], bool]:
  path = os.path.join(sub, "config.json")
  config = read_json(path, CheckpointError)
  mode = config.get("pooling_mode")
  if mode is None:
    modes = [v for k, v in _LEGACY_POOLING.items() if config.get(k) is True]
    modes = modes or ["mean"]
  else:
    names = [mode] if isinstance(mode, str) else mode
    if not isinstance(names, list) or any(n not in _POOLING_NAMES for n in names):
      raise CheckpointError(f"{path}: \"pooling_mode\" must be one or a list "
                            f"of {sorted(_POOLING_NAMES)}, got {mode!r}")
    modes = [_POOLING_NAMES[n] for n in names]
  include_prompt = config.get("include_prompt", True)
  if not isinstance(include_prompt, bool):
    raise CheckpointError(f"{path}: \"include_prompt\" must be true or false")
  return tuple(modes), include_prompt


def _dense(sub: str) -> DenseLayer:
  path = os.path.join(sub, "config.json")
  config = read_json(path, CheckpointError)
  act = str(config.get("activation_function", "torch.nn.modules.activation.Tanh"))
  short = act.rsplit(".", 1)[-1]
  if short not in _ACTIVATIONS:
    raise CheckpointError(f"{path}: activation_function {act!r} is not one of "
                          f"{sorted(_ACTIVATIONS)} (torch.nn)")
  weights_file = os.path.join(sub, "model.safetensors")
  if not os.path.isfile(weights_file):
    found = "pytorch_model.bin (a pickle, never loaded here)" if os.path.isfile(
        os.path.join(sub, "pytorch_model.bin")) else "no weights"
    raise CheckpointError(f"{sub}: a Dense module needs model.safetensors; "
                          f"found {found}")
  arrays = _read_safetensors(weights_file)
  kernel = arrays.get("linear.weight")
  if kernel is None or kernel.ndim != 2:
    raise CheckpointError(f"{weights_file}: no 2-D \"linear.weight\"")
  out_dim, in_dim = kernel.shape
  for key, want in (("in_features", in_dim), ("out_features", out_dim)):
    if key in config and config[key] != want:
      raise CheckpointError(f"{path}: {key}={config[key]!r} but linear.weight "
                            f"is [{out_dim}, {in_dim}]")
  bias = arrays.get("linear.bias")
  if config.get("bias", True) and (bias is None or bias.shape != (out_dim,)):
    raise CheckpointError(f"{weights_file}: \"linear.bias\" must be [{out_dim}]")
  residual = None
  if config.get("use_residual", False) and in_dim != out_dim:
    residual = arrays.get("residual.weight")
    if residual is None or residual.shape != (out_dim, in_dim):
      raise CheckpointError(f"{weights_file}: \"residual.weight\" must be "
                            f"[{out_dim}, {in_dim}]")
    residual = residual.T
  layer = DenseLayer(kernel.T.copy(), bias if config.get("bias", True) else None,
                     _ACTIVATIONS[short], residual)
  if config.get("use_residual", False) and residual is None:
    # Same width: the residual is x itself (an identity projection).
    layer = dataclasses.replace(layer, residual=np.eye(in_dim, dtype=np.float32))
  return layer


def _read_safetensors(path: str) -> Dict[str, np.ndarray]:
  from safetensors import SafetensorError  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  try:
    return {k: np.asarray(v, np.float32) for k, v in load_file(path).items()}
  except (SafetensorError, OSError, ValueError, TypeError) as e:
    raise CheckpointError(f"{path}: not a readable safetensors file "
                          f"({str(e).splitlines()[0] if str(e) else type(e).__name__})"
                          ) from None


def _model_config(folder: str) -> dict:
  """max_seq_length, prompts, default_prompt_name and similarity."""
  out = {}
  # sentence-transformers' own config, else (as releases since v5 save it)
  # the tokenizer's model_max_length; Hugging Face writes a huge number
  # there when a tokenizer has no limit, which the model's positions cap.
  for name, key in (("sentence_bert_config.json", "max_seq_length"),
                    ("tokenizer_config.json", "model_max_length")):
    path = os.path.join(folder, name)
    if "max_seq_length" in out or not os.path.isfile(path):
      continue
    length = read_json(path, CheckpointError).get(key)
    if length is None:
      continue
    if not isinstance(length, (int, float)) or isinstance(length, bool) or (
        length < 3):
      raise CheckpointError(f"{path}: \"{key}\" must be an integer >= 3, got "
                            f"{length!r}")
    if length < 1e6:
      out["max_seq_length"] = int(length)
  path = os.path.join(folder, "config_sentence_transformers.json")
  if not os.path.isfile(path):
    return out
  config = read_json(path, CheckpointError)
  prompts = config.get("prompts") or {}
  if not isinstance(prompts, dict) or not all(
      isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
    raise CheckpointError(f"{path}: \"prompts\" must map names to strings")
  default = config.get("default_prompt_name")
  if default is not None and default not in prompts:
    raise CheckpointError(f"{path}: default_prompt_name {default!r} is not one "
                          f"of the prompts {sorted(prompts)}")
  similarity = config.get("similarity_fn_name") or "cosine"
  if similarity not in ("cosine", "dot"):
    raise CheckpointError(f"{path}: similarity_fn_name {similarity!r}: only "
                          "\"cosine\" and \"dot\" are supported")
  out.update(prompts=dict(prompts), default_prompt_name=default,
             similarity=similarity)
  return out


def dense_weights(layers: List[DenseLayer]) -> List[List[np.ndarray]]:
  """Keras weights of each layer, in `BertTextEmbedder`'s dense order."""
  return [[w for w in (d.kernel, d.bias, d.residual) if w is not None]
          for d in layers]
