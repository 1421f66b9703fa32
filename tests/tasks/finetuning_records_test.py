"""Fine-tuning from TFRecords (`bert-create-finetuning-data`,
`FinetuningInputs.records`) against the in-memory path on real MRPC rows:
the same rows, the same batches, the same weights and metrics."""

import dataclasses
import functools
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert.data.errors import DataError
from bert.data.finetuning_records import FinetuningRecords
from bert.tasks import ClassificationTask
from bert.tasks.configs import (ClassificationData, EncoderSource,
                                FinetuningInputs)
from bert.tasks.records_writer import create_finetuning_records
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from bert.validation import ConfigError
from conftest import minilm_dir, shared_data, small_config, vocab

INPUTS = FinetuningInputs(seq_length=128, global_batch_size=16,
                          eval_batch_size=32)
ROWS = 600


def mrpc_task(inputs=INPUTS, vocab_file=None, **data):
  return ClassificationTask(
      data=ClassificationData(glue_task="mrpc",
                              data_dir=shared_data("glue", "MRPC"), **data),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522,
                                   max_position_embeddings=128),
          vocab_file=vocab_file or vocab(),
          lower_case=True),
      inputs=inputs)


@pytest.fixture(scope="module")
def mrpc_records(tmp_path_factory):
  """MRPC train (first 600 rows) and dev as records in 4 shards, and the
  in-memory task they came from."""
  folder = str(tmp_path_factory.mktemp("records") / "mrpc")
  task = mrpc_task(max_train_examples=ROWS)
  create_finetuning_records(task, folder, ("train", "eval"), num_shards=4,
                            chunk_rows=250, log=lambda *_: None)
  task.features("train"), task.features("eval")     # the in-memory encoding
  return folder, task


def in_memory(encoded, **inputs):
  """The in-memory task with other inputs, sharing `encoded`'s encoding
  (which does not depend on them)."""
  task = mrpc_task(dataclasses.replace(INPUTS, **inputs),
                   max_train_examples=ROWS)
  task.pipeline._cache.update(encoded.pipeline._cache)  # pylint: disable=protected-access
  return task


def from_records(folder, **inputs):
  return mrpc_task(dataclasses.replace(INPUTS, records=folder, **inputs))


def batches(task, n, context=None):
  return [{k: v.numpy() for k, v in b.items()}
          for b in task.build_inputs(context, training=True).take(n)]


def assert_same_batches(got, want):
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.keys() == w.keys()
    for k in w:
      np.testing.assert_array_equal(g[k], w[k], err_msg=k)


def assert_same_runs(memory, records, tmp_path, steps=20):
  """`steps` training steps and an evaluation from each source: the same
  weights (<= 1e-6) and metrics; returns the metrics."""
  runtime = RuntimeConfig(train_steps=steps, steps_per_loop=steps,
                          strategy="one_device", seed=3)
  out = []
  for name, task in (("memory", memory), ("records", records)):
    model, result = run_experiment(task, str(tmp_path / name), "train_and_eval",
                                   runtime, OptimizerConfig(learning_rate=1e-3),
                                   log_fn=None)
    out.append((model, result))
  for a, b in zip(out[0][0].get_weights(), out[1][0].get_weights()):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
  assert set(out[0][1]) == set(out[1][1])
  for k in out[0][1]:
    assert out[1][1][k] == pytest.approx(out[0][1][k], abs=1e-6), k
  return [model for model, _ in out], out[0][1]


def test_records_hold_the_rows_in_order_and_lanes_deal_them(mrpc_records):
  folder, memory = mrpc_records
  records = FinetuningRecords(folder)
  want = memory.features("train")
  assert records.num_rows("train") == ROWS and records.num_rows("eval") == 408
  got = records.read_arrays("train")
  assert set(got) == set(want)
  for k in want:
    assert got[k].dtype == want[k].dtype
    np.testing.assert_array_equal(got[k], want[k], err_msg=k)
  # Lane j of 2 (shards j and j + 2 of 4) is rows j, j + 2, ...
  for lane in (0, 1):
    rows = list(records.lane("train", lane, 2).as_numpy_iterator())
    assert [int(r["example_row"]) for r in rows] == list(range(lane, ROWS, 2))
    np.testing.assert_array_equal(np.stack([r["input_word_ids"] for r in rows]),
                                  want["input_word_ids"][lane::2])
  with open(os.path.join(folder, "manifest.json")) as f:
    manifest = json.load(f)
  assert manifest["task"] == "ClassificationTask(glue_task=mrpc)"
  assert manifest["seq_length"] == 128 and manifest["do_lower_case"] is True
  assert manifest["splits"]["train"]["features"]["input_mask"] == dict(
      dtype="int32", shape=[128])


@pytest.mark.parametrize("inputs", [
    {},                                        # the whole split shuffled
    dict(shuffle_buffer=100),                  # a bounded buffer
    dict(lanes=2),                             # two lanes of 8 rows a step
    dict(shuffle_buffer=64, lanes=4, group_by_length=False)])
def test_first_20_batches_equal_the_in_memory_ones(mrpc_records, inputs):
  folder, encoded = mrpc_records
  memory = in_memory(encoded, **inputs)
  want = batches(memory, 20)
  assert_same_batches(batches(from_records(folder, **inputs), 20), want)
  # Negative control: another seed gives other batches.
  other = batches(from_records(folder, seed=7, **inputs), 1)
  assert not np.array_equal(other[0]["example_row"], want[0]["example_row"])
  # Every batch is cut to a bucket, and several buckets occur.
  assert len({b["input_word_ids"].shape[1] for b in want}) > 1 or (
      inputs.get("group_by_length") is False)


def test_resume_starts_at_the_batch_of_its_step(mrpc_records):
  folder, _ = mrpc_records
  task = from_records(folder, shuffle_buffer=100, lanes=2)
  later = [{k: v.numpy() for k, v in b.items()}
           for b in task.build_inputs(None, True, start_step=13).take(7)]
  assert_same_batches(later, batches(task, 20)[13:])


def test_two_pipelines_share_the_one_pipeline_global_batches(mrpc_records):
  """With lanes=2, input pipeline i of 2 (a worker) reads only lane i's
  shards, and its batches are its half of the 1-worker global batches."""
  folder, _ = mrpc_records
  task = from_records(folder, lanes=2)
  whole = batches(task, 10)
  halves = [batches(task, 10, tf.distribute.InputContext(2, i, 2))
            for i in range(2)]
  for step, want in enumerate(whole):
    for key in ("input_word_ids", "input_mask", "label", "example_row"):
      parts = []
      for half in halves:
        v = half[step][key]
        if v.ndim == 2 and key != "label":   # cut to its own bucket: pad back
          v = np.pad(v, [(0, 0), (0, want[key].shape[1] - v.shape[1])])
        parts.append(v)
      np.testing.assert_array_equal(np.concatenate(parts), want[key], err_msg=key)
  with pytest.raises(ConfigError, match="lanes=2 cannot be shared by 4"):
    batches(task, 1, tf.distribute.InputContext(4, 0, 4))
  with pytest.raises(DataError, match="4 shard.*3 input lanes"):
    batches(from_records(folder, lanes=3, global_batch_size=15), 1)


def test_20_steps_give_the_same_weights_and_eval(mrpc_records, tmp_path):
  folder, _ = mrpc_records
  buckets = dict(length_buckets=(64, 128))      # two traces per run
  memory, records = in_memory(mrpc_records[1], **buckets), from_records(
      folder, **buckets)
  models, _ = assert_same_runs(memory, records, tmp_path)
  np.testing.assert_allclose(records.logits(models[1], "eval"),   # streamed
                             memory.logits(models[0], "eval"), rtol=0, atol=1e-5)


def test_records_of_another_encoding_are_refused(mrpc_records, tmp_path):
  folder, _ = mrpc_records
  with pytest.raises(DataError, match="seq_length=128.*seq_length=64"):
    mrpc_task(dataclasses.replace(INPUTS, records=folder, seq_length=64))
  other_vocab = tmp_path / "vocab.txt"
  with open(vocab()) as f:
    other_vocab.write_text(f.read().replace("[unused0]", "[unused00]"))
  with pytest.raises(DataError, match=f"vocab .*vocab.txt, which differs from "
                     f".*{other_vocab}"):
    mrpc_task(dataclasses.replace(INPUTS, records=folder),
              vocab_file=str(other_vocab))
  with pytest.raises(DataError, match=r"manifest.json: missing"):
    mrpc_task(dataclasses.replace(INPUTS, records=str(tmp_path)))
  with pytest.raises(DataError, match="no 'predict' split"):
    from_records(folder).logits(None, "predict")


def test_an_existing_folder_is_kept_unless_overwrite(mrpc_records, tmp_path):
  folder, task = mrpc_records
  with pytest.raises(FileExistsError, match="refusing to replace"):
    create_finetuning_records(task, folder, ("eval",), log=lambda *_: None)
  assert FinetuningRecords(folder).num_rows("train") == ROWS   # untouched
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / "notes.txt").write_text("keep me")
  with pytest.raises(FileExistsError):
    create_finetuning_records(task, str(tmp_path / "mine"), ("eval",),
                              overwrite=True, log=lambda *_: None)
  assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_cli_writes_what_the_task_encodes(tmp_path):
  """bert-create-finetuning-data names the task as bert-train does (--task,
  --init_checkpoint, --data_dir, --gin_param) and writes its rows."""
  import subprocess
  import sys
  exe = os.path.join(os.path.dirname(sys.executable),
                     "bert-create-finetuning-data")
  out = tmp_path / "mrpc"
  result = subprocess.run(
      [exe, "--task=glue_mrpc", f"--init_checkpoint={minilm_dir()}",
       f"--data_dir={shared_data('glue', 'MRPC')}", f"--output_dir={out}",
       "--gin_param=ClassificationData.max_train_examples=40",
       "--gin_param=FinetuningInputs.seq_length=64", "--splits=train",
       "--num_shards=2"], capture_output=True, text=True, timeout=300,
      check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "train 40 rows" in result.stdout
  task = ClassificationTask(
      data=ClassificationData(glue_task="mrpc", max_train_examples=40,
                              data_dir=shared_data("glue", "MRPC")),
      encoder=EncoderSource(init_checkpoint=minilm_dir()),
      inputs=FinetuningInputs(seq_length=64, records=str(out)))
  got = task.features("train")
  task.pipeline.records = None
  task.pipeline._cache.clear()  # pylint: disable=protected-access
  for k, v in task.features("train").items():
    np.testing.assert_array_equal(got[k], v, err_msg=k)


def squad_task(path, records=None):
  """A SQuAD task on the questions of `path` (module level: the processes
  of a parallel write build it too)."""
  from bert.tasks import QuestionAnsweringTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import SquadData  # pylint: disable=g-import-not-at-top
  return QuestionAnsweringTask(
      data=SquadData(train_file=path, eval_file=path, train_fraction=0.5,
                     doc_stride=64, max_query_length=32),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522,
                                   max_position_embeddings=128),
          vocab_file=vocab(),
          lower_case=True),
      inputs=FinetuningInputs(seq_length=128, global_batch_size=8,
                              eval_batch_size=32, seed=1, records=records,
                              length_buckets=(64, 128)))


@pytest.mark.subprocess   # num_processes=2: a pool of worker processes
def test_squad_windows_from_records_train_and_answer_as_in_memory(tmp_path):
  """SQuAD: the windows, their post-processing data (read back from the
  records' side features), 20 steps' weights and the EM/F1 of evaluation
  equal the in-memory run's."""
  from bert.data import squad_examples  # pylint: disable=g-import-not-at-top
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    dev = json.load(f)
  # Two articles, their first 8 paragraphs.
  dev["data"] = [dict(a, paragraphs=a["paragraphs"][:8]) for a in dev["data"][:2]]
  path = tmp_path / "squad.json"
  path.write_text(json.dumps(dev))

  memory = squad_task(str(path))
  folder = str(tmp_path / "records")
  create_finetuning_records(memory, folder, ("train", "eval"), num_shards=3,
                            chunk_rows=10, log=lambda *_: None)
  # Two processes, each encoding every other chunk of 10 questions, write the
  # same records (feature_id, the window's index, is set when merging).
  create_finetuning_records(memory, str(tmp_path / "two"), ("eval",),
                            num_shards=3, chunk_rows=10, log=lambda *_: None,
                            num_processes=2,
                            task_factory=functools.partial(squad_task, str(path)))
  one, two = FinetuningRecords(folder), FinetuningRecords(str(tmp_path / "two"))
  assert one.manifest["splits"]["eval"] == two.manifest["splits"]["eval"]
  for split in ("eval",):
    keys = list(one.manifest["splits"][split]["features"])
    for lane in range(3):                  # shard by shard: the same rows
      a = list(one.lane(split, lane, 3, keys=keys).as_numpy_iterator())
      b = list(two.lane(split, lane, 3, keys=keys).as_numpy_iterator())
      assert len(a) == len(b) > 0
      for x, y in zip(a, b):
        for k in x:
          np.testing.assert_array_equal(x[k], y[k], err_msg=f"{split} {k}")
  records = squad_task(str(path), folder)
  assert records.meta("eval") == memory.meta("eval")
  assert records.row_origins("eval") == memory.row_origins("eval")
  assert set(FinetuningRecords(folder).feature_names("train")) == set(
      memory.features("train"))                      # side features not streamed
  assert_same_batches(batches(records, 20), batches(memory, 20))
  _, result = assert_same_runs(memory, records, tmp_path)
  assert result["f1"] > 0
  assert squad_examples.META_FEATURES == tuple(
      FinetuningRecords(folder).manifest["splits"]["eval"]["side"])


def test_ner_from_records_trains_and_tags_as_in_memory(tmp_path):
  """WNUT-17 (the first 240 training and 160 dev sentences): the same first
  20 batches, weights after 20 steps and entity F1 as the in-memory run;
  word alignment comes from the records."""
  from bert.tasks import TokenClassificationTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import TaggingData  # pylint: disable=g-import-not-at-top

  def head(name, n):
    with open(shared_data("ner", "wnut17", name), encoding="utf-8") as f:
      blocks = f.read().split("\n\n")[:n]
    path = tmp_path / name
    path.write_text("\n\n".join(blocks) + "\n")
    return str(path)

  train, dev = head("wnut17train.conll", 240), head("emerging.dev.conll", 160)

  def ner(records=None):
    return TokenClassificationTask(
        data=TaggingData(train_file=train, eval_file=dev),
        encoder=EncoderSource(
            bert_config=small_config(vocab_size=30522,
                                     max_position_embeddings=64),
            vocab_file=vocab(),
            lower_case=True),
        inputs=FinetuningInputs(seq_length=64, global_batch_size=8,
                                eval_batch_size=32, seed=2, records=records,
                                length_buckets=(32, 64)))

  memory = ner()
  folder = str(tmp_path / "records")
  create_finetuning_records(memory, folder, ("train", "eval"), num_shards=2,
                            log=lambda *_: None)
  records = ner(folder)
  assert records.row_origins("eval") == memory.row_origins("eval")
  assert_same_batches(batches(records, 20), batches(memory, 20))
  assert_same_runs(memory, records, tmp_path)
  # Word predictions of an untrained model (so tags other than O occur)
  # through each source's word alignment: the same tags.
  from bert.data import ner_data  # pylint: disable=g-import-not-at-top
  model = memory.build_model()
  tags = [ner_data.word_predictions(t.sentences("eval"), t.features("eval"),
                                    t.logits(model, "eval").argmax(-1), t.labels)
          for t in (memory, records)]
  assert tags[0] == tags[1]
  assert sum(tag != "O" for sentence in tags[0] for tag in sentence) > 10
  # Records of another label list are refused.
  with pytest.raises(DataError, match="written by task TokenClassificationTask"):
    TokenClassificationTask(
        data=TaggingData(train_file=train, eval_file=dev,
                         labels=("O", "B-person", "I-person")),
        encoder=memory_encoder(), inputs=FinetuningInputs(seq_length=64,
                                                          records=folder))


def memory_encoder():
  return EncoderSource(
      bert_config=small_config(vocab_size=30522, max_position_embeddings=64),
      vocab_file=vocab(), lower_case=True)


def test_multiple_choice_records_hold_the_in_memory_rows(tmp_path):
  """SWAG-style rows ([choices, seq] per example), written in chunks of 3
  examples over 2 shards: the in-memory rows, and batches cut alike."""
  import csv  # pylint: disable=g-import-not-at-top
  from bert.tasks import MultipleChoiceTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import MultipleChoiceData  # pylint: disable=g-import-not-at-top
  path = tmp_path / "swag.csv"
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["video-id", "fold-ind", "startphrase", "sent1", "sent2",
                "gold-source", "ending0", "ending1", "ending2", "ending3",
                "label"])
    examples = cd_mrpc_pairs(10)
    for i, (a, b) in enumerate(examples):
      endings = [b] + [examples[(i + j) % 10][1] for j in (3, 5, 7)]
      w.writerow([f"v{i}", "0", a, a, "", "gold", *endings, "0"])

  def swag(records=None):
    return MultipleChoiceTask(
        data=MultipleChoiceData(train_file=str(path), eval_file=str(path)),
        encoder=memory_encoder(),
        inputs=FinetuningInputs(seq_length=64, global_batch_size=4,
                                records=records))

  memory = swag()
  folder = str(tmp_path / "records")
  create_finetuning_records(memory, folder, ("train",), num_shards=2,
                            chunk_rows=3, log=lambda *_: None)
  records = swag(folder)
  got, want = records.features("train"), memory.features("train")
  assert got["input_word_ids"].shape == (10, 4, 64)
  for k in want:
    np.testing.assert_array_equal(got[k], want[k], err_msg=k)
  assert_same_batches(batches(records, 5), batches(memory, 5))


def cd_mrpc_pairs(n):
  from bert.data import classification_data as cd  # pylint: disable=g-import-not-at-top
  return [(e.text_a, e.text_b) for e in cd.read_glue(
      "mrpc", shared_data("glue", "MRPC", "train.tsv"))[:n]]
