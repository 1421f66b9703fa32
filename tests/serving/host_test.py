"""Small batches in Python (`bert.serving.host`): the host tokenizer and
packer give the graph's encoder inputs on any text, and a served batch
(classifier, embedder, span labeler) answers as the graphs do."""

import json
import os
import string

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import BertEncoder, export
from bert.data import classification_data as cd
from bert.data import ner_data, squad_json
from bert.data.squad_config import SquadConfig
from bert.layers.bert_tokenizer import read_vocab
from bert.models import BertSpanLabeler
from bert.serving import gate, host, loader
from conftest import shared_data, small_config, vocab
from serving_helpers import classifier, sst2_texts, tiny_embedder

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def module(pairs, seq_length=128, buckets=(32, 64, 96, 128), lower_case=True,
           labels=("neg", "pos")):
  return export.ClassifierServing(classifier(), vocab(), lower_case, seq_length,
                                  list(labels), pairs, buckets)


def host_of(serving, folder):
  spec, tokenizer = serving.host()
  host.write_files(tokenizer, str(folder))
  return host.HostStages(spec, str(folder))


def compare(serving, hosted, rows):
  """Host and graph encoder inputs of `rows` (name -> texts), in batches of
  host.MAX_ROWS; returns how many rows were compared."""
  names = serving.string_inputs
  n = len(rows[names[0]])
  for start in range(0, n, host.MAX_ROWS):
    batch = {k: tf.constant(v[start:start + host.MAX_ROWS]) for k, v in rows.items()}
    texts = hosted.accepts(batch)
    assert texts is not None
    got = hosted.preprocess(texts)
    want = serving.preprocess(batch)
    for k in ENCODER_INPUTS:
      assert got[k].dtype == np.int32
      np.testing.assert_array_equal(got[k], want[k].numpy(), err_msg=(
          f"{k} of {[v[start:start + host.MAX_ROWS] for v in rows.values()]}"))
  return n


def test_host_inputs_equal_the_graphs_on_the_shared_data(tmp_path):
  single = module(pairs=False)
  hosted = host_of(single, tmp_path)
  sst2 = sst2_texts(872)
  words = [" ".join(s.words) for s in ner_data.read_conll(
      shared_data("ner", "wnut17", "emerging.dev.conll"))]
  squad = squad_json.read_squad(shared_data("squad", "dev-v1.1.json"))
  questions = [e.question for e in squad[:1500]]
  # Contexts are longer than 128 pieces: the packer's truncation.
  contexts = list(dict.fromkeys(e.context for e in squad[:1500]))
  texts = sst2 + words + questions + contexts
  n = compare(single, hosted, {"text": texts})
  assert n > 3000 and len(contexts) > 50
  assert sum(not t.isascii() for t in texts) > 150

  pairs = module(pairs=True, seq_length=64, buckets=(16, 32, 64))
  hosted = host_of(pairs, tmp_path)
  mrpc = cd.read_glue("mrpc", shared_data("glue", "MRPC", "dev.tsv"), "eval")
  n = compare(pairs, hosted, {"text": [e.text_a for e in mrpc],
                              "text_b": [e.text_b for e in mrpc]})
  # Questions with their contexts: the longer segment is cut, tie to the second.
  asked = squad[:200]
  n += compare(pairs, hosted, {"text": [e.question for e in asked],
                               "text_b": [e.context for e in asked]})
  assert n > 500


# Text with what BERT's rules treat specially: controls and format
# characters (removed), tabs, line breaks and Unicode spaces (spaces),
# punctuation (split off), letters in both cases (lower-cased), accents and
# combining marks (stripped when uncased), CJK (split), characters beyond
# the BMP, and runs of letters beyond 100 characters ([UNK]).
_TEXT = st.lists(st.one_of(
    st.text(alphabet=string.ascii_letters + string.digits, max_size=12),
    st.text(alphabet=string.punctuation + " \t\n\r\x00\x01\x0b\x0c\x1f\x7f",
            max_size=4),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=6),
    st.sampled_from(["[MASK]", "[CLS]", "##ing", "don't", "U.S.A.", "a" * 101,
                     "b" * 100, "\u00e9" * 101, "unaffable", "Hello",
                     "Caf\u00e9", "cafe\u0301", "\u00a0\u2028\u3000", "\ufeff",
                     "\u0130stanbul", "\u039f\u0394\u039f\u03a3", "\ufb01",
                     "\u00bd", "\u65e5\u672c\u8a9e", "\U0001f600",
                     "Stra\u00dfe"])), max_size=30).map("".join)


@pytest.fixture(scope="module")
def generated_cases(tmp_path_factory):
  """Pairs at a short sequence (truncation is common), and a cased
  single-text classifier, each with its host stages."""
  pairs = module(pairs=True, seq_length=24, buckets=(8, 16, 24))
  cased = module(pairs=False, seq_length=24, buckets=(24,), lower_case=False)
  return (pairs, host_of(pairs, tmp_path_factory.mktemp("pairs")),
          cased, host_of(cased, tmp_path_factory.mktemp("cased")))


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(_TEXT, _TEXT), min_size=1,
                     max_size=host.MAX_ROWS))
def test_host_inputs_equal_the_graphs_on_generated_text(generated_cases, rows):
  pairs, pairs_host, cased, cased_host = generated_cases
  compare(pairs, pairs_host, {"text": [a for a, _ in rows],
                              "text_b": [b for _, b in rows]})
  compare(cased, cased_host, {"text": [a for a, _ in rows]})


def test_the_host_files_are_the_models(tmp_path):
  spec, tokenizer = module(pairs=False).host()
  host.write_files(tokenizer, str(tmp_path))
  assert json.load(open(tmp_path / spec["vocab"])) == read_vocab(vocab())
  with np.load(tmp_path / spec["normalization"], allow_pickle=False) as data:
    np.testing.assert_array_equal(data["table"], tokenizer.codepoint_table)


def served_both_ways(path, monkeypatch):
  """An export served with its host stages and without them (the graphs),
  and the list the texts the host preprocesses go to."""
  serve = export.load_serving(path, num_threads=2)
  graph = export.load_serving(path, num_threads=2)
  staged = getattr(graph, "_serve", graph)    # an embedder wraps its stages
  staged._host = None                # pylint: disable=protected-access
  calls = []
  real = host.HostStages.preprocess
  monkeypatch.setattr(host.HostStages, "preprocess",
                      lambda self, texts: calls.append(texts) or real(self, texts))
  return serve, graph, calls


@pytest.mark.heavy
def test_small_batches_run_in_python_and_answer_as_the_graphs(tmp_path,
                                                              monkeypatch):
  model = classifier(scale=20.0)
  manifest = export.export_classifier(
      model, str(tmp_path / "int8"), vocab(), True, 64, ["neg", "pos"],
      pairs=False, precision="int8", length_buckets=(16, 32, 64))
  assert manifest["host"]["vocab"] == host.VOCAB_FILE
  assert (tmp_path / "int8" / "assets.extra" / host.VOCAB_FILE).is_file()
  serve, graph, calls = served_both_ways(str(tmp_path / "int8"), monkeypatch)
  texts = sst2_texts(40)
  for size in (1, 2, host.MAX_ROWS):
    for start in range(0, 16, size):
      batch = texts[start:start + size]
      got, want = serve(text=batch), graph(text=batch)
      assert set(got) == set(want) == {"probabilities", "label"}
      assert got["probabilities"].dtype == want["probabilities"].dtype
      np.testing.assert_allclose(got["probabilities"].numpy(),
                                 want["probabilities"].numpy(), atol=1e-6)
      np.testing.assert_array_equal(got["label"].numpy(), want["label"].numpy())
  assert len(calls) == 16 + 8 + 2
  # Any text runs here, given as str, UTF-8 bytes or a string tensor.
  for batch in (["caf\u00e9 au lait", "\u65e5\u672c"], [b"caf\xc3\xa9 au lait"],
                tf.constant(["a tensor"])):
    np.testing.assert_array_equal(serve(text=batch)["label"].numpy(),
                                  graph(text=batch)["label"].numpy())
  assert len(calls) == 16 + 8 + 2 + 3
  # Not here: a batch over MAX_ROWS, invalid UTF-8, no rows.
  calls.clear()
  assert serve(text=texts[:host.MAX_ROWS + 1])["label"].shape == (9,)
  assert serve(text=[b"caf\xe9 au lait"])["label"].shape == (1,)
  assert serve(text=[])["label"].shape == (0,)
  assert not calls
  # An fp32 export has no host path: its network is a TensorFlow graph.
  fp32 = export.export_classifier(model, str(tmp_path / "fp32"), vocab(), True,
                                  64, ["neg", "pos"], pairs=False)
  assert "host" not in fp32


def test_a_damaged_host_entry_is_one_error_naming_the_manifest(tmp_path):
  model = classifier()
  export.export_classifier(model, str(tmp_path / "m"), vocab(), True, 64,
                           ["neg", "pos"], pairs=False, precision="int8",
                           length_buckets=(64,))
  extra = tmp_path / "m" / "assets.extra"
  table = (extra / host.TABLE_FILE).read_bytes()
  (extra / host.TABLE_FILE).write_bytes(table[:len(table) // 2])
  with pytest.raises(loader.ServingError,
                     match=r"serving.json: host: .*host_normalization.npz"):
    export.load_serving(str(tmp_path / "m"))
  (extra / host.TABLE_FILE).write_bytes(table)
  os.remove(extra / host.VOCAB_FILE)
  with pytest.raises(loader.ServingError,
                     match=r"serving.json: host: .*host_vocab.json"):
    export.load_serving(str(tmp_path / "m"))


def test_an_export_from_before_the_normalisation_table_serves_by_its_graphs(
    tmp_path):
  model = classifier()
  export.export_classifier(model, str(tmp_path / "m"), vocab(), True, 64,
                           ["neg", "pos"], pairs=False, precision="int8",
                           length_buckets=(64,))
  manifest_path = tmp_path / "m" / loader.MANIFEST
  manifest = json.loads(manifest_path.read_text())
  want = export.load_serving(str(tmp_path / "m"))(text=["a fine film"])
  # The host entry as the exports of earlier versions wrote it.
  manifest["host"] = dict(kind="classifier", vocab=host.VOCAB_FILE,
                          lower_case=True, seq_length=64, buckets=[64],
                          string_inputs=["text"], labels=["neg", "pos"])
  manifest_path.write_text(json.dumps(manifest))
  served = export.load_serving(str(tmp_path / "m"))
  assert served._host is None        # pylint: disable=protected-access
  got = served(text=["a fine film"])
  np.testing.assert_allclose(got["probabilities"].numpy(),
                             want["probabilities"].numpy(), atol=1e-6)


@pytest.mark.heavy
def test_an_embedders_small_batches_run_in_python_with_its_prompt(tmp_path,
                                                                  monkeypatch):
  model = tiny_embedder(pooling=("mean",))
  model.preprocessor.prompts = {"query": "query: "}
  model.preprocessor.default_prompt_name = "query"
  texts = sst2_texts(24)
  manifest = model.export(str(tmp_path / "int8"), precision="int8",
                          gate=gate.retrieval_gate(texts, texts, range(24),
                                                   "self", max_drop=100))
  assert manifest["host"]["kind"] == "embedder"
  assert manifest["host"]["prompt"] == "query: "
  serve, graph, calls = served_both_ways(str(tmp_path / "int8"), monkeypatch)
  for size in (1, 3, host.MAX_ROWS):
    batch = texts[:size]
    got = serve(text=batch)["embeddings"].numpy()
    want = graph(text=batch)["embeddings"].numpy()
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-6)
  # The prompt went before each text, as the graph puts it.
  assert calls[0] == {"text": ["query: " + texts[0]]}
  # encode() of a long list runs the graphs (batches of 32).
  calls.clear()
  np.testing.assert_allclose(serve.encode(texts * 2), graph.encode(texts * 2),
                             atol=1e-6)
  assert not calls


@pytest.mark.heavy
def test_a_span_labelers_small_batches_run_in_python_and_answer_as_the_graphs(
    tmp_path, monkeypatch):
  tf_keras.utils.set_random_seed(0)
  model = BertSpanLabeler(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=64)))
  # Short windows: most contexts take several.
  squad = SquadConfig(seq_length=64, max_query_length=16, max_answer_length=5,
                      doc_stride=16)
  manifest = export.export_span_labeler(
      model, str(tmp_path / "int8"), vocab(), True, squad, precision="int8",
      length_buckets=(32, 64))
  assert manifest["host"]["kind"] == "span_labeler"
  serve, graph, calls = served_both_ways(str(tmp_path / "int8"), monkeypatch)
  examples = squad_json.read_squad(shared_data("squad", "dev-v1.1.json"))
  # Non-ASCII contexts (the first article's) and ASCII ones.
  examples = examples[:12] + [e for e in examples[:1500]
                              if (e.question + e.context).isascii()][:12]
  assert sum((e.question + e.context).isascii() for e in examples) == 12
  examples.append(squad_json.SquadExample("x", "Who?", "", []))  # no context
  answered = 0
  for size in (1, 3, host.MAX_ROWS):
    for start in range(0, len(examples), size):
      batch = examples[start:start + size]
      strings = dict(question=[e.question for e in batch],
                     context=[e.context for e in batch])
      got, want = serve(**strings), graph(**strings)
      assert set(got) == set(want) == {"answer", "score", "start", "end"}
      for k in got:
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_array_equal(got[k].numpy(), want[k].numpy(),
                                      err_msg=f"{k} of {strings['question']}")
      answered += int((got["answer"].numpy() != b"").sum())
  assert len(calls) == 25 + 9 + 4 and answered > 40
