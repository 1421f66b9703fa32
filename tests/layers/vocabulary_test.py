"""`Vocabulary`: every family's vocabulary files and Hugging Face's
tokenizer.json give the same vocabulary, whose tokenizer (in-graph layer and
offline `bert.data.Tokenizer` alike) gives transformers' ids and pairs on
real text; it survives a config and a file round trip; bad files are one
line naming them."""

import json
import os

import numpy as np
import pytest
import transformers

from bert import checkpoints
from bert.checkpoints.errors import CheckpointMismatchError
from bert.config import BertConfig
from bert.data.tokenization import Tokenizer
from bert.errors import DataError
from bert.layers.vocabulary import Vocabulary
from conftest import one_line, shared_data
from family import hf_tokenizer, tokenizer_folder

KINDS = dict(bert="wordpiece", roberta="byte_pair", albert="sentencepiece")


def wiki_lines(n=600):
  with open(shared_data("corpus", "wikitext-2", "wiki.test.tokens"),
            encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f][:n]


def mrpc_pairs(n=200):
  with open(shared_data("glue", "MRPC", "dev.tsv"), encoding="utf-8-sig") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:n + 1]
  return [r[3] for r in rows], [r[4] for r in rows]


@pytest.fixture(scope="module", params=list(KINDS))
def family(request, family_root, tmp_path_factory):
  """(family, vocabulary from its files, from a tokenizer.json that
  transformers saved, transformers' tokenizer)."""
  name = request.param
  reference = hf_tokenizer(name, family_root)
  saved = str(tmp_path_factory.mktemp(f"{name}_saved"))
  reference.save_pretrained(saved)
  assert sorted(os.listdir(saved)) == ["tokenizer.json",
                                       "tokenizer_config.json"]
  files = Vocabulary.from_file(tokenizer_folder(name, family_root))
  from_json = Vocabulary.from_file(os.path.join(saved, "tokenizer.json"))
  return name, files, from_json, reference


def test_files_and_tokenizer_json_give_the_same_vocabulary(family):
  name, files, from_json, reference = family
  assert files.kind == from_json.kind == KINDS[name]
  assert list(files) == list(from_json)
  want = sorted(reference.get_vocab(), key=reference.get_vocab().get)
  assert list(files) == want[:len(files)]
  if name != "albert":   # a proto re-made from JSON has other metadata
    assert files == from_json
    assert files.fingerprint() == from_json.fingerprint()


def test_ids_and_pairs_equal_transformers_in_graph_and_offline(family):
  name, files, from_json, reference = family
  texts = wiki_lines()
  want = reference(texts, add_special_tokens=False)["input_ids"]
  for vocabulary in (files, from_json):
    layer = vocabulary.tokenizer()
    assert layer(texts).to_list() == want            # in-graph
    offline = Tokenizer(vocabulary=vocabulary)
    assert [list(r) for r in offline.tokenize(texts)] == want
  # Pairs: the family's template and type ids, truncated as google-research
  # `truncate_seq_pair` (the longer segment loses a token, the second on
  # ties), applied here to transformers' ids.
  a, b = mrpc_pairs()
  got = Tokenizer(vocabulary=from_json).encode(a, b, seq_length=40)
  ids_a = reference(a, add_special_tokens=False)["input_ids"]
  ids_b = reference(b, add_special_tokens=False)["input_ids"]
  special = [reference.cls_token_id, reference.sep_token_id,
             reference.pad_token_id]
  want = np.array([packed(x, y, *special, roberta=name == "roberta")
                   for x, y in zip(ids_a, ids_b)])
  np.testing.assert_array_equal(got["input_word_ids"], want[:, 0])
  np.testing.assert_array_equal(got["input_mask"], want[:, 1])
  np.testing.assert_array_equal(got["input_type_ids"], want[:, 2])
  if name == "roberta":
    # With an even budget transformers' own truncation is the same.
    ref = reference(a, b, truncation="longest_first", max_length=40,
                    padding="max_length")
    np.testing.assert_array_equal(got["input_word_ids"], ref["input_ids"])


def packed(a, b, cls, sep, pad, roberta, seq_length=40):
  """[ids, mask, types] of a pair as the family packs it."""
  a, b = list(a), list(b)
  budget = seq_length - (4 if roberta else 3)
  while len(a) + len(b) > budget:
    (a if len(a) > len(b) else b).pop()
  middle = [sep, sep] if roberta else [sep]
  ids = [cls] + a + middle + b + [sep]
  types = [0] * (len(a) + 1 + len(middle)) + [0 if roberta else 1] * (len(b) + 1)
  n = len(ids)
  return [ids + [pad] * (seq_length - n), [1] * n + [0] * (seq_length - n),
          types + [0] * (seq_length - n)]


def test_config_and_file_round_trips(family, tmp_path):
  name, files, _, reference = family
  config = json.loads(json.dumps(files.get_config()))
  assert Vocabulary.of(config) == files
  if name == "bert":
    assert config == list(files)        # as preprocessors always saved it
  path = files.write(str(tmp_path))
  assert Vocabulary.from_file(path) == files
  # transformers reads the files we write and gives the same ids.
  cls = type(reference)
  again = cls.from_pretrained(str(tmp_path))
  texts = wiki_lines(50)
  assert (again(texts, add_special_tokens=False)["input_ids"]
          == reference(texts, add_special_tokens=False)["input_ids"])


def test_offsets_equal_transformers(family_root):
  """RoBERTa's offsets, trimmed of the folded space as transformers' are,
  in characters of the text."""
  reference = hf_tokenizer("roberta", family_root)
  layer = Vocabulary.from_file(tokenizer_folder("roberta", family_root)
                               ).tokenizer()
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    texts = [p["context"] for a in json.load(f)["data"]
             for p in a["paragraphs"]][::8]
  texts += ["Hello  world, it's 1,000.", "  lead", "a   b  ", " <mask>  x",
            "tab\there", "café 😀 naïve"]
  _, starts, ends = layer.tokenize(texts, with_offsets=True)
  want = reference(texts, add_special_tokens=False,
                   return_offsets_mapping=True)["offset_mapping"]
  for text, b, e, w in zip(texts, starts.to_list(), ends.to_list(), want):
    # Byte offsets -> the characters they fall in.
    char = [i for i, c in enumerate(text) for _ in c.encode("utf-8")]
    char.append(len(text))
    ours = [(char[x], char[y - 1] + 1 if y > x else char[y])
            for x, y in zip(b, e)]
    assert ours == [tuple(o) for o in w], text[:60]


def test_bad_vocabularies_are_one_line_errors(family_root, tmp_path):
  roberta = tokenizer_folder("roberta", family_root)
  # A RoBERTa vocabulary for a WordPiece (BERT) model.
  config = BertConfig(vocab_size=3000, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=4, intermediate_size=37)
  with pytest.raises(CheckpointMismatchError) as e:
    checkpoints.check_vocab_size(os.path.join(roberta, "vocab.json"), config)
  assert "is a byte_pair vocabulary" in one_line(e, "vocab.json",
                                                 "family=bert")
  # A SentencePiece file that does not load.
  bad = tmp_path / "spiece.model"
  bad.write_bytes(b"\x00\x01 not a model")
  with pytest.raises(DataError) as e:
    Vocabulary.from_file(str(bad))
  one_line(e, str(bad), "not a SentencePiece model")
  # vocab.json without its merges.txt.
  lone = tmp_path / "lone"
  lone.mkdir()
  (lone / "vocab.json").write_text(
      open(os.path.join(roberta, "vocab.json"), encoding="utf-8").read(),
      encoding="utf-8")
  with pytest.raises(DataError) as e:
    Vocabulary.from_file(str(lone / "vocab.json"))
  one_line(e, "vocab.json", "merges.txt")
  # Casing asked of a byte-level BPE.
  with pytest.raises(DataError) as e:
    Vocabulary.from_file(roberta).tokenizer(lower_case=True)
  one_line(e, "vocab.json", "no lower-casing")
  # A tokenizer.json of another model.
  other = tmp_path / "tokenizer.json"
  other.write_text(json.dumps({"model": {"type": "WordLevel", "vocab": {}}}),
                   encoding="utf-8")
  with pytest.raises(DataError) as e:
    Vocabulary.from_file(str(other))
  one_line(e, "tokenizer.json", "WordLevel")
  # A folder without any.
  with pytest.raises(DataError) as e:
    Vocabulary.from_file(str(tmp_path / "lone" / ".."))
  # (tmp_path holds spiece.model: found, and not a model.)
  one_line(e, "spiece.model")
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(DataError) as e:
    Vocabulary.from_file(str(empty))
  one_line(e, str(empty), "no vocabulary")
