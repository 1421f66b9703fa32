"""Length buckets: batches cut to a few fixed lengths give the losses,
gradients and predictions of full-length batches, and training batches hold
examples of one bucket, resuming at the right batch."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from bert.tasks import ClassificationTask, QuestionAnsweringTask
from bert.data.length_buckets import default_length_buckets
from bert.tasks.configs import (ClassificationData, FinetuningInputs,
                                HeadConfig, SquadData, TaggingData)
from bert.tasks.token_classification import TokenClassificationTask
from conftest import max_abs_diff, shared_data
from _tasks import NER_INPUTS, SEQ, encoder_source, ner_task

def test_default_buckets_and_bad_buckets_are_named():
  assert default_length_buckets(128) == (32, 64, 96, 128)
  assert default_length_buckets(384) == (32, 64, 96, 128, 192, 256, 320, 384)
  assert default_length_buckets(100) == (32, 64, 96, 100)
  assert default_length_buckets(1024)[-3:] == (768, 896, 1024)
  with pytest.raises(ValueError, match=r"FinetuningInputs.length_buckets "
                     r"must be increasing positive lengths ending at "
                     r"seq_length=128, got \(64, 32, 128\)"):
    TokenClassificationTask(
        data=TaggingData(), encoder=encoder_source(),
        inputs=FinetuningInputs(seq_length=SEQ, length_buckets=(64, 32, 128)))


def test_bucket_summary_counts_rows_and_saved_positions():
  from bert.data.length_buckets import bucket_summary
  mask = np.zeros((5, 128), np.int32)
  for i, n in enumerate([3, 40, 40, 100, 128]):
    mask[i, :n] = 1
  # Positions computed: 32 + 64 + 64 + 128 + 128 = 416 of 5 * 128 = 640.
  assert bucket_summary({"input_mask": mask}, (32, 64, 96, 128)) == (
      "length buckets (rows per length) 32: 1, 64: 2, 128: 2; 35% of the "
      "128-long positions are not computed; at most 3 traces/XLA compilations")


def test_training_batches_are_cut_grouped_and_resume(tmp_path):
  task = ner_task(tmp_path)
  lengths = task.features("train")["input_mask"].sum(1)
  assert lengths.min() <= 32 < lengths.max()        # several buckets in use
  batches = list(task.build_inputs(None, training=True).take(30))
  seen = set()
  for b in batches:
    width = b["input_word_ids"].shape[1]
    assert width in task.length_buckets
    assert b["input_word_ids"].shape[0] == 8
    for k in ("input_word_ids", "input_mask", "input_type_ids", "label_ids"):
      assert b[k].shape[1] == width
    rows = b["input_mask"].numpy().sum(1)
    # One bucket per batch: every row needs this width, none a smaller one.
    smaller = max([0] + [n for n in task.length_buckets if n < width])
    assert (rows <= width).all() and (rows > smaller).all(), (width, rows)
    seen.add(width)
  assert len(seen) >= 2
  resumed = list(task.build_inputs(None, training=True, start_step=7).take(5))
  for a, b in zip(batches[7:12], resumed):
    np.testing.assert_array_equal(a["input_word_ids"], b["input_word_ids"])


def test_cut_batches_give_full_length_losses_and_gradients(tmp_path):
  task = ner_task(tmp_path)
  full = ner_task(tmp_path,
                  inputs=dataclasses.replace(NER_INPUTS, length_buckets=(SEQ,)))
  model = task.build_model()
  data = task.features("eval")
  for cut_batch, full_batch in zip(
      task.build_inputs(None, training=False),
      full.build_inputs(None, training=False)):
    assert cut_batch["input_word_ids"].shape[1] < SEQ or \
        full_batch["input_mask"].numpy().sum(1).max() > 96
    results = []
    for t, batch in ((task, cut_batch), (full, full_batch)):
      with tf.GradientTape() as tape:
        outputs = model(t.model_inputs(batch), training=False)
        stats = t.compute_stats(batch, outputs)
        loss = stats["loss"][0] / stats["loss"][1]
      grads = tape.gradient(loss, model.trainable_variables)
      results.append((loss, [tf.convert_to_tensor(g) for g in grads
                             if g is not None],
                      t.eval_outputs(batch, outputs)["predicted"]))
    assert max_abs_diff(results[0][0], results[1][0]) <= 1e-5
    assert max(max_abs_diff(a, b) for a, b in zip(results[0][1], results[1][1])) <= 1e-5
    mask = full_batch["input_mask"].numpy() > 0
    np.testing.assert_array_equal(results[0][2].numpy()[mask],
                                  results[1][2].numpy()[mask])
  assert len(data["input_word_ids"]) >= 96


def test_cut_predictions_equal_full_length_ones(tmp_path):
  path = shared_data("squad", "dev-v1.1.json")
  data = SquadData(train_file=path, eval_file=path, train_fraction=0.96,
                   doc_stride=64, max_query_length=32)
  inputs = FinetuningInputs(seq_length=SEQ, eval_batch_size=16, seed=1)
  encoder = encoder_source()
  task = QuestionAnsweringTask(data=data, encoder=encoder, inputs=inputs)
  full = QuestionAnsweringTask(
      data=data, encoder=encoder,
      inputs=dataclasses.replace(inputs, length_buckets=(SEQ,)))
  task.examples("predict")
  model = task.build_model()
  cut, ref = task.model_outputs(model, "predict"), full.model_outputs(model, "predict")
  mask = task.features("predict")["input_mask"] > 0
  for k in ("start_logits", "end_logits"):
    assert cut[k].shape == ref[k].shape == mask.shape
    assert max_abs_diff(cut[k][mask], ref[k][mask]) <= 1e-5
  answers = task._answers("predict", task.features("predict")["feature_id"],
                          cut["start_logits"], cut["end_logits"])[0]
  answers_ref = full._answers("predict", full.features("predict")["feature_id"],
                              ref["start_logits"], ref["end_logits"])[0]
  # An untrained model scores many spans almost alike, so logits that agree
  # to 1e-5 may still order a near-tie differently; all else must agree.
  assert answers.keys() == answers_ref.keys()
  same = sum(answers[q] == answers_ref[q] for q in answers)
  assert same >= 0.98 * len(answers), (same, len(answers))


@pytest.mark.heavy
def test_classifier_with_and_without_buckets_agree(tmp_path):
  rows = ["text\tlabel"] + [
      " ".join(["word"] * n) + f"\t{'ab'[n % 2]}" for n in range(1, 120, 7)]
  (tmp_path / "d.tsv").write_text("\n".join(rows) + "\n")
  data = ClassificationData(train_file=str(tmp_path / "d.tsv"),
                            predict_file=str(tmp_path / "d.tsv"),
                            text_a_column="text", label_column="label",
                            labels=("a", "b"))
  batching = FinetuningInputs(seq_length=SEQ, eval_batch_size=4)
  encoder = encoder_source()
  task = ClassificationTask(data=data, encoder=encoder, inputs=batching)
  full = ClassificationTask(
      data=data, encoder=encoder,
      inputs=dataclasses.replace(batching, length_buckets=(SEQ,)))
  model = task.build_model()
  inputs = task.model_inputs(task.features("predict"))
  in_row_order = model({k: tf.constant(v) for k, v in inputs.items()})["logits"]
  assert len(in_row_order) == 17
  # Run in length order, cut to buckets, returned in row order.
  assert max_abs_diff(task.logits(model, "predict"), in_row_order) <= 1e-5
  assert max_abs_diff(full.logits(model, "predict"), in_row_order) <= 1e-5


@pytest.mark.heavy
def test_bucketed_training_with_xla_matches_plain_graph(tmp_path):
  # XLA compiles once per bucket length; the updates equal the plain graph's.
  from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
  weights = {}
  for xla in (False, True):
    # No dropout: XLA draws other random masks than the plain graph.
    task = ner_task(tmp_path, head=HeadConfig(dropout_rate=0.0),
                    encoder=encoder_source(hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0))
    model_dir = str(tmp_path / f"xla{xla}")
    run_experiment(task, model_dir, "train",
                   RuntimeConfig(train_steps=6, steps_per_loop=6,
                                 strategy="one_device", jit_compile=xla),
                   OptimizerConfig(learning_rate=1e-3, warmup_steps=1),
                   log_fn=None)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
    weights[xla] = {n: reader.get_tensor(n) for n, _ in
                    tf.train.list_variables(model_dir) if n.startswith("model/")}
  widths = {int(b["input_word_ids"].shape[1]) for b in
            ner_task(tmp_path).build_inputs(None, training=True).take(6)}
  assert len(widths) >= 2            # the 6 steps used several buckets
  assert max(max_abs_diff(weights[False][k], weights[True][k])
             for k in weights[False]) <= 1e-5
