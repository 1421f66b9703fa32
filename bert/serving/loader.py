"""`load_serving`: one loader for every serving export, whatever runs it.

A serving export is a SavedModel folder. Its `assets.extra/serving.json`
(written by `bert.export`) names the kind, the precision and the runtime of
the network stage; an int8 export also holds the TFLite network there. The
callable `load_serving` returns takes the strings of the SavedModel's
`serving_default` signature as keyword arguments and returns the same dict of
tensors, so callers never branch on precision or runtime.
"""

import os
from typing import Callable, Dict, Mapping, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from bert.errors import UserError
from bert.features import ENCODER_INPUTS
from bert.serving import openvino_runtime
from bert.serving.embedder import ServedEmbedder
from bert.serving.host import HostStages
from bert.serving.tflite import PRECISIONS
from bert.untrusted import first_line, named_path, read_json

MANIFEST = os.path.join("assets.extra", "serving.json")
MANIFEST_FORMAT = "bert-serving"
# What runs the network stage, and the precisions each computes
# (`bert.export.write_serving` writes them; OpenVINO is optional).
RUNTIME_PRECISIONS = {"saved_model": ("fp32", "bf16"), "tflite": ("int8",),
                      "openvino": openvino_runtime.PRECISIONS}
RUNTIMES = tuple(RUNTIME_PRECISIONS)


class ServingError(UserError, ValueError):
  """A serving export that cannot be loaded (one line, naming the file)."""


class StagedServing:
  """preprocess (TF) -> network (any runtime) -> postprocess (TF), or
  for small batches the host's preprocess and postprocess (NumPy).

  `network` takes and returns dicts of NumPy arrays (TFLite) or tensors.
  """

  def __init__(self, preprocess: Callable, network: Callable,
               postprocess: Callable, string_inputs: Sequence[str],
               empty_network: Optional[Callable] = None,
               host: Optional[HostStages] = None):
    self._preprocess = preprocess
    self._network = network
    self._postprocess = postprocess
    self.string_inputs = tuple(string_inputs)
    # TFLite cannot run a batch of 0 rows; the TF network can.
    self._empty_network = empty_network or network
    # Small batches' preprocess and postprocess in Python.
    self._host = host

  def __call__(self, **strings) -> Dict[str, tf.Tensor]:
    # Small batches of the caller's own lists go to the host stages before
    # any conversion to tensors.
    texts = self._host.accepts(strings) if self._host is not None else None
    if texts is not None:
      features = self._host.preprocess(texts)
      return self._host.postprocess(features, self._network(
          **{k: features[k] for k in ENCODER_INPUTS}))
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
  """The export's serving.json, every field the loader uses checked (a
  TFLite or OpenVINO network must be a file inside `assets.extra`), or a ServingError
  naming the file. A SavedModel without one is served as fp32."""
  if not os.path.exists(os.path.join(path, "saved_model.pb")):
    raise ServingError(f"{path}: not a SavedModel folder (no saved_model.pb)")
  manifest_path = os.path.join(path, MANIFEST)
  if not os.path.exists(manifest_path):
    return dict(format=MANIFEST_FORMAT, precision="fp32", runtime="saved_model")
  manifest = read_json(manifest_path, ServingError)
  if manifest.get("format") != MANIFEST_FORMAT:
    raise ServingError(f"{manifest_path}: not a {MANIFEST_FORMAT} manifest")
  manifest.setdefault("runtime", "saved_model")
  manifest.setdefault("precision", "fp32")
  for field, choices in (("runtime", RUNTIMES), ("precision", PRECISIONS)):
    if field in manifest and manifest[field] not in choices:
      raise ServingError(f"{manifest_path}: unknown {field} "
                         f"{manifest[field]!r} ({' or '.join(choices)})")
  if manifest["precision"] not in RUNTIME_PRECISIONS[
      manifest["runtime"]]:
    raise ServingError(f"{manifest_path}: runtime {manifest['runtime']} does "
                       f"not run precision {manifest['precision']!r}")
  inputs = manifest.get("string_inputs", [])
  if (not isinstance(inputs, list) or not all(
      isinstance(n, str) and n for n in inputs)
      or len(set(inputs)) != len(inputs)):
    raise ServingError(f"{manifest_path}: string_inputs must be a list of "
                       f"distinct input names, found {inputs!r}")
  buckets = manifest.get("buckets", [])
  if not isinstance(buckets, list) or not all(
      isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in buckets):
    raise ServingError(f"{manifest_path}: buckets must be a list of positive "
                       f"lengths, found {buckets!r}")
  if manifest["runtime"] in ("tflite", "openvino"):
    network = named_path(os.path.join(path, "assets.extra"),
                         manifest.get("network"), ServingError, manifest_path)
    files = [network]
    if manifest["runtime"] == "openvino":
      # The .xml graph and the .bin weights beside it.
      files.append(os.path.splitext(network)[0] + ".bin")
    for file in files:
      if not os.path.isfile(file):
        raise ServingError(f"{manifest_path}: names a {manifest['runtime']} "
                           f"network {manifest['network']!r} whose "
                           f"{os.path.basename(file)} is not in assets.extra")
  return manifest


def load_serving(path: str, num_threads: Optional[int] = None) -> Callable:
  """The serving callable of an export: `f(text=[...])`, `f(text=..,
  text_b=..)`, `f(question=.., context=..)` -> the dict of tensors of the
  SavedModel's `serving_default`, at the precision and on the runtime the
  export was written for. An embedder's also has `encode(texts)` -> NumPy
  [n, dim] (`bert.serving.embedder.ServedEmbedder`).

  Args:
    num_threads: TFLite or OpenVINO threads (default: all cores);
      SavedModels use TensorFlow's own thread pools.
  """
  manifest = read_manifest(path)
  loaded = _load_saved_model(path)
  signatures = loaded.signatures
  if "serving_default" not in signatures:
    raise ServingError(f"{path}: the SavedModel has no serving_default signature")
  serve = signatures["serving_default"]
  names = tuple(sorted(serve.structured_input_signature[1]))
  if set(manifest.get("string_inputs", names)) != set(names):
    raise ServingError(f"{os.path.join(path, MANIFEST)}: string_inputs "
                       f"{manifest['string_inputs']} are not the SavedModel's "
                       f"inputs ({', '.join(names)})")
  names = tuple(manifest.get("string_inputs", names))
  network = _network(path, manifest, num_threads)
  if network is None:
    function = SavedModelServing(serve, names)
  else:
    stages = ("preprocess", "network", "postprocess")
    if any(stage not in signatures for stage in stages):
      raise ServingError(f"{path}: a {manifest['runtime']} export needs the "
                         f"signatures {', '.join(stages)}; found "
                         f"{', '.join(signatures)}")
    function = StagedServing(signatures["preprocess"], network,
                             signatures["postprocess"], names,
                             empty_network=signatures["network"],
                             host=_host(path, manifest))
  if manifest.get("kind") == "embedder":
    function = ServedEmbedder(function)
  function.manifest = manifest
  # What runs the network: the manifest's runtime, or the SavedModel where
  # that runtime is not installed.
  function.runtime = manifest["runtime"] if network is not None else "saved_model"
  # Keeps the SavedModel's resources (tables, variables) alive.
  function.saved_model = loaded
  return function


def _host(path: str, manifest: Dict) -> Optional[HostStages]:
  """The Python stages of small batches (`bert.serving.host`), where the
  export has them."""
  spec = manifest.get("host")
  # An export written before the host tokenizer took the graph's
  # normalisation table: its small batches run the graphs.
  if not isinstance(spec, dict) or "normalization" not in spec:
    return None
  extra = os.path.join(path, "assets.extra")
  manifest_path = os.path.join(path, MANIFEST)
  try:
    for name in ("vocab", "normalization"):
      named_path(extra, spec.get(name), ServingError, manifest_path)
    return HostStages(spec, extra)
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ServingError(f"{manifest_path}: host: {first_line(e)}") from None


def _network(path: str, manifest: Dict, num_threads: Optional[int]):
  """The network stage's runner for a TFLite or OpenVINO export (None: the
  SavedModel runs it). An OpenVINO export where OpenVINO is not installed
  is served by its SavedModel (fp32), with a warning saying so."""
  runtime = manifest["runtime"]
  if runtime == "saved_model":
    return None
  network_path = os.path.join(path, "assets.extra", manifest["network"])
  if runtime == "openvino":
    if not openvino_runtime.available():
      logging.warning("%s: its network runs on OpenVINO, which is not installed "
                      "(pip install \"bert-tf2[openvino]\"); serving the "
                      "SavedModel's fp32 network instead", path)
      return None
    try:
      return openvino_runtime.OpenVINONetwork(
          network_path, manifest["precision"], num_threads=num_threads)
    except (RuntimeError, ValueError) as e:
      raise ServingError(f"{network_path}: not an OpenVINO network this export "
                         f"can run ({first_line(e)})") from None
  from bert.serving import tflite  # pylint: disable=g-import-not-at-top
  with open(network_path, "rb") as f:
    blob = f.read()
  try:
    return tflite.TFLiteNetwork(blob, num_threads=num_threads,
                                single_row_lengths=manifest.get("buckets", ()))
  except (ValueError, RuntimeError, KeyError) as e:
    raise ServingError(f"{network_path}: not a TFLite network this export "
                       f"can run ({first_line(e)})") from None


def _load_saved_model(path: str):
  """`tf.saved_model.load`, a damaged SavedModel being one ServingError."""
  try:
    return tf.saved_model.load(path)
  except (OSError, ValueError, KeyError, DecodeError, tf.errors.OpError) as e:
    raise ServingError(f"{path}: cannot load the SavedModel ({first_line(e)})"
                       ) from None


def as_numpy(outputs: Mapping[str, tf.Tensor]) -> Dict[str, np.ndarray]:
  """A serving result as NumPy arrays (strings as bytes)."""
  return {k: np.asarray(v) for k, v in outputs.items()}
