"""Multiple choice: SWAG reader on a hand-written sample, model shapes,
training and prediction."""

import csv

import numpy as np
import pytest
import tensorflow as tf

from bert import BertEncoder
from bert.data import classification_data as cd
from bert.models import BertMultipleChoice
from bert.tasks import MultipleChoiceTask
from bert.tasks.configs import (EncoderSource, FinetuningInputs,
                                MultipleChoiceData, ScheduleConfig)
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from conftest import random_inputs, small_config, vocab

HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]
SAMPLE = [
    ["anetv_1", "5", "A man is sitting on a roof. He", "A man is sitting on a roof.",
     "He", "gold", "is using wrap to wrap a pair of skis.",
     "is ripping level tiles off.", "is holding a rubik's cube.",
     "starts pulling up roofing on a roof.", "3"],
    ["lsmdc_2", "18", 'Someone lifts "the" lid. Someone', 'Someone lifts "the" lid.',
     "Someone", "gen", "peers inside, eyes wide.", "sits down, smiling.",
     "runs, hitting the wall.", "laughs, then frowns.", "0"],
]


def write_csv(path, rows, header=HEADER):
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(rows)
  return str(path)


def test_swag_reader_on_a_hand_written_sample(tmp_path):
  examples = cd.read_swag(write_csv(tmp_path / "val.csv", SAMPLE))
  assert [e.label for e in examples] == [3, 0]
  assert examples[1].context == 'Someone lifts "the" lid.'
  assert examples[0].start == "He"
  assert examples[0].endings[3] == "starts pulling up roofing on a roof."
  test = cd.read_swag(write_csv(tmp_path / "test.csv", [r[:-1] for r in SAMPLE],
                                HEADER[:-1]))
  assert test[0].label is None


def test_swag_errors(tmp_path):
  bad = SAMPLE[0][:-1] + ["7"]
  with pytest.raises(cd.DataError, match=r"a.csv:2: label 7 is not in \[0, 4\)"):
    cd.read_swag(write_csv(tmp_path / "a.csv", [bad]))
  with pytest.raises(cd.DataError, match=r"b.csv:3: 10 column\(s\)"):
    cd.read_swag(write_csv(tmp_path / "b.csv", [SAMPLE[0], SAMPLE[1][:-1]]))
  with pytest.raises(cd.DataError, match=r"c.csv:1: header has no column 'ending3'"):
    cd.read_swag(write_csv(tmp_path / "c.csv", [r[:9] for r in SAMPLE], HEADER[:9]))


def test_model_scores_each_choice_independently():
  encoder = BertEncoder(small_config())
  model = BertMultipleChoice(encoder, dropout_rate=0.0)
  x = random_inputs(6, 12)
  grouped = {k: tf.reshape(v, [2, 3, 12]) for k, v in x.items()}
  logits = model(grouped)["logits"]
  assert logits.shape == (2, 3)
  # Same score as the choice row run alone through encoder + head.
  alone = model.get_layer("choice_score")(encoder(x)["pooled_output"])
  np.testing.assert_allclose(logits.numpy().reshape(-1), alone.numpy()[:, 0],
                             atol=1e-5)


@pytest.mark.heavy
def test_multiple_choice_learns_and_predicts(tmp_path):
  rng = np.random.RandomState(0)
  words = "the man walks to a car and opens the door slowly".split()

  def rows(n):
    out = []
    for i in range(n):
      label = rng.randint(4)
      endings = [" ".join(rng.choice(words, 4)) + (" yes" if j == label else " no")
                 for j in range(4)]
      out.append([f"v{i}", "0", "", " ".join(rng.choice(words, 6)), "He", "gold"]
                 + endings + [str(label)])
    return out

  task = MultipleChoiceTask(
      data=MultipleChoiceData(
          train_file=write_csv(tmp_path / "train.csv", rows(160)),
          eval_file=write_csv(tmp_path / "val.csv", rows(40)),
          predict_file=write_csv(tmp_path / "test.csv", rows(12))),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522, max_position_embeddings=32),
          vocab_file=vocab(), lower_case=True),
      inputs=FinetuningInputs(seq_length=24, global_batch_size=8),
      schedule=ScheduleConfig(num_train_epochs=4))
  _, results = run_experiment(task, str(tmp_path / "model"), "train_and_eval",
                           RuntimeConfig(steps_per_loop=20, strategy="one_device"),
                           OptimizerConfig(learning_rate=2e-3, warmup_fraction=0.1),
                           log_fn=None)
  assert results["accuracy"] > 0.9, results
  run_experiment(task, str(tmp_path / "model"), "predict",
                 RuntimeConfig(strategy="one_device"), log_fn=None)
  lines = open(tmp_path / "model" / "predictions.csv").read().splitlines()
  assert lines[0] == "id,p0,p1,p2,p3,prediction" and len(lines) == 13
  labels = [int(r[-1]) for r in csv.reader(open(tmp_path / "test.csv"))
            if r[0] != "video-id"]
  predicted = [int(l.split(",")[-1]) for l in lines[1:]]
  assert np.mean(np.array(labels) == np.array(predicted)) > 0.8
