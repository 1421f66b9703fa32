"""Dynamic masking draws masks with the reference's rules, in the pipeline."""

import os

import numpy as np
import pytest

from bert.data import pretraining_data as pd
from bert.data import pretraining_shards as ps
from bert.data.dynamic_masking import DynamicMasker
from bert.data.pretraining_dataset import pretraining_dataset
from bert.layers.bert_tokenizer import read_vocab
from conftest import shared_data, vocab

SEQ, PRED = 128, 20


@pytest.fixture(scope="module")
def static_batches(tmp_path_factory):
  """All instances of WikiText-2 test, statically masked, as 4 big batches."""
  folder = str(tmp_path_factory.mktemp("wiki_records"))
  config = pd.PretrainingDataConfig(dupe_factor=1, seq_length=SEQ,
                                    max_predictions_per_seq=PRED, random_seed=9)
  ps.create_pretraining_data(
      shared_data("corpus", "wikitext-2", "wiki.test.sentences.txt"), folder,
      vocab(), config, num_shards=2, log=lambda *_: None)
  ds = pretraining_dataset(os.path.join(folder, "*.tfrecord"), SEQ, PRED,
                           global_batch_size=1000, is_training=False)
  return list(ds)


def as_np(batch):
  return {k: v.numpy() for k, v in batch.items()}


def test_unmask_restores_the_static_records(static_batches):
  masker = DynamicMasker(vocab(), PRED)
  b = as_np(static_batches[0])
  original = masker.unmask(static_batches[0]).numpy()
  w = b["masked_lm_weights"] > 0
  rows = np.nonzero(w)[0]
  np.testing.assert_array_equal(
      original[rows, b["masked_lm_positions"][w]], b["masked_lm_ids"][w])
  unmasked = np.ones_like(original, bool)
  unmasked[rows, b["masked_lm_positions"][w]] = False
  np.testing.assert_array_equal(original[unmasked], b["input_word_ids"][unmasked])
  assert not (original == 103).any()   # no [MASK] left


def test_statistics_match_the_reference_rules(static_batches):
  masker = DynamicMasker(vocab(), PRED, seed=4)
  chosen_total = real_total = masked = kept = random = 0
  for i, batch in enumerate(static_batches):
    static = as_np(batch)
    original = masker.unmask(batch).numpy()
    out = as_np(masker(batch, i))
    w = out["masked_lm_weights"] > 0
    # Same count per instance as the static records: both take exactly
    # min(P, max(1, round(0.15 * length))) single pieces.
    np.testing.assert_array_equal(w.sum(1), (static["masked_lm_weights"] > 0).sum(1))
    rows = np.nonzero(w)[0]
    pos = out["masked_lm_positions"][w]
    assert (np.diff(np.where(w, out["masked_lm_positions"], 10**6), axis=1)[
        w[:, 1:]] > 0).all()                        # ascending positions
    np.testing.assert_array_equal(out["masked_lm_ids"][w], original[rows, pos])
    assert not np.isin(original[rows, pos], [101, 102]).any()   # never CLS/SEP
    now = out["input_word_ids"][rows, pos]
    masked += (now == 103).sum()
    kept += (now == original[rows, pos]).sum()
    random += ((now != 103) & (now != original[rows, pos])).sum()
    chosen_total += w.sum()
    real_total += (static["input_mask"].sum() - 2 * len(static["input_mask"])
                   - (static["input_type_ids"].max(1) > 0).sum())
    # Nothing changed outside the chosen positions.
    untouched = np.ones_like(original, bool)
    untouched[rows, pos] = False
    np.testing.assert_array_equal(out["input_word_ids"][untouched],
                                  original[untouched])
  fraction = chosen_total / real_total
  assert abs(fraction - 0.1525) < 0.005, fraction      # reference: 15.25%
  # A random id equal to the original counts as "kept": ~10.0% + 10%/30522.
  assert abs(masked / chosen_total - 0.8) < 0.02
  assert abs(kept / chosen_total - 0.1) < 0.02
  assert abs(random / chosen_total - 0.1) < 0.02


def test_whole_word_mode_masks_whole_words_only(static_batches):
  is_cont = np.array([t.startswith("##") for t in read_vocab(vocab())])
  masker = DynamicMasker(vocab(), PRED, do_whole_word_mask=True, seed=2)
  batch = static_batches[0]
  original = masker.unmask(batch).numpy()
  out = as_np(masker(batch, 0))
  chosen = np.zeros_like(original, bool)
  w = out["masked_lm_weights"] > 0
  chosen[np.nonzero(w)[0], out["masked_lm_positions"][w]] = True
  real = out["input_mask"] > 0
  candidate = real & ~np.isin(original, [101, 102])
  several = 0
  for row in range(len(original)):
    idx = np.nonzero(candidate[row])[0]
    c, k = chosen[row, idx], is_cont[original[row, idx]]
    # A "##" piece is chosen iff the candidate piece before it is (as the
    # reference, a piece after [SEP] continues the word before the [SEP]).
    assert (c[1:][k[1:]] == c[:-1][k[1:]]).all(), row
    several += (c[1:] & k[1:]).sum()
  assert several > 0                   # whole words with several pieces occur
  assert w.sum(1).max() <= PRED


def test_draws_are_seeded_by_batch_index(static_batches):
  masker = DynamicMasker(vocab(), PRED, seed=1)
  batch = static_batches[1]
  a, b, c = (masker(batch, i)["masked_lm_positions"].numpy() for i in (5, 5, 6))
  np.testing.assert_array_equal(a, b)
  assert (a != c).any()
  other = DynamicMasker(vocab(), PRED, seed=2)(batch, 5)["masked_lm_positions"]
  assert (a != other.numpy()).any()


def test_vocab_without_mask_token_is_refused(tmp_path):
  bad = tmp_path / "vocab.txt"
  bad.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
  with pytest.raises(ValueError, match=r"vocab.txt has no \[MASK\]"):
    DynamicMasker(str(bad))
