"""Property tests of the tokenizer and packer on arbitrary Unicode.

Surrogates (sent as the invalid UTF-8 they encode to), combining marks,
zero-width and control characters, CJK and very long inputs: no crash, ids
always inside the vocab, offsets inside the input, packed shapes exact.
A few hundred examples in the default suite; the slow test runs 10,000.
"""


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bert.data.tokenization import Tokenizer
from conftest import vocab

SEQ = 32
_TOKENIZER = None
TRIED = {"n": 0}

# Mostly ordinary text, with the troublesome kinds mixed in.
SPECIAL = st.sampled_from(["\u0301", "\u200b", "\u200d", "\ufeff", "\x00", "\x7f",
                           "\u3000", "\ud800", "\udfff", "\U0001f600", "中", "ß",
                           "\u202e", "\t", "\n", "\r"])
CHARS = st.one_of(st.characters(), SPECIAL)
PIECES = st.lists(st.one_of(st.text(CHARS, max_size=8),
                            st.sampled_from(["##", "[CLS]", "[MASK]", " un##aff "])),
                  max_size=8).map("".join)
TEXT = st.one_of(st.text(CHARS, max_size=60), PIECES,
                 st.text(CHARS, min_size=500, max_size=3000))


def tokenizer():
  global _TOKENIZER
  if _TOKENIZER is None:
    _TOKENIZER = Tokenizer(vocab(), batch_size=64)
  return _TOKENIZER


def as_bytes(text):
  return text.encode("utf-8", "surrogatepass")   # surrogates -> invalid UTF-8


def check(a, b):
  TRIED["n"] += 1
  tok = tokenizer()
  size = tok.get_special_tokens_dict()["vocab_size"]
  texts = [as_bytes(a), as_bytes(b)]
  for raw, (ids, starts, ends) in zip(texts, tok.tokenize_with_offsets(texts)):
    assert ((ids >= 0) & (ids < size)).all()
    assert ((0 <= starts) & (starts <= ends) & (ends <= len(raw))).all()
  for second in (None, [texts[1]]):
    out = tok.encode([texts[0]], second, SEQ)
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
      assert out[name].shape == (1, SEQ) and out[name].dtype == np.int32
    mask = out["input_mask"][0]
    n = int(mask.sum())
    assert (mask[:n] == 1).all() and (mask[n:] == 0).all() and n >= 2
    assert out["input_word_ids"][0, 0] == 101 and out["input_word_ids"][0, n - 1] == 102
    assert ((out["input_word_ids"] >= 0) & (out["input_word_ids"] < size)).all()
    assert set(np.unique(out["input_type_ids"])) <= ({0} if second is None else {0, 1})


@pytest.mark.heavy
@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(TEXT, TEXT)
def test_fuzz_tokenizer_and_packer(a, b):
  check(a, b)


@pytest.mark.slow
def test_fuzz_10000_examples():
  TRIED["n"] = 0

  @settings(max_examples=10_000, deadline=None, derandomize=True,
            suppress_health_check=list(HealthCheck))
  @given(TEXT, TEXT)
  def many(a, b):
    check(a, b)

  many()
  print(f"fuzz: {TRIED['n']} examples tried, 0 failures")
  assert TRIED["n"] >= 10_000
