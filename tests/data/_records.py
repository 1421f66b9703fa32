"""Shared by the records tests: the issue's SST-2 task, small pre-training
shards, manifest edits, pre-training records read back."""

import glob
import json
import os

import numpy as np
import tensorflow as tf

from bert.data import pretraining_shards as ps
from bert.data import pretraining_records as pr
from bert.data.pretraining_data import PretrainingDataConfig
from conftest import shared_data, small_config, vocab

TRAIN = "train-00000-of-00001.tfrecord"
EVAL = "eval-00000-of-00001.tfrecord"
PRETRAIN_CONFIG = PretrainingDataConfig(seq_length=64, dupe_factor=1)


def sst2_task(records=None):
  """The issue's `$T`: SST-2, 40 training rows, seq_length 32, batch 4."""
  from bert.tasks import ClassificationTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import (ClassificationData, EncoderSource,  # pylint: disable=g-import-not-at-top
                                  FinetuningInputs)
  return ClassificationTask(
      data=ClassificationData(glue_task="sst2",
                              data_dir=shared_data("glue", "SST-2"),
                              max_train_examples=40),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522,
                                   max_position_embeddings=32),
          vocab_file=vocab(),
          lower_case=True),
      inputs=FinetuningInputs(seq_length=32, global_batch_size=4,
                              records=records))


def write_pretraining_shards(folder):
  """sample_text.txt in two shards, with the manifest."""
  ps.create_pretraining_data(shared_data("corpus", "sample_text.txt"), folder,
                             vocab(),
                             PRETRAIN_CONFIG, num_shards=2, log=lambda *_: None)
  return folder


def edit_manifest(folder, edit):
  path = os.path.join(folder, "manifest.json")
  with open(path, encoding="utf-8") as f:
    manifest = json.load(f)
  edit(manifest)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(manifest, f)


def read_records(folder, config):
  spec = pr.feature_spec(config.seq_length, config.max_predictions_per_seq)
  files = sorted(glob.glob(os.path.join(folder, "*.tfrecord")))
  ds = tf.data.TFRecordDataset(files).map(
      lambda x: tf.io.parse_single_example(x, spec)).batch(4096)
  out = {k: [] for k in spec}
  for batch in ds:
    for k in spec:
      out[k].append(batch[k].numpy())
  return {k: np.concatenate(v) for k, v in out.items()}


def whole_words_checked(records, special, continuation) -> int:
  """Checks whole-word masking on pre-training records: each word (a piece
  and the continuation pieces after it, the `special` ids skipped, so a
  piece left at the start of segment B by truncation joins A's last word,
  as the reference groups them) is masked whole or not at all. Returns how
  many words of more than one piece were masked."""
  checked = 0
  for ids, length, positions, labels, weights in zip(
      records["input_ids"], records["input_mask"].sum(1),
      records["masked_lm_positions"], records["masked_lm_ids"],
      records["masked_lm_weights"]):
    original = ids.copy()
    real = weights > 0
    original[positions[real]] = labels[real]
    masked = np.zeros(len(ids), bool)
    masked[positions[real]] = True
    words = []
    for i in range(int(length)):
      if original[i] in special:
        continue
      if words and continuation[original[i]]:
        words[-1].append(i)
      else:
        words.append([i])
    for word in words:
      if len(word) > 1:
        assert masked[word].all() or not masked[word].any(), word
        checked += masked[word].any()
  return checked
