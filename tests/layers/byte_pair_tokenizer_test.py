"""`BytePairTokenizer` (RoBERTa's byte-level BPE, in-graph) against Hugging
Face's `RobertaTokenizerFast` on the same vocab.json and merges.txt: a BPE
trained with Hugging Face `tokenizers` on WikiText-2 (valid: the shared data
holds no train split), compared on every WikiText-2 test line, SQuAD dev
contexts and questions, WNUT-17 tokens and hand-made edge cases."""

import json

import numpy as np
import pytest
import tensorflow as tf
import transformers
from tokenizers import AddedToken, ByteLevelBPETokenizer

from bert.errors import DataError
from bert.layers.byte_pair_tokenizer import BytePairTokenizer, bytes_to_unicode
from conftest import one_line, shared_data

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
EDGES = ["Hello  world", "a  's", "x \n y", "  \nX", "tab\tsep", "end  ",
         "café naïve", "don't you'll we'RE", "1234 5,678.9",
         "\u3000wide\u00a0nbsp\u2009thin", "emoji 😀 here", "", " ", "\n\n",
         "a <s> b</s>", "Ünïcödé ÅÄÖ", "中文字符", "x\u200by", "\x00ctrl\x1f", "a\x00b\x00 c"]
MASKED = ["The <mask>.", "café <mask> naïve", "a  <mask>b", "<mask> x",
          "x\n<mask>", "x <mask><mask> y"]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
  folder = tmp_path_factory.mktemp("bpe")
  with open(shared_data("corpus", "wikitext-2", "wiki.valid.tokens"),
            encoding="utf-8") as f:
    lines = f.readlines()
  trainer = ByteLevelBPETokenizer()
  trainer.train_from_iterator(lines, vocab_size=3000, min_frequency=2,
                              special_tokens=SPECIALS, show_progress=False)
  trainer.save_model(str(folder))
  # <mask> takes the space on its left, as in roberta-base's tokenizer.
  reference = transformers.RobertaTokenizerFast.from_pretrained(
      str(folder), mask_token=AddedToken("<mask>", lstrip=True, rstrip=False,
                                         special=True))
  ours = BytePairTokenizer(str(folder / "vocab.json"),
                           str(folder / "merges.txt"))
  return folder, reference, ours


def differing(ours, reference, texts, batch=512):
  got = []
  for i in range(0, len(texts), batch):
    got += ours(texts[i:i + batch]).to_list()
  want = reference(texts, add_special_tokens=False)["input_ids"]
  return [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]


def test_ids_equal_roberta_tokenizer_fast_on_real_text(bpe):
  _, reference, ours = bpe
  with open(shared_data("corpus", "wikitext-2", "wiki.test.tokens"),
            encoding="utf-8") as f:
    wiki = [line.rstrip("\n") for line in f]
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    squad = json.load(f)["data"]
  contexts = [p["context"] for a in squad for p in a["paragraphs"]]
  questions = [q["question"] for a in squad for p in a["paragraphs"]
               for q in p["qas"]]
  with open(shared_data("ner", "wnut17", "emerging.dev.conll"),
            encoding="utf-8") as f:
    words = [line.split("\t")[0] for line in f if line.strip()]
  counts = {}
  for name, texts in (("wikitext-2 test lines", wiki),
                      ("squad contexts", contexts[::4]),
                      ("squad questions", questions[::10]),
                      ("wnut-17 dev tokens", words), ("edge cases", EDGES),
                      ("masked", MASKED)):
    bad = differing(ours, reference, texts)
    assert not bad, (name, bad[:3])
    counts[name] = len(texts)
  print("identical ids:", counts)
  assert counts["wikitext-2 test lines"] > 4000


def test_a_wrong_merge_order_changes_ids(bpe, tmp_path):
  """Negative control: the ranks matter. Reversing merges.txt changes the
  ids of real words, so the comparison above can fail."""
  folder, reference, _ = bpe
  lines = (folder / "merges.txt").read_text(encoding="utf-8").split("\n")
  header, merges = lines[0], [l for l in lines[1:] if l]
  (tmp_path / "merges.txt").write_text(
      "\n".join([header] + merges[::-1]) + "\n", encoding="utf-8")
  wrong = BytePairTokenizer(str(folder / "vocab.json"),
                            str(tmp_path / "merges.txt"))
  assert differing(wrong, reference, ["The quick brown fox jumped over the "
                                      "lazy dog in the summer of 1998."])


def test_offsets_cover_each_tokens_bytes(bpe):
  """Untrimmed, a token's span is every byte it stands for (trimmed spans,
  as transformers', are tests/layers/vocabulary_test.py's)."""
  _, _, ours = bpe
  tokenizer = BytePairTokenizer(ours.vocab_file, ours.merges_file,
                                tokenize_with_offsets=True, trim_offsets=False)
  texts = EDGES + MASKED
  ids, starts, ends = tokenizer(texts)
  inverse = {v: k for k, v in bytes_to_unicode().items()}
  vocab = {v: k for k, v in tokenizer._vocab.items()}  # pylint: disable=protected-access
  for text, row, b, e in zip(texts, ids.to_list(), starts.to_list(),
                             ends.to_list()):
    data = text.encode("utf-8")
    assert b == sorted(b) and all(x <= y for x, y in zip(b, e))
    for token_id, start, end in zip(row, b, e):
      token = vocab[token_id]
      if token in SPECIALS:
        assert data[start:end].strip() == token.encode(), (text, token)
      else:
        assert bytes(inverse[c] for c in token) == data[start:end], (text, token)


def test_runs_in_a_graph_and_a_saved_model(bpe, tmp_path):
  _, reference, ours = bpe

  class Module(tf.Module):

    def __init__(self):
      super().__init__()
      self.tokenizer = ours

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, texts):
      return self.tokenizer(texts).to_tensor(-1)

  tf.saved_model.save(Module(), str(tmp_path / "sm"))
  loaded = tf.saved_model.load(str(tmp_path / "sm"))
  texts = ["Hello  world", "The <mask>.", ""]
  out = loaded(tf.constant(texts)).numpy()
  for row, want in zip(out, reference(texts, add_special_tokens=False)[
      "input_ids"]):
    assert [i for i in row if i >= 0] == want


def test_bad_files_are_one_line_errors(tmp_path, bpe):
  folder = bpe[0]
  (tmp_path / "vocab.json").write_text('{"a": 0, "b": 0}', encoding="utf-8")
  with pytest.raises(DataError) as e:
    BytePairTokenizer(str(tmp_path / "vocab.json"), str(folder / "merges.txt"))
  one_line(e, "vocab.json", "0..1")
  (tmp_path / "merges.txt").write_text("#version: 0.2\na b\nc d e\n",
                                       encoding="utf-8")
  with pytest.raises(DataError) as e:
    BytePairTokenizer(str(folder / "vocab.json"), str(tmp_path / "merges.txt"))
  one_line(e, "merges.txt:3")
  (tmp_path / "small.json").write_text('{"a": 0}', encoding="utf-8")
  with pytest.raises(DataError) as e:
    BytePairTokenizer(str(tmp_path / "small.json"), str(folder / "merges.txt"))
  one_line(e, "small.json", "<s>")
  (tmp_path / "text.json").write_text("not json", encoding="utf-8")
  with pytest.raises(DataError) as e:
    BytePairTokenizer(str(tmp_path / "text.json"), str(folder / "merges.txt"))
  one_line(e, "text.json")


def test_the_byte_table_is_gpt2s():
  table = bytes_to_unicode()
  assert len(set(table.values())) == 256
  assert table[ord(" ")] == "\u0120" and table[ord("\n")] == "\u010a"
  assert table[ord("A")] == "A" and table[0xAD] == "\u0143"
  assert np.all([len(c) == 1 for c in table.values()])


@pytest.mark.parametrize("seq_length", [8, 16, 64])
def test_packed_pairs_equal_robertas_template_and_truncation(bpe, seq_length):
  """`<s> a </s></s> b </s>`, type ids 0, pad id 1, longest-first
  truncation: as RobertaTokenizerFast(a, b, truncation=True)."""
  from bert.layers.bert_pack_inputs import BertPackInputs  # pylint: disable=g-import-not-at-top
  _, reference, ours = bpe
  first = ["Where is the Eiffel tower?", "a", "The quick brown fox jumps.",
           "x " * 30]
  second = ["It stands in Paris, beside the Seine.", "b c d e f g h i j",
            "", "short"]
  special = ours.get_special_tokens_dict()
  assert (special["start_of_sequence_id"], special["end_of_segment_id"],
          special["padding_id"], special["mask_id"]) == (
              reference.bos_token_id, reference.sep_token_id,
              reference.pad_token_id, reference.mask_token_id)
  packer = BertPackInputs(seq_length, special, **ours.packer_options())
  got = packer([ours(first), ours(second)])
  want = reference(first, second, truncation=True, max_length=seq_length,
                   padding="max_length")
  np.testing.assert_array_equal(got["input_word_ids"], want["input_ids"])
  np.testing.assert_array_equal(got["input_mask"], want["attention_mask"])
  assert not np.any(got["input_type_ids"])
  single = packer([ours(first)])
  want = reference(first, truncation=True, max_length=seq_length,
                   padding="max_length")
  np.testing.assert_array_equal(single["input_word_ids"], want["input_ids"])
