"""The pre-training input pipeline reads the records the model consumes."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert import BertConfig, BertEncoder
from bert.data import pretraining_data as pd
from bert.data import pretraining_shards as ps
from bert.data.pretraining_dataset import pretraining_dataset
from bert.models import BertPretrainer
from bert.losses import pretraining_losses
from conftest import shared_data, vocab


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  folder = str(tmp_path_factory.mktemp("records"))
  config = pd.PretrainingDataConfig(dupe_factor=3, seq_length=64,
                                    max_predictions_per_seq=10)
  ps.create_pretraining_data(shared_data("corpus", "sample_text.txt"), folder,
                             vocab(), config,
                             num_shards=4, log=lambda *_: None)
  return folder


def all_examples(ds):
  return [{k: v.numpy() for k, v in b.items()} for b in ds]


def test_eval_pass_reads_every_record_once(records):
  ds = pretraining_dataset(os.path.join(records, "*.tfrecord"), 64, 10,
                           global_batch_size=8, is_training=False)
  batches = all_examples(ds)
  n = sum(len(b["input_word_ids"]) for b in batches)
  raw = sum(1 for _ in tf.data.TFRecordDataset(tf.io.gfile.glob(
      os.path.join(records, "*.tfrecord"))))
  assert n == raw > 0
  b = batches[0]
  assert b["input_word_ids"].dtype == np.int32 and b["input_word_ids"].shape[1] == 64
  assert b["masked_lm_weights"].dtype == np.float32
  assert b["next_sentence_labels"].shape[1:] == (1,)
  assert (b["input_word_ids"][:, 0] == 101).all()


def test_training_is_seeded_and_sharded_by_file(records):
  pattern = os.path.join(records, "*.tfrecord")
  take = lambda ds: [b["input_word_ids"] for b in all_examples(ds.take(3))]
  a = take(pretraining_dataset(pattern, 64, 10, 4, seed=7))
  b = take(pretraining_dataset(pattern, 64, 10, 4, seed=7))
  assert all((x == y).all() for x, y in zip(a, b))
  contexts = [tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=i,
                                         num_replicas_in_sync=2)
              for i in range(2)]
  seen = []
  for ctx in contexts:
    ds = pretraining_dataset(pattern, 64, 10, global_batch_size=8,
                             is_training=False, input_context=ctx)
    batches = all_examples(ds)
    assert batches[0]["input_word_ids"].shape[0] <= 4      # per-replica batch
    seen.append({r.tobytes() for b in batches for r in b["input_word_ids"]})
  assert seen[0] and seen[1] and not seen[0] & seen[1]    # disjoint files
  with pytest.raises(ValueError, match="at least one shard per worker"):
    pretraining_dataset(pattern, 64, 10, 8, input_context=tf.distribute.InputContext(
        num_input_pipelines=5, input_pipeline_id=0, num_replicas_in_sync=5))
  with pytest.raises(FileNotFoundError, match="nothing"):
    pretraining_dataset(os.path.join(records, "nothing*"), 64, 10, 8)


def test_pretrainer_consumes_batches(records):
  config = BertConfig.preset("bert_tiny", max_position_embeddings=64)
  model = BertPretrainer(BertEncoder(config))
  batch = next(iter(pretraining_dataset(os.path.join(records, "*.tfrecord"),
                                        64, 10, 4, seed=1)))
  out = model(batch, training=False)
  losses = pretraining_losses(batch, out)
  # An untrained model predicts ~uniformly over 30,522 ids: MLM loss near
  # ln(30522) = 10.33, next-sentence loss near ln(2) = 0.69.
  assert abs(float(losses["masked_lm_loss"]) - np.log(30522)) < 0.5
  assert abs(float(losses["next_sentence_loss"]) - np.log(2)) < 0.3
