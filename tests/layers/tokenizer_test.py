"""BertTokenizer / BertPackInputs / preprocessor against the reference."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tokenizers import BertWordPieceTokenizer

from bert.data import Tokenizer
from bert.layers import BertPackInputs, BertTokenizer
from bert.layers import _text_normalization as norm
from bert.layers.bert_pack_inputs import PackTemplate, truncation_lengths
from bert.networks import make_preprocessing_model
from bert.testing import shared_texts
from conftest import minilm_dir, shared_data, vocab
import harness


@pytest.fixture(scope="module")
def vocab_file():
  return vocab()


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
  return Tokenizer(vocab_file, lower_case=True)


@pytest.fixture(scope="module")
def texts():
  return shared_texts()


@pytest.mark.parametrize("lower_case", [True, False])
def test_identical_ids_to_reference_on_all_shared_data(vocab_file, texts, lower_case):
  reference = BertWordPieceTokenizer(vocab_file, lowercase=lower_case)
  expected = [e.ids[1:-1] for e in reference.encode_batch(texts)]  # drop CLS/SEP
  assert len(texts) > 100_000
  for fast_path in (True, False):
    layer = BertTokenizer(vocab_file, lower_case=lower_case, fast_path=fast_path)
    fn = tf.function(layer.tokenize)
    got = []
    for i in range(0, len(texts), 4096):
      r = fn(tf.constant(texts[i:i + 4096]))
      got += [row.tolist() for row in np.split(r.flat_values.numpy(),
                                               r.row_splits.numpy()[1:-1])]
    mismatches = [i for i in range(len(texts)) if got[i] != expected[i]]
    # Target 100%: no known differences remain. (Hand-checked expectations
    # below were produced by the reference, BertWordPieceTokenizer.)
    assert mismatches == [], (fast_path, [texts[i][:80] for i in mismatches[:5]])


def pieces(tokenizer, text):
  return tokenizer.convert_ids_to_tokens(tokenizer.tokenize([text])[0])


@pytest.mark.parametrize("text,expected", [
    # lowercase + accents stripped (NFD, drop Mn)
    ("Héllo Wörld", ["hello", "world"]),
    ("CAFÉ", ["cafe"]),
    # "ß" stays "ß" (FastBertTokenizer's case folding would give "ss")
    ("Straße", ["st", "##raße"]),
    # CJK ideographs: one token each, even without spaces
    ("中文abc", ["中", "文", "abc"]),
    # control characters removed, tab/newline are spaces, NUL and U+FFFD gone
    ("a\x00b\x07c\td\ne\ufffdf", ["abc", "d", "e", "##f"]),
    # ASCII punctuation (incl. $ and `) and Unicode P* split off
    ("hi!(yes)$5`x", ["hi", "!", "(", "yes", ")", "$", "5", "`", "x"]),
    ("«non»—ok", ["«", "non", "»", "—", "ok"]),
    # symbols that are not punctuation stay inside words
    ("a©b", ["a", "##©", "##b"]),
    # greedy longest-match-first with ##
    ("unaffable", ["una", "##ffa", "##ble"]),
    # empty and whitespace-only
    ("", []),
    (" \t\n\u3000 ", []),
    # zero-width and format characters vanish
    ("a\u200bb\ufeffc", ["abc"]),
])
def test_rules_uncased(tokenizer, text, expected):
  assert pieces(tokenizer, text) == expected


def test_long_words(tokenizer):
  assert pieces(tokenizer, "a" * 101) == ["[UNK]"]
  assert pieces(tokenizer, "b" * 100)[0] == "bb"     # 100 chars still split
  # 60 two-byte characters: 120 bytes but 60 characters, so not [UNK]
  assert pieces(tokenizer, "é" * 60) != ["[UNK]"]
  assert pieces(tokenizer, "x " + "é" * 101 + " y") == ["x", "[UNK]", "y"]


def test_cased_keeps_case_and_accents(vocab_file):
  cased = Tokenizer(vocab_file, lower_case=False)
  # The uncased vocab lacks "Hello", so case shows as different pieces.
  assert cased.tokenize(["Hello"])[0].tolist() != \
      Tokenizer(vocab_file).tokenize(["Hello"])[0].tolist()
  # Accents kept: the uncased vocab has no "é", so it is unknown.
  assert pieces(cased, "é") == ["[UNK]"]
  assert pieces(cased, "Hello") == ["[UNK]"]


def test_invalid_utf8_is_dropped_not_fatal(tokenizer):
  ids = tokenizer.layer.tokenize(tf.constant([b"ab\xff\xfecd", b"\xc3", b"ok"]))
  got = [tokenizer.convert_ids_to_tokens(r) for r in ids.to_list()]
  assert got == [pieces(tokenizer, "abcd"), [], ["ok"]]


def test_special_tokens(tokenizer):
  special = tokenizer.get_special_tokens_dict()
  assert special == dict(padding_id=0, start_of_sequence_id=101,
                         end_of_segment_id=102, unknown_id=100, mask_id=103,
                         vocab_size=30522)


def test_offsets_slice_back_on_all_squad_contexts(tokenizer):
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    contexts = [p["context"] for a in json.load(f)["data"] for p in a["paragraphs"]]
  checked = 0
  for text, (ids, starts, ends) in zip(contexts,
                                       tokenizer.tokenize_with_offsets(contexts)):
    raw = text.encode("utf-8")
    for token, s, e in zip(tokenizer.convert_ids_to_tokens(ids), starts, ends):
      covered = raw[s:e].decode("utf-8")
      if token == "[UNK]":
        assert covered.strip() == covered and covered
        continue
      piece = token[2:] if token.startswith("##") else token
      assert norm.normalize_text(covered, True).strip() == piece, (token, covered)
      checked += 1
  assert checked > 300_000


def test_offsets_fast_and_exact_paths_agree(vocab_file):
  # Characters the normalisation removes (a combining mark when uncased, a
  # byte order mark, a zero-width space) end the piece before them.
  texts = ["Héllo, Straße! ½ …", "中文 ok", "plain ascii text", "",
           "cafe\u0301 au lait", "word\ufeff", "a\u200b b\u200b", "\ufeffx"]
  fast = BertTokenizer(vocab_file, tokenize_with_offsets=True)(tf.constant(texts))
  exact = BertTokenizer(vocab_file, tokenize_with_offsets=True,
                        fast_path=False)(tf.constant(texts))
  for a, b in zip(fast, exact):
    assert a.to_list() == b.to_list()


# ---------------------------------------------------------------- packing
def reference_truncate(a, b, budget):
  """google-research truncate_seq_pair."""
  a, b = list(a), list(b)
  while len(a) + len(b) > budget:
    (a if len(a) > len(b) else b).pop()
  return a, b


@pytest.mark.parametrize("la,lb,budget,expected", [
    (5, 3, 5, (3, 2)),     # trim a to 3 (ties then trim b)
    (5, 5, 7, (4, 3)),     # ties trim the second segment
    (10, 2, 7, (5, 2)),    # only the longer shrinks
    (2, 10, 7, (2, 5)),
    (3, 3, 10, (3, 3)),    # fits: untouched
    (4, 0, 2, (2, 0)),
])
def test_truncation_matches_reference(la, lb, budget, expected):
  got = truncation_lengths(tf.constant([[la, lb]]), budget).numpy()[0]
  assert tuple(got) == expected
  a, b = reference_truncate(range(la), range(lb), budget)
  assert (len(a), len(b)) == expected


def test_truncation_random_pairs_match_reference():
  rng = np.random.RandomState(0)
  cases = rng.randint(0, 60, size=(2000, 3))
  for (la, lb, budget) in cases:
    got = truncation_lengths(tf.constant([[la, lb]]), budget).numpy()[0]
    a, b = reference_truncate(range(la), range(lb), budget)
    assert tuple(got) == (len(a), len(b))


def test_pack_pair_by_hand():
  pack = BertPackInputs(10, dict(start_of_sequence_id=101, end_of_segment_id=102,
                                 padding_id=0))
  a = tf.ragged.constant([[1, 2, 3, 4, 5, 6], [7]], tf.int32)
  b = tf.ragged.constant([[11, 12, 13, 14], [21, 22]], tf.int32)
  out = {k: v.numpy().tolist() for k, v in pack([a, b]).items()}
  # budget 7: a 6->4 (trim a while longer), then a 4, b 4 -> tie trims b to 3
  assert out["input_word_ids"] == [[101, 1, 2, 3, 4, 102, 11, 12, 13, 102],
                                   [101, 7, 102, 21, 22, 102, 0, 0, 0, 0]]
  assert out["input_mask"] == [[1] * 10, [1] * 6 + [0] * 4]
  assert out["input_type_ids"] == [[0] * 6 + [1] * 4, [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]]
  single = pack([a])["input_word_ids"].numpy().tolist()
  assert single[0] == [101, 1, 2, 3, 4, 5, 6, 102, 0, 0]


def test_pack_three_segments_and_word_dims():
  pack = BertPackInputs(9, dict(start_of_sequence_id=1, end_of_segment_id=2))
  seg = tf.ragged.constant([[[5, 6], [7]]], tf.int32)   # [batch, words, pieces]
  out = pack([seg, seg, seg])
  # budget 9 - 4 = 5 for lengths 3, 3, 3: cap 1 each, the 2 spare tokens go
  # to the earliest segments (ties trim later segments first) -> 2, 2, 1.
  assert out["input_word_ids"].numpy().tolist() == [[1, 5, 6, 2, 5, 6, 2, 5, 2]]
  assert out["input_type_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1, 1, 2, 2]]


def _reference_pack(rows, seq_length, template):
  """google-research's truncation (a token off the end of the longest
  segment, the last of the longest on ties, until the row fits), then the
  template's Python packing."""
  rows = [list(r) for r in rows]
  budget = seq_length - template.special_count(len(rows))
  while sum(map(len, rows)) > budget:
    longest = max(map(len, rows))
    rows[max(i for i, r in enumerate(rows) if len(r) == longest)].pop()
  return template.pack(rows, seq_length)


@pytest.mark.parametrize("separators,type_ids", [(1, True), (2, False)],
                         ids=["bert", "roberta"])
def test_pack_equals_a_python_packer_on_random_batches(separators, type_ids):
  """Random batches of 1-3 segments (some [batch, (words), (pieces)], rows
  empty or over budget, batches of none) pack as `_reference_pack`."""
  rng = np.random.default_rng(separators)
  template = PackTemplate(101, 102, 7, separators, type_ids)
  for _ in range(40):
    n, batch = int(rng.integers(1, 4)), int(rng.integers(0, 5))
    seq_length = int(rng.integers(template.special_count(n), 24))
    pack = BertPackInputs(seq_length, dict(start_of_sequence_id=101,
                                           end_of_segment_id=102, padding_id=7),
                          separators_between_segments=separators,
                          segment_type_ids=type_ids)
    pieces = [[[rng.integers(1000, size=int(rng.integers(1, 4))).tolist()
                for _ in range(int(rng.integers(0, 7)))] for _ in range(batch)]
              for _ in range(n)]
    segments = [
        tf.RaggedTensor.from_nested_row_lengths(
            tf.constant([t for r in p for w in r for t in w], tf.int32),
            [[len(r) for r in p], [len(w) for r in p for w in r]])
        if i % 2 else tf.ragged.constant(
            [[t for w in r for t in w] for r in p], tf.int32, ragged_rank=1)
        if batch else tf.RaggedTensor.from_row_lengths(
            tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
        for i, p in enumerate(pieces)]
    out = pack(segments)
    expected = [_reference_pack([[t for w in p[b] for t in w] for p in pieces],
                                seq_length, template) for b in range(batch)]
    for k, key in enumerate(("input_word_ids", "input_mask", "input_type_ids")):
      assert out[key].dtype == tf.int32
      assert out[key].shape == (batch, seq_length)
      assert out[key].numpy().tolist() == [e[k] for e in expected], key


def test_pack_traces_a_small_graph():
  # The packer is traced into every preprocessing graph and export; written
  # by position it is ~300 ops for a pair, where ragged concatenation and
  # masking made it 1,650 (traced again by each new tokenizer).
  pack = BertPackInputs(128, dict(start_of_sequence_id=101, end_of_segment_id=102))
  spec = tf.RaggedTensorSpec([None, None], tf.int32)
  graph = tf.function(lambda a, b: pack([a, b])).get_concrete_function(
      spec, spec).graph
  assert 100 < len(graph.get_operations()) < 500, len(graph.get_operations())


# The harness (tests/harness.py) runs the config round trip only: these
# layers have no weights (no training step) and integer outputs (no mixed
# precision), and both are saved inside the preprocessor SavedModel loaded by
# test_preprocessor_savedmodel_in_fresh_process (a stronger SavedModel check
# than the harness's, and each save of them costs seconds).
def test_harness_tokenizer(vocab_file):
  out = harness.run_layer_test(
      BertTokenizer,
      dict(vocab_file=vocab_file, lower_case=False, tokenize_with_offsets=True,
           fast_path=True),
      tf.constant(["Hello Straße", "½ … 中文 un##aff"]), checks=("config",))
  assert len(out) == 3                               # ids, starts, ends


def test_harness_pack_inputs():
  # Ragged [batch, (tokens)] and [batch, (words), (pieces)] segments.
  segments = [tf.ragged.constant([[5, 6, 7], [8]], tf.int32),
              tf.ragged.constant([[[5, 6], [7]], [[9]]], tf.int32)]
  # Built from a special-tokens dict, as make_preprocessing_model builds it; the
  # config holds the ids it names instead (padding_id=3 shows they survive).
  out = harness.run_layer_test(
      BertPackInputs,
      dict(seq_length=6, special_tokens_dict=dict(
          start_of_sequence_id=1, end_of_segment_id=2, padding_id=3)),
      segments, checks=("config",), config_exclude=("special_tokens_dict",))
  assert out["input_word_ids"].numpy().tolist() == [[1, 5, 6, 2, 5, 2],
                                                    [1, 8, 2, 9, 2, 3]]


def test_vocab_errors_name_the_file(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\nhello\n[UNK]\n[SEP]\n")
  with pytest.raises(ValueError, match=r"vocab.txt:5: token '\[UNK\]' repeats line 2"):
    BertTokenizer(str(path))
  path.write_text("[PAD]\n[UNK]\nhello\n")
  with pytest.raises(ValueError, match="vocab.txt has no \\[CLS\\]"):
    BertTokenizer(str(path))
  with pytest.raises(FileNotFoundError, match="nope.txt"):
    BertTokenizer(str(tmp_path / "nope.txt"))
  # A blank line would give "" the id of the token meant there.
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n\nto\n")
  with pytest.raises(ValueError, match=r"vocab.txt:5: blank line"):
    BertTokenizer(str(path))
  with pytest.raises(ValueError, match=r"vocabulary:2: blank line"):
    BertTokenizer(vocabulary=["[PAD]", "", "[UNK]", "[CLS]", "[SEP]"])


def test_preprocessor_savedmodel_in_fresh_process(vocab_file, tmp_path):
  """The preprocessor network (and so the tokenizer and packer in it) as a
  SavedModel served by plain TensorFlow in a fresh process; and its config
  round trip (harness), sharing the costly build."""
  model = make_preprocessing_model(vocab_file, seq_length=24, num_text_inputs=2)
  a = ["The cat sat on the mat.", "Straße ½ … 中文", ""]
  b = ["It was happy.", "Zweite", "only b"]
  expected = model([tf.constant(a), tf.constant(b)])
  harness.check_config_round_trip(model, [tf.constant(a), tf.constant(b)])
  path = str(tmp_path / "preprocessor")
  tf.saved_model.save(model, path)
  script = textwrap.dedent(f"""
      import json, sys
      import tensorflow as tf
      import tensorflow_text  # registers the ops
      assert "bert" not in sys.modules
      m = tf.saved_model.load({path!r})
      a = tf.constant({a!r}); b = tf.constant({b!r})
      out = m([a, b])
      tok = m.tokenize(a)
      packed = m.bert_pack_inputs([tok, m.tokenize(b)], tf.constant(24))
      short = m.bert_pack_inputs([tok], tf.constant(8))
      print(json.dumps(dict(
          out={{k: v.numpy().tolist() for k, v in out.items()}},
          packed={{k: v.numpy().tolist() for k, v in packed.items()}},
          short=short["input_word_ids"].numpy().tolist())))
      """)
  result = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  got = json.loads(result.stdout.strip().splitlines()[-1])
  for key, value in expected.items():
    assert got["out"][key] == value.numpy().tolist()
    assert got["packed"][key] == value.numpy().tolist()
  assert [len(r) for r in got["short"]] == [8, 8, 8]


@pytest.mark.slow
def test_fast_path_data_is_current():
  """The stored FastBertTokenizer-unsafe codepoints are what tensorflow_text
  computes today (regenerate with python -m bert.layers._text_normalization)."""
  from bert.layers import _fast_path_data
  assert tuple(norm.fast_path_unsafe_codepoints(True)) == _fast_path_data.UNSAFE_UNCASED
  assert tuple(norm.fast_path_unsafe_codepoints(False)) == _fast_path_data.UNSAFE_CASED


def test_casing_comes_from_the_checkpoint(tmp_path):
  from bert import checkpoints
  ckpt = checkpoints.load(minilm_dir())
  assert BertTokenizer.from_checkpoint(ckpt).lower_case is True
  assert BertTokenizer.from_checkpoint(ckpt, lower_case=False).lower_case is False
  ckpt.lower_case = None
  with pytest.raises(ValueError, match="pass lower_case"):
    BertTokenizer.from_checkpoint(ckpt)


def test_codepoint_table_disk_cache(tmp_path, monkeypatch):
  from bert.layers import _text_normalization as tn  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("BERT_CACHE_DIR", str(tmp_path))
  tn.codepoint_table.cache_clear()
  try:
    first = tn.codepoint_table(True)                 # computed, then written
    path = tn._table_cache_file(True)
    assert os.path.exists(path)
    np.testing.assert_array_equal(first, tn._compute_codepoint_table(True))
    tn.codepoint_table.cache_clear()
    np.testing.assert_array_equal(tn.codepoint_table(True), first)   # read back
    with open(path, "wb") as f:                      # a corrupt cache is ignored
      f.write(b"not an npy file")
    tn.codepoint_table.cache_clear()
    np.testing.assert_array_equal(tn.codepoint_table(True), first)
  finally:
    tn.codepoint_table.cache_clear()


def test_offline_tokenizer_names_a_text_it_cannot_take(vocab_file):
  """Issue 42: a lone surrogate or a non-string among the texts was TF's
  "Error converting unicode string" / "mixed types", naming no item."""
  from bert.data.errors import DataError  # pylint: disable=g-import-not-at-top
  tok = Tokenizer(vocab_file=vocab_file, batch_size=2)
  for call, name in ((lambda t: tok.tokenize(t), "texts"),
                     (lambda t: tok.encode(t, seq_length=16), "texts_a"),
                     (lambda t: tok.encode(["x"] * 3, t, seq_length=16),
                      "texts_b")):
    with pytest.raises(DataError, match=rf"^{name}\[2\] is not valid Unicode "
                       r"\(lone surrogate U\+D800 at character 1\)$"):
      call(["fine", "also fine", "a\ud800b"])
    with pytest.raises(DataError, match=rf"^{name}\[1\] is NoneType, not a "
                       "string$"):
      call(["fine", None, "x"])
  # Positive control: str and bytes both tokenize.
  assert len(tok.tokenize(["fine", b"bytes too", "x"])) == 3
