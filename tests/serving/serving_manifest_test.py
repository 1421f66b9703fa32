"""Issue 42, finding 8: a serving export's manifest (assets.extra/
serving.json) is read with the checkpoints' rules: every field the loader
uses is checked, and the TFLite network it names must be a file inside
assets.extra, all before the SavedModel is loaded.
"""

import os

import pytest
import tensorflow as tf

from bert.serving import loader as serving_loader
from conftest import one_line, write_json


def _tiny_serving_export(path, manifest):
  module = tf.Module()
  module.serve = tf.function(
      lambda text: {"label": text},
      input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  tf.saved_model.save(module, str(path),
                      signatures={"serving_default": module.serve})
  os.makedirs(os.path.join(path, "assets.extra"))
  fields = dict(format=serving_loader.MANIFEST_FORMAT, kind="classifier",
                string_inputs=["text"])
  fields.update(manifest)
  write_json(os.path.join(path, serving_loader.MANIFEST), fields)


@pytest.mark.parametrize("network", ["../../outside.tflite", "ABSOLUTE"])
def test_serving_manifest_naming_a_network_outside(tmp_path, network):
  outside = tmp_path / "outside.tflite"
  outside.write_bytes(b"not a model of this export")
  if network == "ABSOLUTE":
    network = str(outside)
  path = tmp_path / "export"
  _tiny_serving_export(path, dict(precision="int8", runtime="tflite",
                                  network=network))
  with pytest.raises(serving_loader.ServingError) as e:
    serving_loader.load_serving(str(path))
  one_line(e, "serving.json", "outside", "must be inside its folder")


@pytest.mark.parametrize("manifest,fragment", [
    (dict(precision="fp32", runtime="onnx"), "unknown runtime 'onnx'"),
    (dict(precision="fp64", runtime="saved_model"), "unknown precision"),
    (dict(precision="fp32", string_inputs=["text", "text"]),
     "string_inputs must be"),
    (dict(precision="fp32", string_inputs=["question"]),
     "are not the SavedModel's inputs"),
    (dict(precision="fp32", buckets=[32, "64"]), "buckets must be a list"),
    (dict(precision="fp32", buckets=[0]), "positive lengths, found [0]"),
])
def test_serving_manifest_fields_are_checked(tmp_path, manifest, fragment):
  path = tmp_path / "export"
  _tiny_serving_export(path, manifest)
  with pytest.raises(serving_loader.ServingError) as e:
    serving_loader.load_serving(str(path))
  one_line(e, "serving.json", fragment)


def test_serving_manifest_naming_a_damaged_network(tmp_path):
  """An int8 export whose TFLite network file is not a TFLite model."""
  module = tf.Module()
  strings = tf.TensorSpec([None], tf.string, name="text")
  ids = tf.TensorSpec([None, None], tf.int32)
  identity = tf.function(lambda text: {"text": text},
                         input_signature=[strings])
  network = tf.function(lambda input_word_ids: {"logits": input_word_ids},
                        input_signature=[ids])
  module.fns = [identity, network]
  tf.saved_model.save(module, str(tmp_path / "export"), signatures=dict(
      serving_default=identity, preprocess=identity, postprocess=identity,
      network=network))
  path = tmp_path / "export"
  (path / "assets.extra").mkdir()
  write_json(str(path / serving_loader.MANIFEST), dict(
      format=serving_loader.MANIFEST_FORMAT, kind="classifier",
      string_inputs=["text"], precision="int8", runtime="tflite",
      network="network_int8.tflite"))
  (path / "assets.extra" / "network_int8.tflite").write_bytes(b"\0" * 64)
  with pytest.raises(serving_loader.ServingError) as e:
    serving_loader.load_serving(str(path))
  one_line(e, "network_int8.tflite", "not a TFLite network")
