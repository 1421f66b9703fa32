"""EmbeddingTask (`bert-train --task=embedding`): its records, its training
equal to `BertTextEmbedder.fit` step by step, its evaluation equal to
`BertTextEmbedder.evaluate`, and its one-line errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tf_keras

from bert import checkpoints
from bert.data.errors import DataError
from bert.data.finetuning_records import FinetuningRecords
from bert.models import BertTextEmbedder, TextEmbedderPreprocessor
from bert.models.embedding_objective import default_recipe
from bert.networks.bert_encoder import BertEncoder
from bert.tasks import EmbeddingTask, build_task
from bert.tasks.configs import (EmbedderConfig, EmbeddingData, EncoderSource,
                                FinetuningInputs)
from bert.tasks.records_writer import create_finetuning_records
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from bert.validation import ConfigError
from conftest import (REPO_ROOT, minilm_dir, one_line, run_command,
                      small_config, vocab)
from training._runs import losses as logged_losses
import harness

SEQ = 64
BUCKETS = (16, 32, SEQ)
WORDS = ("the movie was a story of people and places with some music and "
         "long scenes in paris").split()


def st_folder(folder, dropout=0.1):
  """A sentence-transformers folder around a tiny random encoder (MiniLM's
  vocab): mean pooling, then L2 normalisation, as all-MiniLM-L6-v2."""
  folder = str(folder)
  if os.path.exists(os.path.join(folder, "modules.json")):
    return folder
  encoder = BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=SEQ,
      hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))
  checkpoints.save(encoder, folder, format="hf", vocab_file=vocab(),
                   lower_case=True)
  modules = [("", "Transformer"), ("1_Pooling", "Pooling"),
             ("2_Normalize", "Normalize")]
  with open(os.path.join(folder, "modules.json"), "w") as f:
    json.dump([dict(idx=i, name=str(i), path=path,
                    type=f"sentence_transformers.models.{kind}")
               for i, (path, kind) in enumerate(modules)], f)
  os.makedirs(os.path.join(folder, "1_Pooling"))
  with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
    json.dump(dict(word_embedding_dimension=64,
                   pooling_mode_mean_tokens=True), f)
  with open(os.path.join(folder, "sentence_bert_config.json"), "w") as f:
    json.dump(dict(max_seq_length=SEQ), f)
  return folder


def write_pairs(path, n, seed, documents=None):
  """(anchor, positive) rows: the positives are `documents` texts (n:
  each row its own; fewer: rows share them, as SQuAD's questions share
  paragraphs) of 1 to 40 words and a topic number, each anchor its
  document's topic number and a word; so each column's batches fall into
  several buckets."""
  rng = np.random.RandomState(seed)
  docs = [" ".join(rng.choice(WORDS, rng.randint(1, 40) if rng.rand() < 0.2
                              else rng.randint(1, 10))) + f" topic {j}"
          for j in range(documents or n)]
  with open(path, "w", encoding="utf-8") as f:
    for i in range(n):
      j = i % len(docs)
      f.write(json.dumps(dict(anchor=f"topic {j} {rng.choice(WORDS)}",
                              positive=docs[j])) + "\n")
  return str(path)


def write_scored(path, n, seed):
  """(text_a, text_b, score) rows: the score is the share of text_a's
  words that text_b repeats (0 to 5)."""
  rng = np.random.RandomState(seed)
  rows = ["text_a\ttext_b\tscore"]
  for _ in range(n):
    a = list(rng.choice(WORDS, 6))
    kept = rng.randint(0, 7)
    b = a[:kept] + list(rng.choice(WORDS, rng.randint(0, 20)))
    rows.append(f"{' '.join(a)}\t{' '.join(b)}\t{5 * kept / 6:.3f}")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(rows) + "\n")
  return str(path)


def make_task(tmp_path, scored=False, loss="auto", batch=8, records=None,
              dropout=0.1, **data):
  folder = st_folder(tmp_path / f"st{dropout}", dropout)
  if scored:
    files = dict(train_file=write_scored(tmp_path / "train.tsv", 64, 0),
                 eval_file=write_scored(tmp_path / "eval.tsv", 40, 1),
                 text_columns=("text_a", "text_b"), score_column="score")
  else:
    files = dict(train_file=write_pairs(tmp_path / "train.jsonl", 64, 0),
                 eval_file=write_pairs(tmp_path / "eval.jsonl", 40, 1,
                                       documents=25))
  files.update(data)
  return EmbeddingTask(
      data=EmbeddingData(**files),
      encoder=EncoderSource(init_checkpoint=folder),
      inputs=FinetuningInputs(seq_length=SEQ, length_buckets=BUCKETS,
                              global_batch_size=batch, eval_batch_size=16,
                              records=records),
      embedder=EmbedderConfig(loss=loss))


def _runtime(steps, every=None, strategy="one_device", seed=5):
  return RuntimeConfig(train_steps=steps, steps_per_loop=every or steps,
                       checkpoint_interval=steps, strategy=strategy, seed=seed)


# ------------------------------------------------------------------ configs
@pytest.mark.usefixtures("clean_gin")
def test_the_squad_config_is_sentence_transformers_recipe_on_minilm():
  """configs/embedding_squad.gin (with embedding.gin) on all-MiniLM-L6-v2:
  the checkpoint's pooling and normalisation, its max_seq_length, the
  ranking loss over (question, paragraph), and sentence-transformers'
  optimizer recipe (`BertTextEmbedder.compile()`'s)."""
  import gin  # pylint: disable=g-import-not-at-top
  configs = os.path.join(REPO_ROOT, "configs")
  gin.add_config_file_search_path(configs)
  gin.parse_config_files_and_bindings(
      [os.path.join(configs, "embedding_squad.gin")],
      [f"INIT_CHECKPOINT = '{minilm_dir()}'", "DATA_DIR = '/data'"])
  task = build_task()
  assert isinstance(task, EmbeddingTask)
  assert (task.loss, task.seq_length, task.global_batch_size) == (
      "ranking", 256, 32)
  assert task.files["train"] == "/data/squad_train.jsonl"
  assert task.data.text_columns == ("question", "paragraph")
  assert OptimizerConfig() == default_recipe()
  model = task.build_model()
  assert (model.pooling, model.normalize, model.dim) == (["mean"], True, 384)


# ------------------------------------------------------------------ records
def test_records_hold_what_the_task_encodes(tmp_path):
  """bert-create-finetuning-data's records of the task are its in-memory
  rows (each column, the document ids), and stream the same batches; a
  task reading other columns refuses them."""
  task = make_task(tmp_path)
  folder = str(tmp_path / "records")
  create_finetuning_records(task, folder, ("train", "eval"), num_shards=2,
                            log=lambda *_: None)
  records = FinetuningRecords(folder)
  assert records.task == "EmbeddingTask(text_columns=anchor,positive)"
  memory = task.features("train")
  assert set(memory) == {f"text_{i}/{k}" for i in range(2) for k in (
      "input_word_ids", "input_mask", "input_type_ids")} | {"document_id"}
  streamed = make_task(tmp_path, records=folder)
  for k, v in memory.items():
    np.testing.assert_array_equal(streamed.features("train")[k], v, err_msg=k)
  lengths = set()
  for a, b in zip(task.build_inputs(None, training=True).take(6),
                  streamed.build_inputs(None, training=True).take(6)):
    assert a.keys() == b.keys()
    for k in a:
      np.testing.assert_array_equal(a[k].numpy(), b[k].numpy(), err_msg=k)
    # Each column cut to the bucket of its own longest row.
    cut = tuple(a[f"text_{i}/input_mask"].shape[1] for i in range(2))
    longest = [int(a[f"text_{i}/input_mask"].numpy().sum(-1).max())
               for i in range(2)]
    assert cut == tuple(min(b for b in BUCKETS if b >= n) for n in longest)
    lengths.add(cut)
  assert len(lengths) > 1 and any(q != p for q, p in lengths), lengths
  # Document ids: each row's positive among the split's distinct ones.
  ids = memory["document_id"]
  positives = task.read_columns("train").texts[1]
  assert all((ids[i] == ids[j]) == (positives[i] == positives[j])
             for i in range(8) for j in range(8))
  with pytest.raises(DataError, match="written by task EmbeddingTask"
                     r"\(text_columns=anchor,positive\), read by "
                     r"EmbeddingTask\(text_columns=positive,anchor\)"):
    make_task(tmp_path, records=folder, text_columns=("positive", "anchor"))


# ----------------------------------------------------------------- training
@pytest.mark.heavy
def test_bert_train_lowers_the_loss_and_evaluates(tmp_path):
  task = make_task(tmp_path, batch=16)
  lines = []
  model_dir = str(tmp_path / "run")
  _, results = run_experiment(
      task, model_dir, "train", _runtime(32, every=8),
      OptimizerConfig(learning_rate=1e-3, warmup_fraction=0.0,
                      weight_decay=0.0, epsilon=1e-8),
      log_fn=lines.append)
  loop_losses = [float(l.split("| loss ")[1].split(" ")[0])
                 for l in lines if l.startswith("step ")]
  assert len(loop_losses) == 4, lines
  assert loop_losses[-1] < 0.5 * loop_losses[0], loop_losses
  # --mode=eval: the loss, and retrieval of the eval split's 25 distinct
  # documents by its 40 queries, as `evaluate` computes it on the raw texts.
  model, evaluated = run_experiment(task, model_dir, "eval",
                                    RuntimeConfig(strategy="one_device"),
                                    log_fn=None)
  rows = task.read_columns("eval")
  assert len(set(rows.texts[1])) == 25
  expected = model.evaluate(tuple(rows.texts))
  assert {"recall@1", "recall@5", "recall@10", "mrr@10",
          "ndcg@10"} <= set(expected)
  assert set(evaluated) == set(expected) | {"loss", "accuracy"}
  for name, value in expected.items():
    assert evaluated[name] == pytest.approx(value, abs=1e-6), name
  untrained = BertTextEmbedder.from_pretrained(task.source).evaluate(
      tuple(rows.texts))
  print("eval MRR@10 untrained, trained:", untrained["mrr@10"],
        evaluated["mrr@10"])
  assert evaluated["mrr@10"] > untrained["mrr@10"] + 0.1, evaluated


# Slow (the default suite's time): the harness' resume check, as every task's.
@pytest.mark.slow
def test_a_resumed_run_lands_on_the_uninterrupted_runs_weights(tmp_path):
  """tests/harness.py `check_resume`: the random batches restart at the
  checkpoint's step (lanes, `start_step`), with the dropout masks. (The
  harness' stats check does not apply: in-batch negatives make a batch's
  loss no sum of its halves'.)"""
  harness.check_resume(lambda: make_task(tmp_path), tmp_path / "runs")


def _fit_raw(folder, task, steps, seed, shuffle=True):
  """`fit` on the raw columns of the task's train file, as a user runs it:
  from_pretrained, compile() (sentence-transformers' recipe), one step an
  epoch so the history holds each step's loss."""
  tf_keras.utils.set_random_seed(seed)
  model = BertTextEmbedder.from_pretrained(folder, seq_length=SEQ)
  model.attach_preprocessor(TextEmbedderPreprocessor.from_config(
      dict(model.preprocessor.get_config(), length_buckets=BUCKETS)))
  model.compile(loss=task.embedder.loss)
  rows = task.read_columns("train")
  history = model.fit(tuple(rows.texts), rows.scores, batch_size=8,
                      epochs=steps, steps_per_epoch=1, shuffle=shuffle,
                      verbose=0)
  return model, history.history["loss"]


def _parity(got, expected, rtol=1e-5, atol=1e-6):
  """The largest |difference| of a weight over (rtol times its largest
  |value| + atol), as tests/harness.py `check_fit_parity` measures it:
  <= 1 is one run within float noise (which Adam's small epsilon turns
  into updates of near-zero weights, e.g. zero-initialised biases)."""
  assert len(got) == len(expected)
  return max(float(np.max(np.abs(g - e)) / (rtol * np.max(np.abs(e)) + atol))
             for g, e in zip(got, expected))


@pytest.mark.heavy
@pytest.mark.parametrize("scored", [
    False, pytest.param(True, marks=pytest.mark.slow)], ids=["ranking", "cosent"])
def test_fit_and_bert_train_take_the_same_steps(tmp_path, scored):
  """At one seed, with dropout, random batches and columns cut to their
  own buckets: `fit` on the file's raw texts and `bert-train` on the task
  draw the same batches and dropout masks and compute the same loss at
  every step (`loss_stats`, one definition), so they end on the same
  weights. Another data order (shuffle=False) ends elsewhere (checked
  once: the data order is the loss's business of neither)."""
  steps = 8
  task = make_task(tmp_path, scored=scored)
  assert task.loss == ("cosent" if scored else "ranking")
  model_dir = str(tmp_path / "run")
  loop_model, _ = run_experiment(task, model_dir, "train",
                                 _runtime(steps, every=1), default_recipe(),
                                 log_fn=None)
  loop = logged_losses(model_dir)
  assert sorted(loop) == list(range(1, steps + 1))
  model, fitted = _fit_raw(task.source, task, steps, seed=5)
  assert int(model.optimizer.iterations.numpy()) == steps
  print("per-step losses, fit vs bert-train:",
        [f"{a:.6f}/{loop[i + 1]:.6f}" for i, a in enumerate(fitted)])
  np.testing.assert_allclose(fitted, [loop[i + 1] for i in range(steps)],
                             rtol=1e-5)
  assert len(set(np.round(fitted, 4))) > 1         # the steps differ
  parity = _parity(model.get_weights(), loop_model.get_weights())
  print(f"fit vs bert-train after {steps} steps with dropout: {parity:.3g} "
        "of the tolerance")
  assert parity <= 1
  if not scored:
    other, _ = _fit_raw(task.source, task, steps, seed=5, shuffle=False)
    assert _parity(other.get_weights(), loop_model.get_weights()) > 100


# --------------------------------------------------------------- evaluation
# Slow (the default suite's time): the retrieval side of the same equality
# runs in test_bert_train_lowers_the_loss_and_evaluates.
@pytest.mark.slow
def test_sts_eval_metrics_are_evaluates(tmp_path):
  """With scores, `bert-train`'s evaluation (each column of the eval split
  embedded in row-order batches) gives the STS correlations
  `BertTextEmbedder.evaluate` gives on the file's raw texts (retrieval:
  test_bert_train_lowers_the_loss_and_evaluates)."""
  task = make_task(tmp_path, scored=True)
  model, results = run_experiment(task, str(tmp_path / "run"),
                                  "train_and_eval", _runtime(2),
                                  default_recipe(), log_fn=None)
  rows = task.read_columns("eval")
  expected = model.evaluate(tuple(rows.texts), rows.scores)
  assert set(expected) == {"pearson", "spearman"}
  assert set(results) == {"loss", "pearson", "spearman"}
  for name, value in expected.items():
    assert results[name] == pytest.approx(value, abs=1e-6), name


# ------------------------------------------------------------------- errors
BAD_FILES = [
    ("train.jsonl", '{"anchor": "a", "positive": "b"}\n{"anchor": "a"\n',
     ":2: not valid JSON"),
    ("train.jsonl", '{"anchor": "a", "positive": "b"}\n{"anchor": "a"}\n',
     ":2: no field 'positive'"),
    ("train.jsonl", '{"anchor": "a", "positive": null}\n',
     ":1: field 'positive' must be a string, got null"),
    ("train.jsonl", '[1, 2]\n', ":1: expected a JSON object per line"),
    ("train.tsv", "anchor\tpositive\na\tb\nc\n",
     ":3: 1 column(s), the header has 2"),
    ("train.tsv", "anchor\tdocument\na\tb\n",
     ":1: header ['anchor', 'document'] has no column 'positive'"),
    ("train.txt.gz", "x", ": unknown extension '.gz'"),
    ("train.jsonl", "\n\n", ": no examples"),
]


@pytest.mark.parametrize("name,text,fragment", BAD_FILES,
                         ids=[c[2].strip(":0123456789 ") for c in BAD_FILES])
def test_bad_lines_are_one_line_errors_naming_file_and_line(
    tmp_path, name, text, fragment):
  (tmp_path / "bad").mkdir()
  path = tmp_path / "bad" / name
  path.write_text(text, encoding="utf-8")
  task = make_task(tmp_path, train_file=str(path))
  with pytest.raises(DataError) as info:
    task.features("train")
  one_line(info, str(path) + fragment)


@pytest.mark.parametrize("value,shown", [("x", "'x'"), ("nan", "'nan'"),
                                         ("", "''")])
def test_a_bad_score_names_file_line_and_value(tmp_path, value, shown):
  path = tmp_path / "bad.tsv"
  path.write_text(f"text_a\ttext_b\tscore\na\tb\t1\nc\td\t{value}\n")
  task = make_task(tmp_path, scored=True, train_file=str(path))
  with pytest.raises(DataError) as info:
    task.features("train")
  one_line(info, f"{path}:3: score 'score' must be a finite number, got "
           f"{shown}")
  path = tmp_path / "bad.jsonl"
  path.write_text('{"text_a": "a", "text_b": "b", "score": true}\n')
  task = make_task(tmp_path, scored=True, train_file=str(path))
  with pytest.raises(DataError, match=r"bad.jsonl:1: score 'score' must be "
                     "a finite number, got True$"):
    task.features("train")


def test_bad_settings_are_named(tmp_path):
  with pytest.raises(ConfigError, match=r"^EmbeddingTask: EmbedderConfig: "
                     r"loss='cosent' takes \(a, b\) pairs with scores; "
                     r"EmbeddingData has text_columns=\['anchor', "
                     r"'positive'\] and score_column=None"):
    make_task(tmp_path, loss="cosent")
  with pytest.raises(ConfigError, match="loss='triplet' takes .anchor, "
                     "positive, negative. triplets"):
    make_task(tmp_path, loss="triplet")
  with pytest.raises(ConfigError, match="EmbeddingData.score_column='score' "
                     "scores .a, b. pairs"):
    EmbeddingData(text_columns=("a", "b", "c"), score_column="score")
  with pytest.raises(ConfigError, match="EmbeddingData.text_columns must name "
                     "2 or more distinct columns"):
    EmbeddingData(text_columns=("a",))
  with pytest.raises(ConfigError, match=r"^EmbedderConfig.pooling: pooling="):
    EmbedderConfig(pooling="median")
  # (gin adds the configurable's name on a line of its own; the commands
  # print the first line.)
  with pytest.raises(ConfigError, match=r"^EmbeddingTask: a random encoder "
                     r"\(EncoderSource.bert_config\) has no sentence-"
                     "transformers modules.json to say how to pool; set "
                     "EmbedderConfig.pooling = 'mean'"):
    EmbeddingTask(data=EmbeddingData(train_file="t.jsonl"),
                  encoder=EncoderSource(bert_config=small_config(
                      vocab_size=30522, max_position_embeddings=SEQ),
                      vocab_file=vocab(), lower_case=True),
                  inputs=FinetuningInputs(seq_length=SEQ))
  task = make_task(tmp_path)
  with pytest.raises(ConfigError, match="EmbeddingTask has no predict mode"):
    task.predict(None, str(tmp_path))


# ------------------------------------------------------------- distribution
MIRRORED = """
import pathlib, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path[:0] = sys.argv[2:]
import embedding_task_test as t
from bert.models.embedding_objective import default_recipe
from bert.training import run_experiment, setup
from training._runs import losses
tmp = pathlib.Path(sys.argv[1])
got = {}
for replicas in (1, 2):
  runtime = t._runtime(3, every=1)
  strategy = setup(runtime, log_fn=None)
  if replicas == 2:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  task = t.make_task(tmp, dropout=0.0, batch=8)
  folder = str(tmp / f"run{replicas}")
  model, _ = run_experiment(task, folder, "train", runtime, default_recipe(),
                            log_fn=None, strategy=strategy)
  got[replicas] = (model.get_weights(), losses(folder))
print("losses", got[1][1], got[2][1])
print("parity", t._parity(got[2][0], got[1][0]))
assert sorted(got[2][1]) == [1, 2, 3]
for step, loss in got[1][1].items():
  assert abs(got[2][1][step] - loss) <= 1e-5 * loss, (
      step, got[1][1], got[2][1])
# Adam's epsilon of 1e-8 turns the float noise of a near-zero gradient
# (the order of the replicas' sum) into update noise: atol is a tenth of
# the peak learning rate (5e-5), below the ~lr that a different batch, mask
# or loss moves every weight by.
assert t._parity(got[2][0], got[1][0], atol=5e-6) <= 1
print("mirrored ok")
"""


# Slow: tests/embedding_losses_test.py proves 2 replicas = 1 on the losses in
# the default suite; this runs the whole task on them.
@pytest.mark.slow
def test_two_replicas_take_one_replicas_steps(tmp_path):
  """Under MirroredStrategy (2 logical CPUs, a process of its own) the
  ranking loss of each step is the global batch's (each anchor ranks
  against the positives of both replicas: 4 rows each could not give the
  loss of 8 candidates) and the run ends on the one-replica run's weights."""
  tests = os.path.join(REPO_ROOT, "tests")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [REPO_ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  done = subprocess.run(
      [sys.executable, "-c", MIRRORED, str(tmp_path), tests,
       os.path.join(tests, "tasks")],
      env=env, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  print(done.stdout)
  assert "mirrored ok" in done.stdout, done.stdout


# ----------------------------------------------------------------- commands
# Slow (the default suite's time): the same steps run in process in
# test_records_hold_what_the_task_encodes, test_bert_train_lowers_the_loss_
# and_evaluates and test_bad_lines_are_one_line_errors_naming_file_and_line.
@pytest.mark.slow
def test_commands_write_records_train_evaluate_and_name_a_bad_line(tmp_path):
  """bert-create-finetuning-data --task=embedding writes the records,
  bert-train --task=embedding trains on them and reports the retrieval
  metrics of the eval split; a bad line is one line on stderr naming file
  and line."""
  folder = st_folder(tmp_path / "st")
  data = tmp_path / "data"
  data.mkdir()
  write_pairs(data / "train.jsonl", 64, 0)
  write_pairs(data / "eval.jsonl", 40, 1, documents=25)
  common = ["--task=embedding", f"--init_checkpoint={folder}",
            f"--data_dir={data}",
            f"--gin_param=FinetuningInputs.seq_length={SEQ}",
            "--gin_param=FinetuningInputs.global_batch_size=8"]
  records = tmp_path / "records"
  done = run_command(["bert-create-finetuning-data", *common,
                      f"--output_dir={records}"], str(tmp_path))
  assert done.returncode == 0, done.stderr[-2000:]
  assert "train 64 rows, eval 40 rows" in done.stdout, done.stdout
  run = tmp_path / "run"
  train = common + [f"--gin_param=FinetuningInputs.records='{records}'",
                    f"--model_dir={run}", "--strategy=one_device",
                    "--gin_param=RuntimeConfig.steps_per_loop=2"]
  done = run_command(["bert-train", *train, "--train_steps=4",
                      "--mode=train_and_eval"], str(tmp_path))
  assert done.returncode == 0, done.stderr[-2000:]
  final = done.stdout.split("final: ")[-1]
  for name in ("loss", "recall@1", "recall@10", "mrr@10", "ndcg@10"):
    assert f"{name} " in final, final
  # bert-export --kind=embedder of the run: the trained model on raw strings,
  # as the run's model encodes them; --pooling cannot reshape a run.
  served = tmp_path / "served"
  done = run_command(["bert-export", "--kind=embedder", f"--checkpoint={run}",
                      f"--output={served}"], str(tmp_path))
  assert done.returncode == 0, done.stderr[-2000:]
  from bert.export import load_serving  # pylint: disable=g-import-not-at-top
  from bert.tasks import trained_run  # pylint: disable=g-import-not-at-top
  task, model = trained_run.load_trained_task(str(run))
  model.attach_preprocessor(task.preprocessor())
  rows = [json.loads(l) for l in open(data / "eval.jsonl")][:8]
  texts = [r["anchor"] for r in rows] + [r["positive"] for r in rows]
  assert np.abs(load_serving(str(served)).encode(texts)
                - model.encode(texts)).max() <= 1e-5
  done = run_command(["bert-export", "--kind=embedder", f"--checkpoint={run}",
                      "--pooling=cls", f"--output={tmp_path / 'x'}"],
                     str(tmp_path))
  assert done.returncode != 0 and "--pooling" in done.stderr.splitlines()[-1]
  (data / "train.jsonl").write_text('{"anchor": "a", "positive": "b"}\n'
                                    '{"anchor": "a", "positive": 3}\n')
  done = run_command(["bert-train", *common, f"--model_dir={tmp_path / 'bad'}",
                      "--train_steps=1"], str(tmp_path))
  assert done.returncode == 2, done.stderr[-2000:]
  assert done.stderr.strip().splitlines()[-1] == (
      f"error: {data / 'train.jsonl'}:2: field 'positive' must be a string, "
      "got int")
