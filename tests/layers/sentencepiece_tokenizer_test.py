"""`SentencePieceTokenizer` (ALBERT, in-graph) against Hugging Face's
`AlbertTokenizer` (fast) on the same spiece.model: a unigram model trained
with `sentencepiece` on WikiText-2 (valid: the shared data holds no train
split), compared on WikiText-2 test lines, SQuAD dev text, WNUT-17 tokens
and edge cases. Rows may differ only where two segmentations score the same
(a Viterbi tie, which tensorflow_text's SentencePiece breaks otherwise);
each such row is checked to be one."""

import json

import pytest
import sentencepiece as spm
import transformers

from bert.errors import DataError
from bert.layers.sentencepiece_tokenizer import SentencePieceTokenizer
from conftest import one_line, shared_data

EDGES = ["The quick brown fox, 9,9 3.0, ``q'' Café", "hello [MASK] world",
         "a  b\tc\n d", "", " ", "Ünïcödé ÅÄÖ ß", "中文字符", "x\u200by",
         "1,000,000 and 2019, then", "[CLS] a [SEP] b [SEP]", "ﬁ ½ ㎏"]


@pytest.fixture(scope="module")
def spiece(tmp_path_factory):
  folder = tmp_path_factory.mktemp("sp")
  spm.SentencePieceTrainer.train(
      input=shared_data("corpus", "wikitext-2", "wiki.valid.tokens"),
      model_prefix=str(folder / "spiece"), vocab_size=3000,
      model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
      control_symbols=["[CLS]", "[SEP]", "[MASK]"],
      input_sentence_size=100000, shuffle_input_sentence=False,
      minloglevel=2)
  reference = transformers.AlbertTokenizer.from_pretrained(str(folder))
  return folder, reference, SentencePieceTokenizer(str(folder / "spiece.model"))


def test_ids_equal_albert_tokenizer_but_for_ties(spiece):
  folder, reference, ours = spiece
  model = spm.SentencePieceProcessor(model_file=str(folder / "spiece.model"))

  def score(ids):
    return sum(model.get_score(i) for i in ids)

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
  total = ties = 0
  for texts in (EDGES, wiki, contexts[::4], questions[::10], words):
    got = []
    for i in range(0, len(texts), 512):
      got += ours(texts[i:i + 512]).to_list()
    want = reference(texts, add_special_tokens=False)["input_ids"]
    for text, w, g in zip(texts, want, got):
      total += 1
      if w != g:
        ties += 1
        assert len(w) == len(g) and abs(score(w) - score(g)) < 1e-4, (
            text, reference.convert_ids_to_tokens(w),
            reference.convert_ids_to_tokens(g))
  print(f"{total} texts, {ties} differ (each a tie)")
  assert total > 10000 and ties <= total // 1000


def test_numbers_keep_their_comma_apart_as_the_reference(spiece):
  _, reference, ours = spiece
  texts = ["9,9 and 3.0, then 2019, 1,000", "In 1998, 12 of 40,"]
  assert ours(texts).to_list() == reference(
      texts, add_special_tokens=False)["input_ids"]


def test_pairs_pack_as_the_reference(spiece):
  """[CLS] a [SEP] b [SEP] with segment type ids, through BertPackInputs
  with the tokenizer's special ids."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert.layers.bert_pack_inputs import BertPackInputs  # pylint: disable=g-import-not-at-top
  _, reference, ours = spiece
  special = ours.get_special_tokens_dict()
  assert (special["start_of_sequence_id"], special["end_of_segment_id"],
          special["padding_id"], special["mask_id"]) == (
              reference.cls_token_id, reference.sep_token_id,
              reference.pad_token_id, reference.mask_token_id)
  first, second = ["Where is the tower?", "a b"], ["In Paris, 1889.", "c"]
  packer = BertPackInputs(16, special, **ours.packer_options())
  got = packer([ours(first), ours(second)])
  want = reference(first, second, truncation=True, max_length=16,
                   padding="max_length", return_token_type_ids=True)
  np.testing.assert_array_equal(got["input_word_ids"], want["input_ids"])
  np.testing.assert_array_equal(got["input_type_ids"], want["token_type_ids"])
  np.testing.assert_array_equal(got["input_mask"], want["attention_mask"])


def test_a_file_that_is_not_a_model_is_one_line(tmp_path):
  (tmp_path / "spiece.model").write_bytes(b"\x00\x01 not a model")
  with pytest.raises(DataError) as e:
    SentencePieceTokenizer(str(tmp_path / "spiece.model"))
  one_line(e, "spiece.model", "SentencePiece")
