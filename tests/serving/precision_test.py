"""Reduced-precision serving exports, the one loader, and the accuracy gate."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import BertEncoder, export
from bert.models import BertClassifier, BertTokenClassifier
from bert import hardware as cpu
from bert.serving import gate, loader, tflite
from bert.serving.precision import policy_copy
from bert.serving.grouped import plan_groups
from conftest import small_config, vocab
from serving_helpers import (classifier, padded_inputs, self_labelled_gate,
                             sst2_texts)


def export_classifier(model, path, precision="fp32", gate_=None, buckets=None):
  return export.export_classifier(model, str(path), vocab(), True, 64,
                                  ["neg", "pos"], pairs=False,
                                  precision=precision, length_buckets=buckets,
                                  gate=gate_)


def test_every_precision_loads_with_one_loader_and_the_same_outputs_at_its_bucket(
    tmp_path):
  model = classifier(scale=20.0)
  texts = sst2_texts(40) + [""]
  served = {}
  for precision in ("fp32", "bf16", "int8"):
    manifest = export_classifier(model, tmp_path / precision, precision,
                                 buckets=(16, 32, 64))
    # bf16 falls back to fp32 on a CPU without bf16 dot products.
    expected = "fp32" if precision == "bf16" and not cpu.has_bf16() else precision
    assert manifest["precision"] == expected
    on_disk = loader.read_manifest(str(tmp_path / precision))
    assert on_disk["runtime"] == ("tflite" if precision == "int8" else "saved_model")
    serve = export.load_serving(str(tmp_path / precision))
    served[precision] = loader.as_numpy(serve(text=texts))
    # Batches of 0 and 1 rows too.
    assert loader.as_numpy(serve(text=[]))["label"].shape == (0,)
    assert serve(text=texts[:1])["label"].shape == (1,)
  # The SavedModel's own signature is the fp32 reference, whatever the
  # precision (the TFLite network sits beside it).
  signature = tf.saved_model.load(str(tmp_path / "int8")).signatures["serving_default"]
  ref = loader.as_numpy(signature(text=tf.constant(texts)))
  for precision, out in served.items():
    assert set(out) == set(ref) == {"probabilities", "label"}
    assert out["probabilities"].dtype == ref["probabilities"].dtype
    assert out["probabilities"].shape == ref["probabilities"].shape
    tolerance = {"fp32": 1e-6, "bf16": 0.05, "int8": 0.05}[precision]
    assert np.abs(out["probabilities"] - ref["probabilities"]).max() <= tolerance
    assert (out["label"] == ref["label"]).mean() >= 0.9
  # int8 is not fp32 in disguise: the network really ran elsewhere.
  assert np.abs(served["int8"]["probabilities"] - ref["probabilities"]).max() > 1e-6

  # Each batch runs at the smallest length bucket that holds its longest row.
  pre = tf.saved_model.load(str(tmp_path / "fp32")).signatures["preprocess"]
  assert pre(text=tf.constant(["a b c", "d"]))["input_word_ids"].shape[1] == 16
  longer = pre(text=tf.constant(["a b c", " ".join(["word"] * 20)]))
  assert longer["input_word_ids"].shape[1] == 32
  full = pre(text=tf.constant([" ".join(["word"] * 200)]))
  assert full["input_word_ids"].shape[1] == 64
  # Cutting changes no answer: the same rows at the full length.
  cut_texts = ["a b c", "d", " ".join(["word"] * 20)]
  got = export.load_serving(str(tmp_path / "fp32"))(text=cut_texts)["probabilities"].numpy()
  ids = export.ClassifierServing(model, vocab(), True, 64, ["neg", "pos"],
                                 False, (64,)).preprocess({"text": tf.constant(cut_texts)})
  assert ids["input_word_ids"].shape[1] == 64
  full_length = tf.nn.softmax(model(ids, training=False)["logits"]).numpy()
  assert np.abs(got - full_length).max() <= 1e-5


def _graph_ops(concrete):
  """(op type, dtype attr) of every node of a traced function, the functions
  it calls included."""
  graph = concrete.graph.as_graph_def()
  nodes = list(graph.node)
  for f in graph.library.function:
    nodes.extend(f.node_def)
  return [(n.op, tf.as_dtype(n.attr["dtype"].type).name
           if n.attr["dtype"].type else None) for n in nodes]


def test_a_bf16_network_runs_with_bf16_weights_frozen_into_its_graph():
  """The bf16 network reads no variable: its weights are bf16 constants of
  its graph (`bert.serving.frozen`: oneDNN keeps constant weights in its own
  layout), and it gives the mixed_bfloat16 model's outputs. The fp32
  network (the negative control) reads its variables."""
  model = classifier(scale=20.0)
  make = lambda m: export.ClassifierServing(m, vocab(), True, 64,
                                            ["neg", "pos"], False, (64,))
  fp32 = make(model)
  bf16_model = policy_copy(model, "bf16")
  bf16 = make(bf16_model)
  ops32 = _graph_ops(fp32.network)
  ops16 = _graph_ops(bf16.network)
  assert any(op == "ReadVariableOp" for op, _ in ops32)
  assert fp32.model_variables
  assert not any(op in ("ReadVariableOp", "VarHandleOp") for op, _ in ops16)
  assert not bf16.model_variables
  # The projection kernels are bf16 constants (64 x 192: the fused QKV).
  kernels = [n for n in bf16.network.graph
             .as_graph_def().library.function for n in n.node_def
             if n.op == "Const" and n.attr["dtype"].type == tf.bfloat16.as_datatype_enum
             and [d.size for d in n.attr["value"].tensor.tensor_shape.dim] == [64, 192]]
  assert len(kernels) == 2                  # one per layer
  inputs = {k: tf.constant(v) for k, v in padded_inputs([64, 40, 7]).items()}
  got = bf16.network(inputs)["logits"].numpy().astype(np.float32)
  want = tf.cast(bf16_model(inputs, training=False)["logits"], tf.float32).numpy()
  assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
  # And it is not the fp32 network: bf16 rounding shows.
  exact = fp32.network(inputs)["logits"].numpy()
  assert np.abs(got - exact).max() > 1e-4


# Slow: the refusal test's negative control passes a good export too.
@pytest.mark.slow
def test_gate_passes_a_good_int8_export_and_records_both_figures(tmp_path):
  model = classifier(scale=20.0)
  texts = sst2_texts(64)
  manifest = export_classifier(model, tmp_path / "ok", "int8",
                               gate_=self_labelled_gate(model, texts, 5.0))
  figures = manifest["gate"]
  assert figures["fp32"] == 100.0 and figures["int8"] >= 95.0
  assert figures["metric"] == "accuracy" and figures["source"] == "sst2-dev-sample"
  written = json.load(open(tmp_path / "ok" / "assets.extra" / "serving.json"))
  assert written["gate"] == figures


def test_gate_refuses_a_broken_quantization_naming_both_figures(tmp_path,
                                                                monkeypatch):
  model = classifier(scale=20.0)
  texts = sst2_texts(64)
  real_convert = tflite.convert

  def broken_convert(network, module, quantize=True):
    # Weights scaled wrong: the converted head's kernel is negated.
    kernel = [w for w in module.model.head.weights if "kernel" in w.name][-1]
    saved = kernel.numpy()
    kernel.assign(-saved)
    try:
      fresh = tf.function(module._network, input_signature=[
          {k: tf.TensorSpec([None, None], tf.int32, name=k)
           for k in ("input_word_ids", "input_mask", "input_type_ids")}])
      return real_convert(fresh.get_concrete_function(), module, quantize)
    finally:
      kernel.assign(saved)

  monkeypatch.setattr(tflite, "convert", broken_convert)
  path = tmp_path / "broken"
  with pytest.raises(gate.AccuracyGateError) as e:
    export_classifier(model, path, "int8",
                      gate_=self_labelled_gate(model, texts, 0.5))
  message = str(e.value)
  assert "\n" not in message
  assert "int8 export refused" in message and "sst2-dev-sample" in message
  assert "at fp32" in message and "100.00 at fp32" in message
  int8_figure = float(message.split(" is ")[1].split(" at int8")[0])
  assert int8_figure < 99.5
  assert not path.exists()            # nothing written
  # Negative control: the same gate passes the unbroken conversion, and
  # the export keeps both figures.
  monkeypatch.setattr(tflite, "convert", real_convert)
  manifest = export_classifier(model, path, "int8",
                               gate_=self_labelled_gate(model, texts, 5.0))
  assert path.exists()
  assert manifest["gate"]["fp32"] == 100.0 and manifest["gate"]["int8"] >= 95.0
  assert loader.read_manifest(str(path))["gate"] == manifest["gate"]


@pytest.mark.heavy
def test_bf16_falls_back_to_fp32_on_a_cpu_without_it_and_says_so(tmp_path,
                                                                  caplog):
  assert cpu.has_bf16(frozenset({"avx2", "avx512_bf16"}))
  assert cpu.has_bf16(frozenset({"amx_bf16"}))
  assert not cpu.has_bf16(frozenset({"avx2", "fma", "avx512f", "avx512_vnni"}))
  model = classifier()
  with caplog.at_level("WARNING"):
    manifest = export.write_serving(
        lambda m: export.ClassifierServing(m, vocab(), True, 64, ["neg", "pos"],
                                           False, (64,)),
        model, str(tmp_path / "m"), "classifier", "bf16", bf16_cpu=False)
  assert manifest["precision"] == "fp32"
  assert manifest["requested_precision"] == "bf16"
  assert any("neither AVX512_BF16 nor AMX" in r.getMessage() for r in caplog.records)
  # With the feature the network computes in bf16.
  manifest = export.write_serving(
      lambda m: export.ClassifierServing(m, vocab(), True, 64, ["neg", "pos"],
                                         False, (64,)),
      model, str(tmp_path / "b"), "classifier", "bf16", bf16_cpu=True)
  assert manifest["precision"] == "bf16"
  network = tf.saved_model.load(str(tmp_path / "b")).signatures["network"]
  graph = network.graph.as_graph_def()
  dtypes = {n.attr["T"].type for f in graph.library.function for n in f.node_def
            if n.op in ("MatMul", "BatchMatMulV2", "_MklMatMul")}
  assert tf.bfloat16.as_datatype_enum in dtypes
  # auto: bf16 where the CPU has it (and oneDNN is on), else fp32.
  for has, expected in ((False, "fp32"), (True, "bf16")):
    manifest = export.write_serving(
        lambda m: export.ClassifierServing(m, vocab(), True, 64, ["neg", "pos"],
                                           False, (64,)),
        model, str(tmp_path / f"auto_{has}"), "classifier", "auto", bf16_cpu=has)
    assert (manifest["requested_precision"], manifest["precision"]) == (
        "auto", expected)


# Slow: the TFLite network test below runs a tagger network too.
@pytest.mark.slow
def test_tagger_int8_serves_the_same_words(tmp_path):
  labels = ["O", "B-person", "I-person"]
  tf_keras.utils.set_random_seed(1)
  model = BertTokenClassifier(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=64)), len(labels))
  texts = ["John Smith visited Paris yesterday", "xylophonists \u200b play", ""]
  out = {}
  for precision in ("fp32", "int8"):
    export.export_tagger(model, str(tmp_path / precision), vocab(), True, 64,
                         labels, precision=precision)
    out[precision] = loader.as_numpy(
        export.load_serving(str(tmp_path / precision))(text=texts))
  assert (out["int8"]["words"] == out["fp32"]["words"]).all()
  assert out["int8"]["tags"].shape == out["fp32"]["tags"].shape
  assert ((out["int8"]["tags"] == b"") == (out["fp32"]["tags"] == b"")).all()


def _tiny_serving_savedmodel(path):
  """A SavedModel with a `serving_default` on `text` and nothing else: what
  the loader's checks need, without a BERT export's minutes."""
  module = tf.Module()
  module.serve = tf.function(lambda text: {"label": text},
                             input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})


def test_loader_errors_name_the_file(tmp_path):
  with pytest.raises(loader.ServingError, match="not a SavedModel folder"):
    export.load_serving(str(tmp_path))
  path = tmp_path / "m"
  _tiny_serving_savedmodel(path)
  assert export.load_serving(str(path))(text=["x"])["label"].numpy().tolist() == [b"x"]
  with pytest.raises(TypeError, match="serving takes text"):
    export.load_serving(str(path))(question=["x"])
  # A manifest naming a TFLite network that is not there.
  manifest_path = path / "assets.extra" / "serving.json"
  manifest_path.parent.mkdir()
  manifest_path.write_text(json.dumps(dict(
      format=loader.MANIFEST_FORMAT, kind="classifier", precision="int8",
      runtime="tflite", network="network_int8.tflite")))
  with pytest.raises(loader.ServingError, match="serving.json.*not in assets.extra"):
    export.load_serving(str(path))
  manifest_path.write_text("{not json")
  with pytest.raises(loader.ServingError, match="serving.json: unreadable"):
    export.load_serving(str(path))
  with pytest.raises(ValueError, match="precision must be one of"):
    export_classifier(classifier(), tmp_path / "x", "int4")
  assert not (tmp_path / "x").exists()


def _partitions(values):
  """Every split of a sorted list into runs of consecutive items."""
  if not values:
    yield []
    return
  for end in range(1, len(values) + 1):
    for rest in _partitions(values[end:]):
      yield [values[:end]] + rest


def test_length_groups_are_the_cheapest_split_and_cover_every_row_once():
  rng = np.random.default_rng(3)
  for trial in range(40):
    lengths = rng.integers(1, 65, rng.integers(1, 12))
    cost = float(rng.choice([0, 8, 64, 300]))
    groups = plan_groups(lengths, 8, cost)
    rows = np.concatenate([r for r, _ in groups])
    assert sorted(rows.tolist()) == list(range(len(lengths)))
    for r, length in groups:
      assert length % 8 == 0 and (lengths[r] <= length).all()
    total = sum(len(r) * length + cost for r, length in groups)
    # Brute force over every split of the distinct rounded lengths.
    rounded = np.maximum(8, -(-lengths // 8) * 8)
    values = sorted(set(rounded.tolist()))
    brute = min(sum((np.isin(rounded, run).sum() * run[-1] + cost) for run in split)
                for split in _partitions(values))
    assert total == brute, (trial, lengths, cost)
  # Free calls: one group per distinct rounded length; costly calls: one group.
  assert len(plan_groups(np.array([3, 20, 40, 60]), 8, 0)) == 4
  assert len(plan_groups(np.array([3, 20, 40, 60]), 8, 1e9)) == 1


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["tagger", "classifier"])
def test_tflite_network_cuts_padding_and_runs_rows_in_length_groups(kind):
  tf_keras.utils.set_random_seed(4)
  encoder = BertEncoder(small_config(vocab_size=30522, max_position_embeddings=64))
  if kind == "tagger":
    model = BertTokenClassifier(encoder, 3)
    module = export.TaggerServing(model, vocab(), True, 64, ["O", "B", "I"], (64,))
  else:
    model = BertClassifier(encoder, 2)
    module = export.ClassifierServing(model, vocab(), True, 64, ["a", "b"], False, (64,))
  blob = tflite.convert(module.network, module)

  # One group: the batch cut to its longest row rounded up to 8 tokens.
  inputs = padded_inputs([11, 5, 3])
  mask = inputs["input_mask"]
  cut = tflite.TFLiteNetwork(blob, num_threads=2)(**inputs)["logits"]
  whole = tflite.TFLiteNetwork(blob, num_threads=2, granularity=64)(**inputs)["logits"]
  ref = model({k: tf.constant(v) for k, v in inputs.items()})["logits"].numpy()
  if kind == "tagger":
    assert cut.shape == (3, 16, 3)                      # 11 rounded up to 16
    assert whole.shape == (3, 64, 3)
    real = mask[:, :16].astype(bool)
    assert np.abs(cut[real] - whole[:, :16][real]).max() <= 1e-5
    # And both are the model's logits, within int8's rounding.
    assert np.abs(cut[real] - ref[:, :16][real]).max() <= 0.05
  else:
    assert np.abs(cut - whole).max() <= 1e-5 and np.abs(cut - ref).max() <= 0.05
  # A single row runs at its exact length; a short one, given lengths of its
  # own, at the smallest that holds it, on an interpreter kept at that shape.
  single = {k: v[:1] for k, v in inputs.items()}
  one = tflite.TFLiteNetwork(blob, num_threads=2)(**single)["logits"]
  pooled_network = tflite.TFLiteNetwork(blob, num_threads=2,
                                        single_row_lengths=(8, 32, 64, 96))
  pooled = pooled_network(**single)["logits"]
  assert sorted(pooled_network._single_runners) == [32]  # pylint: disable=protected-access
  if kind == "tagger":
    assert one.shape == (1, 11, 3) and pooled.shape == (1, 32, 3)
    assert np.abs(one[0] - whole[0, :11]).max() <= 1e-5
    assert np.abs(pooled[0, :11] - whole[0, :11]).max() <= 1e-5
  else:
    assert np.abs(one - whole[:1]).max() <= 1e-5
    assert np.abs(pooled - whole[:1]).max() <= 1e-5
  # Lengths over SINGLE_ROW_MAX get none; a row longer than every length
  # runs on the shared interpreter.
  assert pooled_network._single_lengths == [8, 32, 64]  # pylint: disable=protected-access
  short = tflite.TFLiteNetwork(blob, num_threads=2, single_row_lengths=(8, 32))
  short(**padded_inputs([40]))
  assert not short._single_runners  # pylint: disable=protected-access

  # Several groups, each at its own length, equal one group on real tokens.
  lengths = np.array([60, 5, 3, 41, 9, 17, 64, 2])
  inputs = padded_inputs(lengths)
  mask = inputs["input_mask"]
  assert len(plan_groups(lengths, 8, 0.0)) == 5
  grouped = tflite.TFLiteNetwork(blob, num_threads=2, invoke_cost=0.0)(**inputs)["logits"]
  whole = tflite.TFLiteNetwork(blob, num_threads=2, invoke_cost=1e9)(**inputs)["logits"]
  assert grouped.shape == whole.shape
  if kind == "tagger":
    assert grouped.shape == (8, 64, 3)
    real = mask.astype(bool)
    assert np.abs(grouped[real] - whole[real]).max() <= 1e-5
    # Positions past a row's group are zero, not another row's values.
    assert (grouped[1, 8:] == 0).all() and np.abs(grouped[1, :5]).max() > 0
  else:
    assert grouped.shape == (8, 2)
    assert np.abs(grouped - whole).max() <= 1e-5
    # Negative control: the rows are not interchangeable.
    assert np.abs(grouped - grouped[::-1]).max() > 1e-3
