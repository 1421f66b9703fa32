"""Pre-training data of the BERT family: ALBERT's sentence-order instances,
RoBERTa's FULL-SENTENCES instances, masking with byte-level BPE and
SentencePiece vocabularies (special ids, whole words), and
`bert-train-vocab`'s trainer."""

import os
import random

import numpy as np
import pytest

from bert import data as bert_data
from bert.data import pretraining_data as pd
from bert.data import pretraining_shards as ps
from bert.data.dynamic_masking import DynamicMasker
from bert.data.errors import DataError
from bert.data.vocab import Vocab
from bert.data.vocab_training import train_vocab
from bert.layers.vocabulary import Vocabulary
from conftest import one_line, shared_data
from family import tokenizer_folder
from _records import read_records, whole_words_checked


class FakeVocab:
  cls, sep = -1, -2


def documents(n_docs=150, seed=0):
  """Documents of numbered sentences: sentence k of document d holds
  tokens d * 1000 + k * 10 + (0 .. length - 1), so an instance's tokens say
  which sentences it holds and in which order."""
  rng = random.Random(seed)
  return [[[d * 1000 + k * 10 + j for j in range(rng.randint(3, 9))]
           for k in range(rng.randint(1, 12))] for d in range(n_docs)]


def sentence_ids(tokens):
  """The (document, sentence) of each token run, in order."""
  out = []
  for t in tokens:
    key = (t // 1000, t % 1000 // 10)
    if not out or out[-1] != key:
      out.append(key)
  return out


def test_sentence_order_instances_are_consecutive_or_swapped():
  docs = documents()
  config = pd.PretrainingDataConfig(seq_length=40, sentence_task="sop",
                                    short_seq_prob=0.0)
  rng = random.Random(1)
  instances = [x for d in range(len(docs)) for x in
               pd.create_instances_from_document(docs, d, config, FakeVocab,
                                                 rng)]
  swapped = in_order = 0
  for x in instances:
    sep = x.tokens.index(FakeVocab.sep)
    a, b = sentence_ids(x.tokens[1:sep]), sentence_ids(x.tokens[sep + 1:-1])
    assert x.segment_ids == [0] * (sep + 1) + [1] * (len(x.tokens) - sep - 1)
    if a[0][0] != b[0][0]:               # a one-segment chunk: a random B
      assert x.is_random_next
      continue
    first, second = (b, a) if x.is_random_next else (a, b)
    # Same document, every sentence of the second part after those of the
    # first (truncation may have removed whole sentences at the seam).
    assert first[-1][0] == second[0][0]
    assert second[0][1] > first[-1][1], x.tokens
    swapped += x.is_random_next
    in_order += not x.is_random_next
  assert in_order > 50 and swapped > 50
  assert 0.4 < swapped / (swapped + in_order) < 0.6
  # NSP instances of the same documents are BERT's (a negative control: B
  # is another document's about half the time).
  nsp = [x for d in range(len(docs)) for x in pd.create_instances_from_document(
      docs, d, pd.PretrainingDataConfig(seq_length=40, short_seq_prob=0.0),
      FakeVocab, random.Random(1))]
  other_doc = sum(sentence_ids(x.tokens[1:x.tokens.index(-2)])[0][0]
                  != sentence_ids(x.tokens[x.tokens.index(-2) + 1:-1])[0][0]
                  for x in nsp)
  assert other_doc > 0.3 * len(nsp)


def test_full_sentence_instances_read_on_across_documents():
  docs = documents()
  docs[3].append([3990 + j for j in range(9)] * 10)  # longer than an instance
  config = pd.PretrainingDataConfig(seq_length=40, sentence_task="none")
  instances = pd.create_full_sentence_instances(docs, config, FakeVocab)
  stream = []
  for x in instances:
    assert x.tokens[0] == FakeVocab.cls and x.tokens[-1] == FakeVocab.sep
    assert len(x.tokens) <= 40 and x.segment_ids == [0] * len(x.tokens)
    assert not x.is_random_next
    body = x.tokens[1:-1]
    assert body and body[0] != FakeVocab.sep and body[-1] != FakeVocab.sep
    stream += body + [FakeVocab.sep]
  # Every token once, in order; documents apart by a separator.
  flat = [t for t in stream if t != FakeVocab.sep]
  assert flat == [t for d in docs for s in d for t in s]
  # Sentences are whole within an instance (but the one longer than it).
  for x in instances:
    for key in sentence_ids([t for t in x.tokens[1:-1]
                             if t >= 0 and not 3990 <= t < 4000]):
      sentence = docs[key[0]][key[1]]
      got = [t for t in x.tokens if t in set(sentence)]
      assert got == sentence or len(sentence) > 38
  long = [x for x in instances if 3990 in x.tokens]
  # Cut into instance-long pieces; the rest starts an instance read on.
  assert [sum(3990 <= t < 4000 for t in x.tokens) for x in long] == [38, 38, 14]
  # Several documents share instances (FULL-SENTENCES, not DOC-SENTENCES).
  assert any(len({d for d, _ in sentence_ids(
      [t for t in x.tokens if t >= 0])}) > 1 for x in instances)


@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_family_records_and_masking(family, family_root, tmp_path):
  """Records of the family's vocabulary: its start/end ids frame every
  instance, masks replace with its mask id, and whole-word masking keeps
  its words (Ġ / ▁ start a word) together."""
  folder = tokenizer_folder(family, family_root)
  vocabulary = Vocabulary.from_file(folder)
  vocab = Vocab(vocabulary)
  task = "none" if family == "roberta" else "sop"
  config = pd.PretrainingDataConfig(
      dupe_factor=1, do_whole_word_mask=True, masked_lm_prob=0.3,
      max_predictions_per_seq=40, sentence_task=task, lower_case=True)
  path = (os.path.join(folder, "vocab.json") if family == "roberta"
          else os.path.join(folder, "spiece.model"))
  ps.create_pretraining_data(
      shared_data("corpus", "wikitext-2", "wiki.test.sentences.txt"),
      str(tmp_path), path, config, log=lambda *_: None)
  records = read_records(str(tmp_path), config)
  start = {"roberta": "<s>", "albert": "[CLS]"}[family]
  end = {"roberta": "</s>", "albert": "[SEP]"}[family]
  ids, mask = records["input_ids"], records["input_mask"]
  lengths = mask.sum(1)
  assert np.all(ids[:, 0] == vocabulary.tokens.index(start))
  assert np.all(ids[np.arange(len(ids)), lengths - 1]
                == vocabulary.tokens.index(end))
  if family == "roberta":
    assert not records["next_sentence_labels"].any()
    assert not records["segment_ids"].any()
  else:
    assert 0.3 < records["next_sentence_labels"].mean() < 0.7
  real = records["masked_lm_weights"] > 0
  # Never a special token masked; words of the family masked whole.
  assert not np.isin(records["masked_lm_ids"][real], [vocab.cls, vocab.sep]).any()
  assert whole_words_checked(records, (vocab.cls, vocab.sep),
                             vocab.is_continuation) > 100
  replaced = (ids == vocab.mask)[np.where(records["masked_lm_weights"] > 0,
                                          True, False).any(1)]
  assert replaced.sum() > 0
  # Dynamic masking with the same vocabulary draws the family's mask id.
  masker = DynamicMasker(path, 40, 0.3, do_whole_word_mask=True)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  batch = {k: tf.constant(v[:64]) for k, v in records.items()}
  batch["input_word_ids"] = tf.cast(batch.pop("input_ids"), tf.int32)
  batch["input_mask"] = tf.cast(batch["input_mask"], tf.int32)
  for k in ("masked_lm_positions", "masked_lm_ids"):
    batch[k] = tf.cast(batch[k], tf.int32)
  out = masker(batch, tf.constant(3))
  chosen = out["masked_lm_weights"].numpy() > 0
  new = out["input_word_ids"].numpy()
  at = np.take_along_axis(new, out["masked_lm_positions"].numpy(), 1)[chosen]
  assert 0.7 < (at == vocab.mask).mean() < 0.9


def test_vocab_continuations_by_kind(family_root):
  bpe = Vocab(Vocabulary.from_file(tokenizer_folder("roberta", family_root)))
  sp = Vocab(Vocabulary.from_file(tokenizer_folder("albert", family_root)))
  for vocab, start in ((bpe, "\u0120"), (sp, "\u2581")):
    for token, cont in zip(vocab.tokens, vocab.is_continuation):
      if token in ("<s>", "</s>", "<pad>", "<unk>", "<mask>", "[CLS]",
                   "[SEP]", "[MASK]"):
        assert not cont
      else:
        assert cont == (not token.startswith(start)), token


def test_train_vocab_writes_each_kind_and_refuses_bad_input(tmp_path):
  corpus = shared_data("corpus", "wikitext-2", "wiki.test.sentences.txt")
  for kind, name in (("wordpiece", "vocab.txt"), ("byte_pair", "vocab.json"),
                     ("sentencepiece", "spiece.model")):
    path = train_vocab(kind, [corpus], str(tmp_path / kind), 1000)
    assert os.path.basename(path) == name
    vocabulary = Vocabulary.from_file(path)
    assert len(vocabulary) == 1000 and vocabulary.kind == kind
    with pytest.raises(DataError) as e:       # an earlier vocabulary
      train_vocab(kind, [corpus], str(tmp_path / kind), 1000)
    one_line(e, kind, "refusing to replace")
    train_vocab(kind, [corpus], str(tmp_path / kind), 900, overwrite=True)
    assert len(Vocabulary.from_file(path)) == 900
  with pytest.raises(DataError) as e:
    train_vocab("sentencepiece", [corpus], str(tmp_path / "big"), 200_000)
  one_line(e, "vocab_size=200000")
  assert not os.path.exists(tmp_path / "big")
  # Casing: ALBERT's and uncased WordPiece vocabularies are trained on
  # lower-cased text unless asked; RoBERTa's BPE is cased only.
  def has_upper(kind, folder):
    return any(any(c.isupper() for c in t if c.isalpha())
               for t in Vocabulary.from_file(os.path.join(
                   folder, {"wordpiece": "vocab.txt",
                            "sentencepiece": "spiece.model"}[kind])).tokens
               if not (t.startswith("[") or t.startswith("<")))
  for kind in ("wordpiece", "sentencepiece"):
    assert not has_upper(kind, str(tmp_path / kind))
    train_vocab(kind, [corpus], str(tmp_path / kind), 1000, overwrite=True,
                lower_case=False)
    assert has_upper(kind, str(tmp_path / kind))
  with pytest.raises(DataError) as e:
    train_vocab("byte_pair", [corpus], str(tmp_path / "c"), 1000,
                lower_case=True)
  one_line(e, "lower_case=True", "cased")
  with pytest.raises(DataError) as e:
    train_vocab("bpe", [corpus], str(tmp_path / "w"), 1000)
  one_line(e, "kind='bpe'")
  assert not os.path.exists(tmp_path / "w")


def test_trained_wordpiece_tokenizes_as_transformers(tmp_path):
  # The trained vocab.txt is BERT's format: our in-graph tokenizer and
  # transformers' BertTokenizerFast give the same ids on held-out text.
  import transformers  # pylint: disable=g-import-not-at-top
  corpus = shared_data("corpus", "wikitext-2", "wiki.test.sentences.txt")
  path = train_vocab("wordpiece", [corpus], str(tmp_path / "w"), 2000)
  with open(shared_data("corpus", "wikitext-2",
                        "wiki.valid.sentences.txt"), encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()][:300]
  ours = bert_data.Tokenizer(path, lower_case=True).tokenize(lines)
  theirs = transformers.BertTokenizerFast(path, do_lower_case=True)(
      lines, add_special_tokens=False)["input_ids"]
  assert [row.tolist() for row in ours] == theirs
  assert sum(map(len, theirs)) > 5000   # not vacuous: real text tokenised
