"""`load_serving`: one loader for every serving export, whatever runs it.

A serving export is a SavedModel folder. Its `assets.extra/serving.json`
(written by `bert.export`) names the kind, the precision and the runtime of
the network stage; an int8 export also holds the TFLite network there. The
callable `load_serving` returns takes the strings of the SavedModel's
`serving_default` signature as keyword arguments and returns the same dict of
tensors, so callers never branch on precision or runtime.
"""

import json
import os
from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert.errors import UserError
from bert.features import ENCODER_INPUTS

MANIFEST = os.path.join("assets.extra", "serving.json")
MANIFEST_FORMAT = "bert-serving"


class ServingError(UserError, ValueError):
  """A serving export that cannot be loaded (one line, naming the file)."""


class StagedServing:
  """preprocess (TF) -> network (any runtime) -> postprocess (TF).

  `network` takes and returns dicts of NumPy arrays (TFLite) or tensors.
  """

  def __init__(self, preprocess: Callable, network: Callable,
               postprocess: Callable, string_inputs: Sequence[str],
               empty_network: Optional[Callable] = None):
    self._preprocess = preprocess
    self._network = network
    self._postprocess = postprocess
    self.string_inputs = tuple(string_inputs)
    # TFLite cannot run a batch of 0 rows; the TF network can.
    self._empty_network = empty_network or network

  def __call__(self, **strings) -> Dict[str, tf.Tensor]:
    strings = _string_inputs(strings, self.string_inputs)
    features = self._preprocess(**strings)
    inputs = {k: features[k] for k in ENCODER_INPUTS}
    empty = inputs["input_word_ids"].shape[0] == 0
    outputs = (self._empty_network if empty else self._network)(
        **{k: v.numpy() if hasattr(v, "numpy") else v for k, v in inputs.items()})
    flat = dict(strings)
    flat.update(features)
    flat.update({k: tf.convert_to_tensor(v) for k, v in outputs.items()})
    return self._postprocess(**flat)


class SavedModelServing:
  """The SavedModel's `serving_default`, with the same input handling."""

  def __init__(self, signature, string_inputs: Sequence[str]):
    self._signature = signature
    self.string_inputs = tuple(string_inputs)

  def __call__(self, **strings) -> Dict[str, tf.Tensor]:
    return self._signature(**_string_inputs(strings, self.string_inputs))


def _string_inputs(strings: Mapping, names: Sequence[str]) -> Dict[str, tf.Tensor]:
  if set(strings) != set(names):
    raise TypeError(f"serving takes {', '.join(names)} (string [batch] each), "
                    f"got {', '.join(sorted(strings)) or 'nothing'}")
  out = {k: tf.convert_to_tensor(strings[k], tf.string) for k in names}
  for k, v in out.items():
    if v.shape.rank != 1:
      raise ValueError(f"serving input {k} must be a 1-D batch of strings, got "
                       f"shape {v.shape}")
  sizes = {v.shape[0] for v in out.values()}
  if len(sizes) > 1:
    raise ValueError(f"serving inputs {', '.join(names)} differ in batch size")
  return out


def read_manifest(path: str) -> Dict:
  """The export's serving.json, or a ServingError naming the file."""
  if not os.path.exists(os.path.join(path, "saved_model.pb")):
    raise ServingError(f"{path}: not a SavedModel folder (no saved_model.pb)")
  manifest_path = os.path.join(path, MANIFEST)
  if not os.path.exists(manifest_path):
    return dict(format=MANIFEST_FORMAT, precision="fp32", runtime="saved_model")
  try:
    with open(manifest_path, encoding="utf-8") as f:
      manifest = json.load(f)
  except (OSError, ValueError) as e:
    raise ServingError(f"{manifest_path}: unreadable ({e})") from None
  if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
    raise ServingError(f"{manifest_path}: not a {MANIFEST_FORMAT} manifest")
  return manifest


def load_serving(path: str, num_threads: Optional[int] = None) -> Callable:
  """The serving callable of an export: `f(text=[...])`, `f(text=..,
  text_b=..)`, `f(question=.., context=..)` -> the dict of tensors of the
  SavedModel's `serving_default`, at the precision and on the runtime the
  export was written for.

  Args:
    num_threads: TFLite threads (default: all cores); SavedModels use
      TensorFlow's own thread pools.
  """
  manifest = read_manifest(path)
  loaded = tf.saved_model.load(path)
  signatures = loaded.signatures
  if "serving_default" not in signatures:
    raise ServingError(f"{path}: the SavedModel has no serving_default signature")
  serve = signatures["serving_default"]
  names = tuple(sorted(serve.structured_input_signature[1]))
  names = tuple(manifest.get("string_inputs", names))
  runtime = manifest.get("runtime", "saved_model")
  if runtime == "saved_model":
    function = SavedModelServing(serve, names)
  elif runtime == "tflite":
    from bert.serving import tflite  # pylint: disable=g-import-not-at-top
    network_path = os.path.join(path, "assets.extra", manifest.get("network", ""))
    if not manifest.get("network") or not os.path.isfile(network_path):
      raise ServingError(f"{os.path.join(path, MANIFEST)}: names a TFLite network "
                         f"{manifest.get('network')!r} that is not in assets.extra")
    with open(network_path, "rb") as f:
      network = tflite.TFLiteNetwork(f.read(), num_threads=num_threads)
    function = StagedServing(signatures["preprocess"], network,
                             signatures["postprocess"], names,
                             empty_network=signatures["network"])
  else:
    raise ServingError(f"{os.path.join(path, MANIFEST)}: unknown runtime "
                       f"{runtime!r} (saved_model or tflite)")
  function.manifest = manifest
  # Keeps the SavedModel's resources (tables, variables) alive.
  function.saved_model = loaded
  return function


def as_numpy(outputs: Mapping[str, tf.Tensor]) -> Dict[str, np.ndarray]:
  """A serving result as NumPy arrays (strings as bytes)."""
  return {k: np.asarray(v) for k, v in outputs.items()}
