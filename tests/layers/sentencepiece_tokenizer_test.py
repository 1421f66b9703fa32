"""`SentencePieceTokenizer` (ALBERT, in-graph) against Hugging Face's
`AlbertTokenizer` (fast) on the same spiece.model: a unigram model trained
with `sentencepiece` on WikiText-2 (valid: the shared data holds no train
split), compared on WikiText-2 test lines, SQuAD dev text, WNUT-17 tokens
and edge cases. Rows may differ only where two segmentations score the same
(a Viterbi tie, which tensorflow_text's SentencePiece breaks otherwise);
each such row is checked to be one. Offsets (`with_offsets=True`) are
compared with the reference's `offset_mapping` on SQuAD contexts, WikiText-2
lines and edge cases."""

import json

import pytest
import sentencepiece as spm
import tensorflow as tf
import tf_keras
import transformers

from bert.errors import DataError
from bert.layers.sentencepiece_tokenizer import SentencePieceTokenizer
from conftest import one_line, shared_data

EDGES = ["The quick brown fox, 9,9 3.0, ``q'' Café", "hello [MASK] world",
         "a  b\tc\n d", "", " ", "Ünïcödé ÅÄÖ ß", "中文字符", "x\u200by",
         "1,000,000 and 2019, then", "[CLS] a [SEP] b [SEP]", "ﬁ ½ ㎏"]
# Where offsets are easy to get wrong: whitespace and characters the
# normalisation removes, expands (ligatures, fractions, full-width, İ) or
# leaves unknown (CJK, emoji, Hangul), quote pairs, "▁" in the text,
# specials next to words.
OFFSET_EDGES = [
    "  lead", "trail  ", "a\u3000b\u00a0c", "ＡＢＣ１ ｘ", "😀 x😀y", "e\u0301t",
    "a ▁ b", "a▁b ▁c", "quoted ``x'' ```y''''", "a \x01b", "a\x01 b",
    "\u1100\u1161\u11a8 x 각", "中a中 文", "ﬁﬁ x½y", "\u00a8a a\u00a8b",
    "İstanbul ΣΑΣ σας", "[MASK][MASK]", "a[SEP]b", "\t\n", "x\u200b",
    "\u200bx", "ᄒ", "tab\tand\nnewline\r\nend", "café CAFÉ Straße",
    "\u2028line\u2029para", "mixed ``quotes'' and \"plain\" 'single'"]


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


def _char_offsets(text, offsets):
  """UTF-8 byte offsets into `text` as character offsets."""
  data = text.encode("utf-8")
  return [len(data[:b].decode("utf-8")) for b in offsets]


def test_offsets_equal_albert_tokenizer(spiece):
  """Every token's span (bytes -> characters) equals the reference's
  offset_mapping, and the ids are those without offsets; a row whose ids
  are a tie apart (allowed as above) keeps its words' starts and last end."""
  _, reference, ours = spiece
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    squad = json.load(f)["data"]
  contexts = [p["context"] for a in squad for p in a["paragraphs"]]
  with open(shared_data("corpus", "wikitext-2", "wiki.test.tokens"),
            encoding="utf-8") as f:
    wiki = [line.rstrip("\n") for line in f]
  total = ties = tokens = 0
  for texts in (EDGES + OFFSET_EDGES, contexts[::4], wiki):
    want = reference(texts, add_special_tokens=False,
                     return_offsets_mapping=True)
    for i in range(0, len(texts), 512):
      batch = texts[i:i + 512]
      ids, starts, ends = ours.tokenize(batch, with_offsets=True)
      assert ids.to_list() == ours.tokenize(batch).to_list()
      assert starts.dtype == ends.dtype == tf.int64
      for j, (text, row, b, e) in enumerate(zip(
          batch, ids.to_list(), starts.to_list(), ends.to_list())):
        want_ids = want["input_ids"][i + j]
        want_spans = [tuple(x) for x in want["offset_mapping"][i + j]]
        got = list(zip(_char_offsets(text, b), _char_offsets(text, e)))
        total += 1
        tokens += len(row)
        if row == want_ids:
          assert got == want_spans, (text, [
              (reference.convert_ids_to_tokens(t), g, w)
              for t, g, w in zip(row, got, want_spans) if g != w][:3])
          continue
        ties += 1
        pieces = reference.convert_ids_to_tokens(row)
        want_pieces = reference.convert_ids_to_tokens(want_ids)
        assert ({s for (s, _), t in zip(got, pieces) if t.startswith("▁")}
                == {s for (s, _), t in zip(want_spans, want_pieces)
                    if t.startswith("▁")}), text
        assert got[-1][1] == want_spans[-1][1], text
  print(f"{total} texts, {tokens} tokens, {ties} ties")
  assert total > 4800 and tokens > 400000 and ties <= total // 1000


def test_offsets_without_lower_casing(spiece):
  folder, _, _ = spiece
  texts = EDGES + OFFSET_EDGES + ["The Eiffel Tower, in Paris."]
  reference = transformers.AlbertTokenizer.from_pretrained(
      str(folder), do_lower_case=False)
  ours = SentencePieceTokenizer(str(folder / "spiece.model"),
                                lower_case=False, tokenize_with_offsets=True)
  ids, starts, ends = ours(texts)
  want = reference(texts, add_special_tokens=False,
                   return_offsets_mapping=True)
  assert ids.to_list() == want["input_ids"]
  for text, b, e, spans in zip(texts, starts.to_list(), ends.to_list(),
                               want["offset_mapping"]):
    assert list(zip(_char_offsets(text, b), _char_offsets(text, e))) == [
        tuple(x) for x in spans], text


def test_offsets_in_a_graph_and_a_saved_model(spiece, tmp_path):
  """`call` with tokenize_with_offsets, in a tf.function, saved, and loaded
  after the Keras session is cleared, gives the eager offsets."""
  folder, _, ours = spiece
  tokenizer = SentencePieceTokenizer(str(folder / "spiece.model"),
                                     tokenize_with_offsets=True)
  assert SentencePieceTokenizer.from_config(
      tokenizer.get_config()).tokenize_with_offsets

  class Module(tf.Module):

    def __init__(self):
      super().__init__()
      self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, texts):
      ids, starts, ends = self.tokenizer(texts)
      return ids.to_tensor(-1), starts.to_tensor(-1), ends.to_tensor(-1)

  tf.saved_model.save(Module(), str(tmp_path / "sm"))
  tf_keras.backend.clear_session()
  loaded = tf.saved_model.load(str(tmp_path / "sm"))
  texts = ["Hello  world, ``q''", "The [MASK] ﬁ 中文.", "", "a\tb"]
  got = [x.numpy() for x in loaded(tf.constant(texts))]
  want = ours.tokenize(texts, with_offsets=True)
  assert sum(len(row) for row in want[0].to_list()) > 10
  for out, ragged in zip(got, want):
    assert [[v for v in row if v >= 0] for row in out.tolist()] == (
        ragged.to_list())
