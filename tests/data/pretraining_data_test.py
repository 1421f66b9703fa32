"""Pre-training data creation vs the reference algorithm's statistics."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from bert.data import pretraining_data as pd
from bert.data import pretraining_records as pr
from bert.data import pretraining_shards as ps
from conftest import shared_data, vocab
from _records import read_records, whole_words_checked


@pytest.fixture(scope="module")
def vocab_file():
  return vocab()


@pytest.fixture(scope="module")
def wiki_records(tmp_path_factory, vocab_file):
  """The reference's measured setting: WikiText-2 valid+test sentences,
  seq 128, 20 predictions, p=0.15, short 0.1, dupe 5, seed 12345."""
  folder = str(tmp_path_factory.mktemp("wiki"))
  config = pd.PretrainingDataConfig(dupe_factor=5, random_seed=12345)
  inputs = ",".join(shared_data("corpus", "wikitext-2", f"wiki.{s}.sentences.txt")
                    for s in ("valid", "test"))
  summaries = ps.create_pretraining_data(inputs, folder, vocab_file, config,
                                         log=lambda *_: None)
  return read_records(folder, config), ps.total(summaries), config


def test_statistics_match_the_reference(wiki_records):
  records, summary, _ = wiki_records
  # Reference figures measured with google-research create_pretraining_data.py
  # on the same files and flags: 28,880 instances, 15.25% of non-special
  # tokens masked, 80.0/10.0/10.0, 54.6% random next.
  n = len(records["input_ids"])
  assert n == summary.instances
  assert abs(n - 28_880) <= 0.05 * 28_880
  lengths = records["input_mask"].sum(1)
  weights = records["masked_lm_weights"]
  masked_fraction = weights.sum() / (lengths - 3).sum()
  assert abs(masked_fraction - 0.1525) <= 0.005
  at = np.take_along_axis(records["input_ids"], records["masked_lm_positions"], 1)
  labels = records["masked_lm_ids"]
  real = weights > 0
  mask = ((at == 103) & real).sum() / real.sum()
  kept = ((at == labels) & (at != 103) & real).sum() / real.sum()
  rand = ((at != labels) & (at != 103) & real).sum() / real.sum()
  assert abs(mask - 0.8) <= 0.02 and abs(kept - 0.1) <= 0.02 and abs(rand - 0.1) <= 0.02
  random_next = records["next_sentence_labels"].mean()
  assert abs(random_next - 0.546) <= 0.03


def test_records_are_well_formed(wiki_records):
  records, _, config = wiki_records
  ids, mask, seg = records["input_ids"], records["input_mask"], records["segment_ids"]
  lengths = mask.sum(1)
  assert (lengths <= config.seq_length).all()
  assert (ids[:, 0] == 101).all()                      # [CLS]
  rows = np.arange(len(ids))
  assert (ids[rows, lengths - 1] == 102).all()          # final [SEP]
  assert ((ids * (1 - mask)) == 0).all() and ((seg * (1 - mask)) == 0).all()
  # [CLS]/[SEP] are never predicted.
  labels = records["masked_lm_ids"]
  real = records["masked_lm_weights"] > 0
  assert not np.isin(labels[real], [101, 102]).any()
  # (The 10% random replacements may draw any vocab id, as the reference's.)
  # Between 1 and max predictions, at least round(15%) when room allows.
  count = real.sum(1)
  assert (count >= 1).all() and (count <= config.max_predictions_per_seq).all()


def test_whole_word_masking_masks_whole_words(tmp_path, vocab_file):
  from bert.layers.bert_tokenizer import read_vocab
  vocab = read_vocab(vocab_file)
  config = pd.PretrainingDataConfig(dupe_factor=2, do_whole_word_mask=True,
                                    masked_lm_prob=0.3, max_predictions_per_seq=40)
  ps.create_pretraining_data(
      shared_data("corpus", "wikitext-2", "wiki.valid.sentences.txt"),
      str(tmp_path), vocab_file, config, log=lambda *_: None)
  records = read_records(str(tmp_path), config)
  continuation = np.array([t.startswith("##") for t in vocab])
  assert whole_words_checked(records, (101, 102), continuation) > 100


def test_deterministic_for_seed_and_shards(tmp_path, vocab_file):
  config = pd.PretrainingDataConfig(dupe_factor=1)
  text = shared_data("corpus", "sample_text.txt")
  for run in ("a", "b"):
    ps.create_pretraining_data(text, str(tmp_path / run), vocab_file, config,
                               num_shards=2, log=lambda *_: None)
  for name in ("pretrain-00000-of-00002.tfrecord", "pretrain-00001-of-00002.tfrecord"):
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_bad_and_odd_input(tmp_path, vocab_file):
  config = pd.PretrainingDataConfig(dupe_factor=1)
  empty = tmp_path / "empty.txt"
  empty.write_text("")
  with pytest.raises(ValueError, match="empty.txt: every input file is empty"):
    ps.create_pretraining_data(str(empty), str(tmp_path / "o1"), vocab_file,
                               config, log=lambda *_: None)
  # No blank lines: one document; a one-sentence document: random next only.
  one_doc = tmp_path / "one_doc.txt"
  one_doc.write_text("The first sentence is here.\nA second one follows.\n"
                     "And a third closes it.\n")
  single = tmp_path / "single.txt"
  single.write_text("Only one sentence in this document.\n")
  warnings = []
  summaries = ps.create_pretraining_data(
      f"{empty},{one_doc},{single}", str(tmp_path / "o2"), vocab_file, config,
      log=warnings.append)
  assert any("empty.txt is empty" in w for w in warnings)
  assert ps.total(summaries).instances >= 2
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"fine line\nbroken \xff\xfe line\n")
  with pytest.raises(ValueError, match=r"bad.txt:2: not valid UTF-8"):
    ps.create_pretraining_data(str(bad), str(tmp_path / "o3"), vocab_file,
                               config, log=lambda *_: None)
  no_mask = tmp_path / "vocab.txt"
  no_mask.write_text("\n".join(t for t in open(vocab_file, encoding="utf-8")
                               .read().splitlines() if t != "[MASK]") + "\n")
  with pytest.raises(ValueError, match="vocab.txt has no \\[MASK\\]"):
    ps.create_pretraining_data(str(one_doc), str(tmp_path / "o4"), str(no_mask),
                               config, log=lambda *_: None)
  with pytest.raises(FileNotFoundError, match="nothing_here"):
    ps.expand_inputs(str(tmp_path / "nothing_here*.txt"))


def test_encoded_examples_parse_like_tf_train_example():
  rng = np.random.RandomState(0)
  ints = rng.randint(0, 1 << 21, size=(5, 7))
  ints[0, :3] = [0, 127, 128]                 # varint length boundaries
  ints[1, :3] = [16383, 16384, (1 << 21) - 1]
  floats = rng.randn(5, 3).astype(np.float32)
  records = pr.encode_examples({"a": ints, "b": floats})
  spec = {"a": tf.io.FixedLenFeature([7], tf.int64),
          "b": tf.io.FixedLenFeature([3], tf.float32)}
  for i, record in enumerate(records):
    parsed = tf.io.parse_single_example(record, spec)
    assert (parsed["a"].numpy() == ints[i]).all()
    assert (parsed["b"].numpy() == floats[i]).all()
    reference = tf.train.Example(features=tf.train.Features(feature={
        "a": tf.train.Feature(int64_list=tf.train.Int64List(value=ints[i])),
        "b": tf.train.Feature(float_list=tf.train.FloatList(value=floats[i]))}))
    assert tf.train.Example.FromString(record) == reference


def test_truncation_closed_form_matches_reference_loop():
  import random
  rng = random.Random(0)

  def reference(a, b, m):
    a, b = list(a), list(b)
    while len(a) + len(b) > m:
      t = a if len(a) > len(b) else b
      if rng.random() < 0.5:
        del t[0]
      else:
        t.pop()
    return a, b

  for _ in range(3000):
    la, lb, m = rng.randint(1, 80), rng.randint(1, 80), rng.randint(2, 125)
    a, b = list(range(la)), list(range(100, 100 + lb))
    ra, rb = reference(a, b, m)
    ga, gb = pd.truncate_seq_pair(a, b, m, rng)
    assert (len(ga), len(gb)) == (len(ra), len(rb))
    # A contiguous slice of the original (front and back trimmed).
    assert ga == a[a.index(ga[0]):a.index(ga[0]) + len(ga)]
    assert gb == b[b.index(gb[0]):b.index(gb[0]) + len(gb)]


def test_a_folder_of_an_earlier_run_is_refused_and_readers_check_the_manifest(
    tmp_path, vocab_file):
  """4 shards, then 2 into the same folder: before, six files remained and
  `folder/*.tfrecord` trained on all six. Now the second run is refused (or
  deletes the earlier files with overwrite), and a reader refuses a
  TFRecord its folder's manifest does not list."""
  from bert.data.pretraining_dataset import list_files  # pylint: disable=g-import-not-at-top
  text = shared_data("corpus", "sample_text.txt")
  config = pd.PretrainingDataConfig(seq_length=64, dupe_factor=1)
  folder = str(tmp_path / "data")
  quiet = lambda *_: None
  ps.create_pretraining_data(text, folder, vocab_file, config, num_shards=4,
                             log=quiet)
  assert len(list_files(folder + "/*.tfrecord")) == 4     # control
  with pytest.raises(FileExistsError, match=r"holds files of an earlier run "
                     r"\(manifest.json, pretrain-00000-of-00004.tfrecord"):
    ps.create_pretraining_data(text, folder, vocab_file, config, num_shards=2,
                               log=quiet)
  assert len(glob.glob(folder + "/*.tfrecord")) == 4      # nothing touched
  ps.create_pretraining_data(text, folder, vocab_file, config, num_shards=2,
                             log=quiet, overwrite=True)
  assert [os.path.basename(f) for f in list_files(folder + "/*.tfrecord")] == [
      "pretrain-00000-of-00002.tfrecord", "pretrain-00001-of-00002.tfrecord"]
  # A stray file of another run beside the manifest is refused by readers.
  with open(os.path.join(folder, "pretrain-00003-of-00004.tfrecord"), "wb") as f:
    f.write(b"")
  with pytest.raises(ValueError, match=r"pretrain-00003-of-00004.tfrecord: not "
                     r"listed in .*manifest.json"):
    list_files(folder + "/*.tfrecord")


def test_output_file_flag_as_in_the_reference(tmp_path, vocab_file):
  """google-research's --output_file=a,b: one shard per named file, the same
  bytes as the --output_dir run with as many shards, and no manifest."""
  import subprocess
  import sys
  text = shared_data("corpus", "sample_text.txt")
  config = pd.PretrainingDataConfig(dupe_factor=2)
  ps.create_pretraining_data(text, str(tmp_path / "dir"), vocab_file, config,
                             num_shards=2, log=lambda *_: None)
  outputs = [str(tmp_path / "named" / "a.tfrecord"), str(tmp_path / "named" / "b.tfrecord")]
  exe = os.path.join(os.path.dirname(sys.executable), "bert-create-pretraining-data")
  result = subprocess.run(
      [exe, f"--input_file={text}", f"--output_file={','.join(outputs)}",
       f"--vocab_file={vocab_file}", "--dupe_factor=2"],
      capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert sorted(os.listdir(tmp_path / "named")) == ["a.tfrecord", "b.tfrecord"]
  for out, shard in zip(outputs, ("pretrain-00000-of-00002.tfrecord",
                                  "pretrain-00001-of-00002.tfrecord")):
    assert open(out, "rb").read() == (tmp_path / "dir" / shard).read_bytes()
  # Named files are replaced, as the reference does; bad requests are refused.
  ps.create_pretraining_data(text, None, vocab_file, config, log=lambda *_: None,
                             output_files=outputs)
  with pytest.raises(ValueError, match="named twice"):
    ps.create_pretraining_data(text, None, vocab_file, config,
                               output_files=[outputs[0], outputs[0]])
  with pytest.raises(FileExistsError, match="manifest.json"):
    ps.create_pretraining_data(text, None, vocab_file, config,
                               output_files=[str(tmp_path / "dir" / "x.tfrecord")])
  # The two output flags exclude each other: absl refuses the pair before
  # main runs (checked in process: another interpreter costs 10 s here).
  from absl import flags as absl_flags
  from bert.scripts import create_pretraining_data  # pylint: disable=unused-import
  argv = ["bert-create-pretraining-data", f"--input_file={text}",
          f"--output_file={outputs[0]}", f"--output_dir={tmp_path / 'o'}",
          f"--vocab_file={vocab_file}"]
  try:
    with pytest.raises(absl_flags.IllegalFlagValueError,
                       match="Exactly one of .output_dir, output_file."):
      absl_flags.FLAGS(argv)
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(argv[:3] + argv[4:])          # negative control: one is fine
  finally:
    absl_flags.FLAGS.unparse_flags()
  assert not os.path.exists(tmp_path / "o")


def test_input_streams_in_blocks_of_whole_documents(tmp_path, vocab_file):
  docs = [[f"doc {d} sentence {i}." for i in range(n)]
          for d, n in enumerate([3, 1, 5, 2, 4, 1])]
  path = tmp_path / "docs.txt"
  path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n")
  # Round-robin dealing, read lazily and in order.
  shard1 = ps.shard_documents([str(path)], 1, 2)
  assert next(shard1) == docs[1]
  assert list(shard1) == [docs[3], docs[5]]
  # Blocks close after the document that reaches the budget; none is split.
  blocks = list(ps.document_blocks(iter(docs), block_sentences=4))
  assert blocks == [docs[0:2], docs[2:3], docs[3:5], docs[5:6]]
  # The block size changes the pairing, not what a corpus yields.
  counts = []
  for block in (2, 1000):
    config = pd.PretrainingDataConfig(dupe_factor=3, block_sentences=block)
    summaries = ps.create_pretraining_data(
        shared_data("corpus", "sample_text.txt"), str(tmp_path / f"b{block}"),
        vocab_file, config, log=lambda *_: None)
    counts.append((ps.total(summaries).documents, ps.total(summaries).instances))
  assert counts[0][0] == counts[1][0]
  assert abs(counts[0][1] - counts[1][1]) <= 0.2 * counts[1][1]
