"""The text embedder's serving export: raw strings -> embeddings, equal to
`BertTextEmbedder.encode`, TF Hub's text-embedding interface, loadable
without this library; bf16 and int8 behind the accuracy gate (recall@1 of
SQuAD dev questions against their articles' paragraphs)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert import export
from bert import hardware as cpu
from bert.data import squad_json
from bert.models import BertTextEmbedder
from bert.serving import gate, loader, tflite, writer
from bert.serving.embedder import ServedEmbedder
from bert.testing import shared_texts
from bert.validation import ConfigError
from conftest import REPO_ROOT, max_abs_diff, minilm_dir, one_line, shared_data
from serving_helpers import tiny_embedder


# ----------------------------------------------------------------- helpers
def varied_texts(n=40):
  """Real texts from short (SST-2, questions) to longer than MiniLM's 256
  pieces (SQuAD contexts), and an empty one."""
  texts = shared_texts()
  by_length = sorted(set(texts), key=len)
  picks = [by_length[int(i)] for i in np.linspace(0, len(by_length) - 1, n)]
  return picks + [""]


def squad_gate(titles, max_drop=None):
  """Recall@1 of the questions of these SQuAD dev articles against every
  paragraph of them."""
  path = shared_data("squad", "dev-v1.1.json")
  examples = squad_json.read_squad(path, titles)
  contexts = list(dict.fromkeys(e.context for e in examples))
  where = {c: i for i, c in enumerate(contexts)}
  return gate.retrieval_gate([e.question for e in examples], contexts,
                             [where[e.context] for e in examples],
                             f"squad dev {'+'.join(titles)}", max_drop)


def run_without_bert(script):
  """`script` in a fresh Python that cannot import bert (TF and TF Text
  only); its last line of output, as JSON."""
  code = ("import sys\nsys.modules['bert'] = None  # importing bert fails\n"
          + textwrap.dedent(script))
  done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def minilm():
  return BertTextEmbedder.from_pretrained(minilm_dir())


@pytest.fixture(scope="module")
def minilm_export(minilm, tmp_path_factory):
  path = str(tmp_path_factory.mktemp("embedder") / "fp32")
  return path, minilm.export(path)


# -------------------------------------------------------------------- fp32
@pytest.mark.heavy
def test_fp32_export_equals_encode_on_real_texts(minilm, minilm_export):
  path, manifest = minilm_export
  assert manifest["kind"] == "embedder" and manifest["precision"] == "fp32"
  assert manifest["dim"] == 384 and manifest["normalize"] is True
  texts = varied_texts()
  expected = minilm.encode(texts)
  served = export.load_serving(path)
  assert served.manifest["runtime"] == "saved_model"
  got = served.encode(texts)
  assert got.dtype == np.float32 and got.shape == (len(texts), 384)
  assert max_abs_diff(got, expected) <= 1e-5
  # Any batching: one row at a time, and the whole list in one call.
  assert max_abs_diff(served.encode(texts[::7], batch_size=1),
                      expected[::7]) <= 1e-5
  whole = served(text=texts)["embeddings"].numpy()
  assert max_abs_diff(whole, expected) <= 1e-5
  # Normalised as the model is (all-MiniLM-L6-v2 ends with Normalize).
  np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
  # A batch of 0 rows is [0, dim].
  assert served(text=[])["embeddings"].shape == (0, 384)

  # A batch is cut to the smallest length bucket holding its longest text.
  pre = served.saved_model.signatures["preprocess"]
  assert pre(text=tf.constant(["a b c", "d"]))["input_word_ids"].shape[1] == 32
  long_text = max(texts, key=len)
  longest = pre(text=tf.constant(["d", long_text]))["input_word_ids"]
  assert longest.shape[1] == 256


@pytest.mark.heavy
def test_export_loads_with_tensorflow_alone_as_a_tf_hub_text_embedding(
    minilm, minilm_export):
  path, _ = minilm_export
  texts = varied_texts(12)
  got = run_without_bert(f"""
      import json
      import tensorflow as tf, tensorflow_text
      import tensorflow_hub as hub
      m = tf.saved_model.load({path!r})
      called = m(tf.constant({texts!r}))                 # TF Hub: obj(texts)
      layer = hub.KerasLayer({path!r})(tf.constant({texts!r}))
      signature = m.signatures["serving_default"]
      served = signature(text=tf.constant({texts!r}))
      print(json.dumps(dict(
          called=called.numpy().tolist(), dtype=called.dtype.name,
          layer=layer.numpy().tolist(),
          served=served["embeddings"].numpy().tolist(),
          inputs=sorted(signature.structured_input_signature[1]),
          outputs=sorted(signature.structured_outputs),
          variables=len(m.variables))))
  """)
  expected = minilm.encode(texts)
  assert got["dtype"] == "float32"
  assert got["inputs"] == ["text"] and got["outputs"] == ["embeddings"]
  assert max_abs_diff(got["called"], expected) <= 1e-5
  assert max_abs_diff(got["layer"], expected) <= 1e-5
  assert max_abs_diff(got["served"], expected) <= 1e-5
  assert got["variables"] == len(minilm.variables)


@pytest.mark.heavy
def test_export_keeps_the_models_pooling_dense_layers_norm_and_prompt(tmp_path):
  # Every pooling mode at once, a dense layer, no normalisation, a default
  # prompt; at int8, so every op of the network must have a TFLite kernel.
  model = tiny_embedder(pooling=("cls", "max", "mean", "mean_sqrt_len",
                                 "weighted_mean", "last"),
                        dense=[dict(units=24, activation="tanh")],
                        normalize=False)
  model.preprocessor.prompts = {"query": "query: "}
  model.preprocessor.default_prompt_name = "query"
  texts = ["a short one", "", "a much longer text " * 6, "mid length text"]
  expected = model.encode(texts)
  path = str(tmp_path / "int8")
  manifest = model.export(path, precision="int8", gate=gate.retrieval_gate(
      texts, texts, range(4), "self", max_drop=100))
  assert manifest["runtime"] == "tflite" and manifest["dim"] == 24
  assert manifest["prompt"] == "query: " and manifest["normalize"] is False
  # The SavedModel's own signature is the fp32 graph: equal to encode.
  fp32 = tf.saved_model.load(path).signatures["serving_default"]
  got = fp32(text=tf.constant(texts))["embeddings"].numpy()
  assert got.shape == (4, 24)
  assert max_abs_diff(got, expected) <= 1e-5
  assert np.abs(np.linalg.norm(got, axis=1) - 1).max() > 1e-2   # not unit
  # Negative control: without the prompt the rows differ.
  assert max_abs_diff(got, model.encode(texts, prompt="")) > 1e-3
  # load_serving runs the network in TFLite (int8).
  int8 = export.load_serving(path)
  assert int8.manifest["runtime"] == "tflite"
  quantized = int8.encode(texts)
  assert quantized.shape == (4, 24)
  cosine = np.sum(quantized * expected, 1) / (
      np.linalg.norm(quantized, axis=1) * np.linalg.norm(expected, axis=1))
  assert cosine.min() >= 0.99
  assert max_abs_diff(quantized, expected) > 1e-6     # really quantized
  with pytest.raises(ValueError) as e:
    int8.encode(["a", None])
  one_line(e, "texts[1] is NoneType, not a string")


# -------------------------------------------------------------------- gate
def _broken_int8(real_convert):
  """A quantizer with a wrong scale: the last block's output kernel is
  converted at 3x its value."""
  def convert(network, module, quantize=True):
    kernel = [w for w in module.model.encoder.transformer_layers[-1].weights
              if w.name.endswith("/output/kernel:0")][0]
    saved = kernel.numpy()
    kernel.assign(3 * saved)
    try:
      fresh = tf.function(module._network, input_signature=[
          {k: tf.TensorSpec([None, None], tf.int32, name=k)
           for k in ("input_word_ids", "input_mask", "input_type_ids")}])
      return real_convert(fresh.get_concrete_function(), module, quantize)
    finally:
      kernel.assign(saved)
  return convert


def _broken_bf16(real_copy):
  def copy(model, precision):
    out = real_copy(model, precision)
    if precision != "bf16":
      return out
    kernel = [w for w in out.encoder.transformer_layers[-1].weights
              if w.name.endswith("/output/kernel:0")][0]
    kernel.assign(3 * kernel)
    return out
  return copy


@pytest.mark.heavy
def test_gate_refuses_a_broken_int8_export_and_writes_nothing(
    minilm, tmp_path, monkeypatch):
  # A limit of 5 points: wide enough for the real int8 export on these 112
  # questions (it passes this gate in the command's test below, and the
  # default 0.5 on 1,057 questions in test_gate_passes_...), far narrower
  # than the broken quantizer's drop.
  monkeypatch.setattr(tflite, "convert", _broken_int8(tflite.convert))
  path = tmp_path / "new"
  with pytest.raises(gate.AccuracyGateError) as e:
    minilm.export(str(path), precision="int8",
                  gate=squad_gate(["Normans"], max_drop=5))
  _check_refusal(e, "int8", 5)
  assert not path.exists()
  assert not os.listdir(tmp_path)                 # no leftovers beside it


# Slow: the int8 refusal above is the default suite's.
@pytest.mark.slow
def test_gate_refuses_a_broken_bf16_export_and_keeps_the_earlier_one(
    minilm, minilm_export, monkeypatch):
  monkeypatch.setattr(writer, "policy_copy", _broken_bf16(writer.policy_copy))
  path, _ = minilm_export
  before = sorted(os.listdir(path))
  check = squad_gate(["Normans"])
  if not cpu.has_bf16():
    # No bf16 to break on this CPU: the export is fp32, and needs no gate.
    assert minilm.export(path, precision="bf16", gate=check)[
        "precision"] == "fp32"
    return
  with pytest.raises(gate.AccuracyGateError) as e:
    minilm.export(path, precision="bf16", gate=check)
  _check_refusal(e, "bf16", 0.5)
  # The earlier export in the folder stays as it was.
  assert sorted(os.listdir(path)) == before
  assert loader.read_manifest(path)["precision"] == "fp32"


def _check_refusal(error, precision, limit):
  """The refusal is one line with both figures, the broken one far below
  fp32 (the real exports are within 1 point)."""
  message = one_line(error, f"{precision} export refused: recall@1 on squad "
                            "dev Normans is ",
                     f" points > max_accuracy_drop={limit:g}")
  fp32 = float(message.split(" vs ")[1].split(" at fp32")[0])
  broken = float(message.split(" is ")[1].split(f" at {precision}")[0])
  assert fp32 > 60 and broken < fp32 - 5


# Slow: a minute (the fp32 reference and two reduced exports on 1,057
# questions); the refusals above run by default.
@pytest.mark.slow
def test_gate_passes_correct_int8_and_bf16_exports(minilm, tmp_path):
  check = squad_gate(["Super_Bowl_50", "Warsaw"])   # 1,057 questions
  texts = varied_texts(16)
  expected = minilm.encode(texts)
  for precision in ("int8", "bf16"):
    path = str(tmp_path / precision)
    manifest = minilm.export(path, precision=precision, gate=check)
    no_bf16 = precision == "bf16" and not cpu.has_bf16()
    written = "fp32" if no_bf16 else precision
    assert manifest["precision"] == written
    if written == "fp32":
      continue
    figures = manifest["gate"]
    assert figures["metric"] == "recall@1" and figures["max_drop"] == 0.5
    assert figures["fp32"] > 55 and figures["fp32"] - figures[precision] <= 0.5
    assert loader.read_manifest(path)["gate"] == figures
    served = export.load_serving(path)
    assert served.manifest["runtime"] == (
        "tflite" if precision == "int8" else "saved_model")
    got = served.encode(texts)
    assert np.sum(got * expected, 1).min() >= 0.98        # cosine, unit rows
    assert max_abs_diff(got, expected) > 1e-6             # really reduced


def test_retrieval_and_sts_gates_score_known_values():
  queries, documents = ["q0", "q1", "q2"], ["d0", "d1"]
  check = gate.retrieval_gate(queries, documents, [0, 1, 1], "toy")
  assert check.metric == "recall@1" and check.max_drop == 0.5
  vectors = {"q0": [1, 0], "q1": [0, 1], "q2": [1, 0.1], "d0": [1, 0],
             "d1": [0, 1]}

  def serve(text):
    return {"embeddings": np.array([vectors[t] for t in text], np.float32)}

  # q0 -> d0 right, q1 -> d1 right, q2 -> d0 wrong: 2 of 3.
  assert check.evaluate(serve) == pytest.approx(200 / 3)
  sts = gate.sts_gate(["q0", "q1", "q2"], ["d0", "d0", "d0"], [5, 0, 4], "toy")
  # cosines 1, 0, 0.995 rank as the scores do: rho = 1.
  assert sts.evaluate(serve) == pytest.approx(100.0)
  # Ranks 3, 1, 2 against 1, 2, 3: rho = 1 - 6 * 6 / (3 * 8) = -0.5.
  sts = gate.sts_gate(["q0", "q1", "q2"], ["d0", "d0", "d0"], [0, 4, 5], "toy")
  assert sts.evaluate(serve) == pytest.approx(-50.0)


def test_gate_files(tmp_path):
  tsv = tmp_path / "sts.tsv"
  tsv.write_text("genre\tsentence1\tsentence2\tscore\n"
                 "a\tA man eats.\tA man is eating.\t4.8\n"
                 "a\tA dog runs.\tThe stock fell.\t0.2\n"
                 "a\tIt rains.\tIt is raining.\t5.0\n")
  check = gate.embedding_gate(str(tsv))
  assert check.metric == "STS Spearman" and len(check.inputs["text"]) == 6
  squad = gate.embedding_gate(shared_data("squad", "dev-v1.1.json"), 1.0)
  assert squad.metric == "recall@1" and squad.max_drop == 1.0
  # 10,570 questions (some asked twice) and 2,067 paragraphs, embedded once.
  assert 12_500 < len(squad.inputs["text"]) <= 10_570 + 2_067
  for text, fragments in (
      ("", ("no examples",)),
      ("sentence1\tscore\nA\t1\n", (":1:", "no column 'sentence2'")),
      ("sentence1\tsentence2\tscore\nA\tB\tx\nC\tD\t1\n", (":2:", "'x'")),
      ("sentence1\tsentence2\tscore\nA\tB\n", (":2:", "2 column(s)")),
      ("sentence1\tsentence2\tscore\nA\tB\t1\n", ("at least 2",)),
      ("sentence1\tsentence2\tscore\nA\tB\t1\nC\tD\t1\n", ("not all equal",))):
    tsv.write_text(text)
    with pytest.raises(ValueError) as e:
      gate.embedding_gate(str(tsv))
    one_line(e, *fragments)


# --------------------------------------------------------------- bad input
def test_bad_export_arguments_give_one_line_and_write_nothing(tmp_path):
  model = tiny_embedder()
  path = tmp_path / "m"
  with pytest.raises(ConfigError) as e:
    model.export(str(path), precision="int8")
  one_line(e, "int8 needs an accuracy gate", "gate=", "--gate_data")
  with pytest.raises(ConfigError) as e:
    model.export(str(path), precision="int8", gate=3)
  one_line(e, "gate must be an AccuracyGate or a dev file path, got int")
  with pytest.raises(ValueError) as e:
    model.export(str(path), precision="fp16")
  one_line(e, "precision", "fp16")
  with pytest.raises(FileNotFoundError) as e:
    model.export(str(path), precision="int8", gate=str(tmp_path / "no.tsv"))
  one_line(e, "no.tsv")
  assert not path.exists()


def test_served_encode_checks_its_texts_and_returns_rows_in_order():
  calls = []

  def serve(text):            # a row per text: its UTF-8 length
    calls.append([len(t) for t in text])
    return {"embeddings": tf.constant([[float(len(t))] for t in text])}

  served = ServedEmbedder(serve)
  texts = ["ccc", "a", "é" * 5, "", "bb", b"dddd", "x" * 9]
  got = served.encode(texts, batch_size=3)
  assert got.dtype == np.float32
  assert got[:, 0].tolist() == [3, 1, 10, 0, 2, 4, 9]
  # Each call holds texts of similar length: the list runs shortest first.
  assert calls == [[0, 1, 2], [3, 4, 9], [10]]
  for texts, fragments in (([], ("texts is empty",)),
                           (None, ("texts is NoneType", "list of strings")),
                           ("one string", ("texts is str",)),
                           (["a", 3], ("texts[1] is int, not a string",)),
                           (["a", None], ("texts[1] is NoneType",)),
                           (["a", "\ud800"],
                            ("texts[1]", "not valid Unicode"))):
    with pytest.raises(ValueError) as e:
      served.encode(texts)
    one_line(e, *fragments)
  with pytest.raises(ValueError) as e:
    served.encode(["a"], batch_size=0)
  one_line(e, "batch_size")
  assert len(calls) == 3          # no bad input reached the model


# ---------------------------------------------------------------- command
# Slow: two command runs; the export and its gate run by default above.
@pytest.mark.slow
def test_command_exports_a_sentence_transformers_folder_through_the_gate(
    tmp_path, minilm):
  normans = tmp_path / "normans.json"
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    data = json.load(f)
  data["data"] = [a for a in data["data"] if a["title"] == "Normans"]
  normans.write_text(json.dumps(data))
  script = os.path.join(REPO_ROOT, "scripts", "export.py")

  def command(*flags):
    # By path: `bert.scripts` of an editable install may be another
    # checkout's.
    return subprocess.run([sys.executable, script, "--kind=embedder",
                           f"--checkpoint={minilm_dir()}", *flags],
                          capture_output=True, text=True, timeout=600)

  out = tmp_path / "int8"
  done = command(f"--output={out}", "--precision=int8",
                 f"--gate_data={normans}", "--max_accuracy_drop=5")
  assert done.returncode == 0, done.stderr[-3000:]
  assert f"accuracy gate: recall@1 on {normans}: fp32 " in done.stdout
  assert ", int8 " in done.stdout and "limit: 5 points" in done.stdout
  texts = varied_texts(8)
  got = export.load_serving(str(out)).encode(texts)
  assert np.sum(got * minilm.encode(texts), 1).min() >= 0.98

  refused = command(f"--output={tmp_path / 'no'}", "--precision=int8")
  assert refused.returncode == 2
  assert refused.stderr.strip().splitlines()[-1] == (
      "error: --precision=int8 needs --gate_data (a SQuAD json or an STS tsv) "
      "for the accuracy gate")
  assert not (tmp_path / "no").exists()
