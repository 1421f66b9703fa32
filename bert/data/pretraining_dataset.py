"""tf.data input pipeline for pre-training TFRecords.

Reads the google-research records (`bert-create-pretraining-data` or the
reference's own), shards by file across input pipelines (one per worker
under multi-worker strategies), interleaves files, shuffles, parses, renames
the features to the model's input names and batches per replica.
"""

from typing import Callable, List, Optional

import tensorflow as tf

from bert.data.pretraining_manifest import check_manifests
from bert.data.pretraining_records import feature_spec
from bert.validation import ConfigError

# Record feature name -> model input name (TF Hub BERT interface).
_RENAME = {
    "input_ids": "input_word_ids",
    "input_mask": "input_mask",
    "segment_ids": "input_type_ids",
    "masked_lm_positions": "masked_lm_positions",
    "masked_lm_ids": "masked_lm_ids",
    "masked_lm_weights": "masked_lm_weights",
    "next_sentence_labels": "next_sentence_labels",
}


def list_files(file_pattern: str) -> List[str]:
  """The files of comma-separated globs, each glob's matches sorted, checked
  before they are read (`check_manifests`): files beside a `manifest.json`
  that does not list them, or that differ from its fingerprints, are
  refused; damage found only while reading (a `tf.errors.DataLossError`)
  is named by `bert.data.record_integrity.damaged_record_error(files, e)`."""
  files = []
  for pattern in [p for p in file_pattern.split(",") if p]:
    matched = tf.io.gfile.glob(pattern)
    if not matched:
      raise FileNotFoundError(f"{pattern}: matches no TFRecord file")
    files += sorted(matched)
  check_manifests(files)
  return files


def pretraining_dataset(file_pattern: str, seq_length: int,
                        max_predictions_per_seq: int, global_batch_size: int,
                        is_training: bool = True,
                        input_context: Optional[tf.distribute.InputContext] = None,
                        seed: Optional[int] = None,
                        shuffle_buffer: int = 10_000,
                        cycle_length: int = 8,
                        skip_examples: int = 0,
                        masker: Optional[Callable] = None) -> tf.data.Dataset:
  """Batches of dict features: int32 ids/masks, float32 weights, and
  `source_file` (int32 index into `list_files(file_pattern)`).

  Args:
    file_pattern: glob(s), comma-separated.
    seq_length, max_predictions_per_seq: as the records were written.
    global_batch_size: batch over all replicas; each pipeline yields
      `input_context.get_per_replica_batch_size(global_batch_size)`.
    is_training: shuffle and repeat forever; otherwise one ordered pass.
    input_context: from `strategy.distribute_datasets_from_function`; files
      are split among its input pipelines.
    seed: makes file order and shuffling deterministic.
    skip_examples: drop this many records of this pipeline's (seeded) order
      before parsing: a resumed run continues with the batches the
      interrupted one had not consumed yet.
    masker: e.g. a `DynamicMasker`: called as masker(batch, batch_index) on
      each batch; the index counts on from the skipped examples, so a resumed
      run draws the same masks as an uninterrupted one.
  """
  files = list_files(file_pattern)
  batch_size = global_batch_size
  # (index in `files`, path): each example carries `source_file`, so a bad
  # batch (e.g. a NaN loss) can be traced to its files.
  ds = tf.data.Dataset.from_tensor_slices(
      (tf.range(len(files), dtype=tf.int32), files))
  if input_context is not None:
    if input_context.num_input_pipelines > len(files):
      raise ConfigError(
          f"{len(files)} file(s) for {input_context.num_input_pipelines} input "
          "pipelines: write at least one shard per worker (--num_shards)")
    ds = ds.shard(input_context.num_input_pipelines,
                  input_context.input_pipeline_id)
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
  if is_training:
    ds = ds.shuffle(len(files), seed=seed).repeat()
  ds = ds.interleave(lambda index, path: tf.data.TFRecordDataset(path).map(
                         lambda record: (index, record)),
                     cycle_length=min(cycle_length, len(files)),
                     num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=seed is not None or not is_training)
  if is_training:
    ds = ds.shuffle(shuffle_buffer, seed=seed)
  if skip_examples:
    ds = ds.skip(skip_examples)
  spec = feature_spec(seq_length, max_predictions_per_seq)

  def parse(index, record):
    example = tf.io.parse_single_example(record, spec)
    out = {"source_file": index}
    for name, value in example.items():
      if value.dtype == tf.int64:
        value = tf.cast(value, tf.int32)   # TPUs and our inputs want int32
      out[_RENAME[name]] = value
    return out

  ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
              deterministic=seed is not None or not is_training)
  ds = ds.batch(batch_size, drop_remainder=is_training)
  if masker is not None:
    ds = ds.enumerate(start=skip_examples // batch_size).map(
        lambda i, batch: masker(batch, i), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)
