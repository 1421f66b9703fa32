"""Fine-tuning records and pre-training shards checked against their
manifests before training (issue 42, findings 4 and 5), and damage found
while reading named by file and record.

Findings as reported against 471c388: `rows` edited from 40 to 400 made one
epoch 100 steps; an eval shard copied over the train shard trained on eval
rows; a truncated or bit-flipped shard was a 47-line DataLossError naming no
file."""

import os
import shutil

import pytest
import tensorflow as tf

from _records import (EVAL, TRAIN, edit_manifest, sst2_task,
                      write_pretraining_shards)
from bert.data.errors import DataError
from bert.data.finetuning_records import FinetuningRecords
from bert.data.pretraining_dataset import list_files, pretraining_dataset


@pytest.fixture(scope="module")
def sst2_records(tmp_path_factory):
  """bert-create-finetuning-data's folder of the issue (train: 40 rows,
  eval: the 872 dev rows, one shard each)."""
  from bert.tasks.records_writer import create_finetuning_records  # pylint: disable=g-import-not-at-top
  folder = str(tmp_path_factory.mktemp("sst") / "records")
  create_finetuning_records(sst2_task(), folder, ("train", "eval"),
                            log=lambda *_: None)
  return folder


@pytest.fixture
def records(sst2_records, tmp_path):
  """A copy of the records folder to damage."""
  folder = str(tmp_path / "records")
  shutil.copytree(sst2_records, folder)
  return folder


@pytest.fixture(scope="module")
def pretraining_shards(tmp_path_factory):
  return write_pretraining_shards(
      str(tmp_path_factory.mktemp("pretrain") / "data"))


@pytest.fixture
def shards(pretraining_shards, tmp_path):
  folder = str(tmp_path / "data")
  shutil.copytree(pretraining_shards, folder)
  return folder


def truncate(path):
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) * 2 // 3)


def flip(path, at=None):
  """Flips one bit in the middle of `path` (or at byte `at`)."""
  with open(path, "r+b") as f:
    f.seek(os.path.getsize(path) // 2 if at is None else at)
    byte = f.read(1)[0]
    f.seek(-1, os.SEEK_CUR)
    f.write(bytes([byte ^ 0x10]))


def damage(path, how):
  {"truncated": truncate, "flipped": flip}[how](path)


# Finding 5: the manifest was trusted blindly.


def test_edited_rows_are_refused_before_training(records):
  assert sst2_task(records).pipeline.num_rows("train") == 40    # control
  edit_manifest(records, lambda m: m["splits"]["train"].update(rows=400))
  # Before: the task built, and "1 epoch" was 100 steps.
  with pytest.raises(DataError, match=r"records/manifest.json: split 'train' "
                     r"lists rows=400, its shards' entries hold 40 records"):
    sst2_task(records)


def test_edited_rows_and_shard_counts_are_refused_by_counting(records):
  """Both counts edited consistently: the CRC pass counts the records."""
  def edit(m):
    m["splits"]["train"]["rows"] = 400
    m["splits"]["train"]["shards"][TRAIN]["records"] = 400
  edit_manifest(records, edit)
  with pytest.raises(DataError, match=f"{TRAIN}: holds 40 records, "
                     r".*manifest.json lists 400$"):
    FinetuningRecords(records)


def test_eval_shard_copied_over_the_train_shard_is_refused(records):
  shutil.copyfile(os.path.join(records, EVAL), os.path.join(records, TRAIN))
  # Before: the task built, and trained on the 872 eval rows.
  with pytest.raises(DataError, match=f"records/{TRAIN}: 193,538 bytes, "
                     f".*manifest.json lists 8,424; it holds the bytes of "
                     f"{EVAL}"):
    sst2_task(records)


def test_a_shard_of_the_same_size_but_other_rows_is_refused(records, tmp_path):
  """Another folder's train shard, of the same size (the same 40 rows
  encoded as another task would: labels swapped): its bytes differ."""
  other = str(tmp_path / "other.tfrecord")
  with tf.io.TFRecordWriter(other) as w:
    for raw in tf.data.TFRecordDataset(os.path.join(records, TRAIN)):
      example = tf.train.Example.FromString(raw.numpy())
      label = example.features.feature["label"].int64_list.value
      label[0] = 1 - label[0]
      w.write(example.SerializeToString())
  assert os.path.getsize(other) == os.path.getsize(os.path.join(records, TRAIN))
  shutil.copyfile(other, os.path.join(records, TRAIN))
  with pytest.raises(DataError, match=f"{TRAIN}: its first or last 65,536 "
                     r"bytes differ from .*manifest.json's fingerprint"):
    FinetuningRecords(records)


def test_manifests_without_fingerprints_still_load(records, monkeypatch):
  """A manifest written before fingerprints loads; within the full-check
  budget its shards are counted against `rows`, beyond it they are read as
  they are."""
  def strip(m):
    for s in m["splits"].values():
      del s["shards"]
  edit_manifest(records, strip)
  assert FinetuningRecords(records).read_arrays("train")["label"].shape == (40,)
  edit_manifest(records, lambda m: m["splits"]["train"].update(rows=400))
  with pytest.raises(DataError, match=r"split 'train' lists rows=400, its 1 "
                     r"shard\(s\) hold 40 records$"):
    FinetuningRecords(records)
  monkeypatch.setattr("bert.data.record_integrity.FULL_CHECK_BYTES", 0)
  assert FinetuningRecords(records).num_rows("train") == 400   # as before


def test_pretraining_manifest_fingerprints_and_older_manifests(shards):
  pattern = os.path.join(shards, "*.tfrecord")
  assert len(list_files(pattern)) == 2
  edit_manifest(shards, lambda m: m.pop("shards"))         # an older manifest
  assert len(list_files(pattern)) == 2
  edit_manifest(shards, lambda m: m["instances"].update(
      {"pretrain-00001-of-00002.tfrecord": 70}))
  with pytest.raises(DataError, match=r"pretrain-00001-of-00002.tfrecord: "
                     r"holds 7 records, .*manifest.json lists 70$"):
    list_files(pattern)


# Finding 4: damaged shards.


@pytest.mark.parametrize("how", ["truncated", "flipped"])
@pytest.mark.parametrize("shard", [TRAIN, EVAL])
def test_damaged_finetuning_shard_is_named_before_training(records, how, shard):
  damage(os.path.join(records, shard), how)
  # Before: the task built; reading the shard was a DataLossError naming
  # no file.
  with pytest.raises(DataError, match=f"records/{shard}: "):
    sst2_task(records)


@pytest.mark.parametrize("how", ["truncated", "flipped"])
@pytest.mark.parametrize("manifest", [True, False])
def test_damaged_pretraining_shard_is_named_before_training(shards, how,
                                                            manifest):
  """With the manifest: its size or fingerprint; without (the reference's
  `--output_file` shards): the CRC pass within the full-check budget."""
  if not manifest:
    os.remove(os.path.join(shards, "manifest.json"))
  damage(os.path.join(shards, "pretrain-00001-of-00002.tfrecord"), how)
  with pytest.raises(DataError, match=r"data/pretrain-00001-of-00002.tfrecord"
                     r": (truncated|.*damaged|its first)"):
    list_files(os.path.join(shards, "*.tfrecord"))


def test_damage_found_while_reading_finetuning_records(records, monkeypatch):
  """A flipped byte in the middle of a shard the start check does not read
  whole (beyond the budget: only its size and ends are checked): reading it
  names the file and record."""
  monkeypatch.setattr("bert.data.record_integrity.FULL_CHECK_BYTES", 0)
  flip(os.path.join(records, EVAL))          # 193 KB: its middle is unread
  task = sst2_task(records)                  # the start check passes
  with pytest.raises(DataError, match=f"records/{EVAL}: record 436 \\(byte "
                     r"\d+\) is damaged \(its checksum does not match"):
    task.pipeline.records.read_arrays("eval")
  # The trainer's pipeline raises DataLossError; the function it calls then:
  with pytest.raises(tf.errors.DataLossError) as raised:
    for _ in task.build_inputs(None, training=False):
      pass
  from bert.data.record_integrity import damaged_record_error  # pylint: disable=g-import-not-at-top
  error = damaged_record_error(
      task.pipeline.records.files("eval"), raised.value)
  assert isinstance(error, DataError)
  assert str(error).startswith(f"{records}/{EVAL}: record 436 (byte ")


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_damage_found_while_reading_pretraining_shards(shards, how,
                                                       monkeypatch):
  """Shards beyond the budget, no manifest (nothing is checked at start):
  the pipeline's DataLossError becomes a DataError naming the file."""
  monkeypatch.setattr("bert.data.record_integrity.FULL_CHECK_BYTES", 0)
  os.remove(os.path.join(shards, "manifest.json"))
  path = os.path.join(shards, "pretrain-00000-of-00002.tfrecord")
  damage(path, how)
  pattern = os.path.join(shards, "*.tfrecord")
  files = list_files(pattern)
  with pytest.raises(tf.errors.DataLossError) as raised:
    for _ in pretraining_dataset(pattern, 64, 20, 4, is_training=False):
      pass
  from bert.data.record_integrity import damaged_record_error  # pylint: disable=g-import-not-at-top
  error = damaged_record_error(files, raised.value)
  want = ("truncated: the file ends inside record " if how == "truncated"
          else "record 6 (byte ")
  assert str(error).startswith(f"{path}: {want}"), error


def test_a_clean_rereading_says_so_in_one_line(shards):
  files = list_files(os.path.join(shards, "*.tfrecord"))
  from bert.data.record_integrity import damaged_record_error  # pylint: disable=g-import-not-at-top
  error = damaged_record_error(
      files, tf.errors.DataLossError(None, None, "corrupted record at 12"))
  assert str(error) == (
      f"reading {files[0]}, {files[1]}: corrupted record at 12 (no file is "
      "damaged on a second reading: did a file change?)")
