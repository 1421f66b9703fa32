"""The host tokenizer (`bert.serving.host_tokenizer`) gives the graph
tokenizer's ids and byte offsets on any text: generated Unicode and every
SQuAD dev context, cased and uncased, against both of the graph's paths."""

import json

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest
import tensorflow as tf

from bert.layers.bert_tokenizer import BertTokenizer, read_vocab
from bert.serving.host_tokenizer import HostWordPiece
from conftest import shared_data, vocab

# Runs of characters of every category but surrogates, and pieces that
# BERT's rules treat specially.
TEXT = st.lists(st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
    st.text("abcXYZ019 ,.'-\t\n", max_size=10),
    st.sampled_from(["cafe\u0301", "Caf\u00e9", "\ufeff", "\u200b", "\x00",
                     "\u0085", "\u00a0\u2028\u3000", "\u0130stanbul",
                     "\u039f\u0394\u039f\u03a3", "\ufb01", "\u00bd", "\u00df",
                     "\u65e5\u672c\u8a9e", "\U0001f600", "\U000e0041",
                     "a" * 100, "b" * 101, "\u00e9" * 101, "[MASK]",
                     "unaffable", "don't"])), max_size=24).map("".join)


@pytest.fixture(scope="module")
def tokenizers():
  """(graph fast path, graph exact path, host), uncased and cased."""
  tokens = read_vocab(vocab())
  out = {}
  for lower_case in (True, False):
    layers = [BertTokenizer(vocab(), lower_case=lower_case, fast_path=fast)
              for fast in (True, False)]
    graphs = [tf.function(lambda t, l=l: l.tokenize(t, with_offsets=True),
                          input_signature=[tf.TensorSpec([None], tf.string)])
              for l in layers]
    out[lower_case] = (graphs, HostWordPiece(tokens, layers[0].codepoint_table))
  return out


def graph_pieces(graph, texts):
  ids, starts, ends = graph(tf.constant(texts))
  return [(i, s, e) for i, s, e in zip(ids.to_list(), starts.to_list(),
                                       ends.to_list())]


def check(tokenizers, texts):
  for lower_case, (graphs, hosted) in tokenizers.items():
    got = [tuple(np.asarray(x).tolist() for x in hosted.tokenize_with_offsets(t))
           for t in texts]
    assert [g[0] for g in got] == hosted.tokenize(texts)
    for path, graph in zip(("fast", "exact"), graphs):
      for text, mine, theirs in zip(texts, got, graph_pieces(graph, texts)):
        assert mine == theirs, (lower_case, path, text)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=6))
def test_ids_and_offsets_are_the_graphs_on_generated_text(tokenizers, texts):
  check(tokenizers, texts)


def test_ids_and_offsets_are_the_graphs_on_every_squad_context(tokenizers):
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    data = json.load(f)["data"]
  contexts = [p["context"] for a in data for p in a["paragraphs"]]
  questions = [q["question"] for a in data for p in a["paragraphs"]
               for q in p["qas"]][::10]
  assert len(contexts) > 2000
  assert sum(not c.isascii() for c in contexts) > 500
  check(tokenizers, contexts + questions)


def test_removed_characters_belong_to_the_piece_before_them(tokenizers):
  hosted = tokenizers[True][1]
  text = "Cafe\u0301\ufeff  x\u200b"
  ids, starts, ends = hosted.tokenize_with_offsets(text)
  raw = text.encode("utf-8")
  assert [raw[s:e].decode() for s, e in zip(starts, ends)] == [
      "Cafe\u0301\ufeff", "x\u200b"]
  assert ids == hosted.tokenize(["cafe x"])[0]
  # Negative control: the cased table keeps the capital and the accent.
  cased = tokenizers[False][1]
  assert cased.tokenize([text]) != hosted.tokenize([text])


def test_a_table_of_the_wrong_shape_is_refused():
  with pytest.raises(ValueError, match=r"normalisation table is int32 \[10, 3\]"):
    HostWordPiece(["[UNK]"], np.zeros((10, 3), np.int32))
