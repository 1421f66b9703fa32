"""Knowledge distillation: the losses against hand-written formulas, cached
teacher outputs against a fresh teacher pass, alpha = 0 against plain
fine-tuning, students of every kind of spec, transfer text, and the run's
export as its student."""

import os
import subprocess
import sys

import gin
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert import checkpoints
from bert.networks.bert_encoder import BertEncoder
from bert import distillation, losses
from bert.tasks import ClassificationTask, DistillationTask
from bert.distillation import DistillationConfig
from bert.tasks.configs import FinetuningInputs
from bert.tasks import trained_run
from bert.training import RuntimeConfig, run_experiment
from bert.tasks import build_task
from bert.validation import ConfigError
from conftest import (PRETRAIN_SEQ, REPO_ROOT, small_config,
                      tiny_pretraining_config, write_run)
import _tasks
from _tasks import classification_teacher, tagging_teacher


def _softmax(x, axis=-1):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


# ------------------------------------------------------------------ losses
def test_soft_targets_loss_is_the_formula_with_temperature():
  rng = np.random.RandomState(0)
  s, t = rng.randn(6, 3).astype(np.float32) * 3, rng.randn(6, 3).astype(np.float32) * 3
  label = np.array([0, 2, 1, 1, -1, -1], np.int32)   # the last two: transfer text
  has = np.array([1, 1, 1, 1, 0, 0], np.float32)
  for temp, alpha in ((2.5, 0.3), (1.0, 1.0), (4.0, 0.0)):
    soft = -(temp ** 2) * (_softmax(t / temp) * np.log(_softmax(s / temp))).sum(-1)
    hard = -np.log(_softmax(s)[np.arange(6), np.maximum(label, 0)])
    got = losses.soft_cross_entropy(s, t, temp).numpy()
    np.testing.assert_allclose(got, soft, rtol=1e-5)
    stats = losses.distillation_stats(
        "classification", dict(logits=s), dict(logits=t), dict(label=label),
        has, temp, alpha)
    num, den = (float(x) for x in stats["prediction_loss"])
    expected = (alpha * soft + (1 - alpha) * hard * has).sum()
    np.testing.assert_allclose([num, den], [expected, 6], rtol=1e-5)
    num, den = (float(x) for x in stats["hard_loss"])
    np.testing.assert_allclose([num, den], [(hard * has).sum(), 4], rtol=1e-5)
  # Negative control: the temperature changes the soft loss.
  assert not np.allclose(losses.soft_cross_entropy(s, t, 1.0).numpy(),
                         losses.soft_cross_entropy(s, t, 2.5).numpy() / 6.25)

  # Regression: squared error to the teacher's value and to the gold one.
  stats = losses.distillation_stats(
      "regression", dict(logits=s[:, :1]), dict(logits=t[:, :1]),
      dict(label=np.arange(6, dtype=np.float32)), has, 3.0, 0.25)
  expected = (0.25 * (s[:, 0] - t[:, 0]) ** 2
              + 0.75 * (s[:, 0] - np.arange(6)) ** 2 * has).sum()
  np.testing.assert_allclose(float(stats["prediction_loss"][0]), expected, rtol=1e-5)

  # Tokens: soft targets on each word's first piece only.
  s3, t3 = rng.randn(2, 5, 4).astype(np.float32), rng.randn(2, 5, 4).astype(np.float32)
  first = np.array([[0, 1, 0, 1, 0], [0, 1, 1, 0, 0]])
  label_ids = np.where(first > 0, 2, -1)
  stats = losses.distillation_stats(
      "tokens", dict(logits=s3), dict(logits=t3), dict(label_ids=label_ids),
      np.ones(2, np.float32), 2.0, 1.0, word_start=first)
  soft = -4.0 * (_softmax(t3 / 2) * np.log(_softmax(s3 / 2))).sum(-1)
  np.testing.assert_allclose([float(x) for x in stats["prediction_loss"]],
                             [(soft * first).sum(), 4], rtol=1e-5)

  # Spans: the mean of start and end, padding never a position.
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
  ends = {k: rng.randn(2, 5).astype(np.float32) for k in ("s0", "s1", "t0", "t1")}
  stats = losses.distillation_stats(
      "spans", dict(start_logits=ends["s0"], end_logits=ends["s1"]),
      dict(start_logits=ends["t0"], end_logits=ends["t1"]),
      dict(start_positions=[1, 4], end_positions=[2, 4]), np.ones(2), 1.0, 1.0,
      input_mask=mask)
  expected = 0.0
  for row, n in enumerate(mask.sum(1)):    # over each row's real tokens only
    for a, b in (("s0", "t0"), ("s1", "t1")):
      ms, mt = ends[a][row, :n], ends[b][row, :n]
      expected += -(_softmax(mt) * np.log(_softmax(ms))).sum() / 2
  np.testing.assert_allclose(float(stats["prediction_loss"][0]), expected, rtol=1e-5)


# ----------------------------------------------------------- teacher runs
@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
  """One classification teacher run per test process (training it is most
  of each test's time)."""
  return classification_teacher(tmp_path_factory.mktemp("teacher"))


INPUTS = FinetuningInputs(seq_length=32, global_batch_size=16, eval_batch_size=32)


@pytest.mark.heavy
def test_cached_teacher_outputs_equal_a_fresh_teacher_pass(tmp_path, teacher_dir):
  task = DistillationTask(teacher=teacher_dir, student="teacher_layers:0,2",
                          inputs=INPUTS)
  _, teacher = trained_run.load_trained_task(teacher_dir)
  for split in ("train", "eval"):
    f = task.features(split)
    fresh = teacher(task.model_inputs({k: tf.constant(v) for k, v in f.items()}),
                    training=False)["logits"].numpy()
    np.testing.assert_allclose(f["teacher_logits"], fresh, atol=1e-5)
    assert f["has_label"].min() == 1
  assert task.stat_names == ("prediction_loss", "soft_loss", "hard_loss",
                             "accuracy")
  # The student starts as the teacher's embeddings, blocks 0 and 2, pooler
  # and head: its [CLS] vector differs from the teacher's (block 1 is gone)
  # but every copied weight is the teacher's own.
  model = task.build_model()
  task.initialize(model)
  s, t = model.student, teacher
  np.testing.assert_array_equal(s.encoder.transformer_layers[1].get_weights()[0],
                                t.encoder.transformer_layers[2].get_weights()[0])
  np.testing.assert_array_equal(s.head.get_weights()[0], t.head.get_weights()[0])
  assert len(s.encoder.transformer_layers) == 2
  assert not np.array_equal(s.encoder.transformer_layers[1].get_weights()[0],
                            t.encoder.transformer_layers[1].get_weights()[0])

  # Tokens: the cached logits, stored [rows, tags, seq] so batches cut them
  # with the other sequence columns, are the teacher's on the real tokens.
  tagger_dir = tagging_teacher(tmp_path / "t")
  task = DistillationTask(teacher=tagger_dir, student="teacher_layers:1")
  _, tagger = trained_run.load_trained_task(tagger_dir)
  f = task.features("train")
  fresh = tagger(task.model_inputs({k: tf.constant(v) for k, v in f.items()}),
                 training=False)["logits"].numpy()
  real = f["input_mask"] > 0
  np.testing.assert_allclose(f["teacher_logits"].transpose(0, 2, 1)[real],
                             fresh[real], atol=1e-5)
  batch = next(iter(task.build_inputs(None, training=True)))
  assert batch["teacher_logits"].shape[-1] == batch["input_word_ids"].shape[-1]
  assert distillation.teacher_outputs(task.kind, batch)["logits"].shape[1] == (
      batch["input_word_ids"].shape[1])


def _weights(model):
  return [v.numpy() for v in model.trainable_variables]


@pytest.mark.heavy
def test_alpha_0_and_t_1_is_plain_fine_tuning(tmp_path, teacher_dir):
  runtime = RuntimeConfig(train_steps=3, steps_per_loop=3, seed=7)
  distill = DistillationTask(
      teacher=teacher_dir, student="teacher_layers:1,2", inputs=INPUTS,
      distillation=DistillationConfig(alpha=0.0, temperature=1.0))
  model, results = run_experiment(distill, str(tmp_path / "d"), "train", runtime,
                                  log_fn=None)
  # The same student task and init, trained without a teacher.
  plain = distill.student_task
  plain.initialize = lambda m: distill.initialize(type("M", (), {"student": m}))
  plain_model, plain_results = run_experiment(plain, str(tmp_path / "p"), "train",
                                              runtime, log_fn=None)
  for a, b in zip(_weights(model.student), _weights(plain_model)):
    np.testing.assert_allclose(a, b, atol=1e-6)
  assert results["loss"] == pytest.approx(plain_results["loss"], rel=1e-5)
  # Negative controls: the steps moved the weights, and with alpha > 0 the
  # same outputs give another loss.
  start = distill.build_model()
  distill.initialize(start)
  assert max(np.abs(a - b).max() for a, b in zip(
      _weights(start.student), _weights(plain_model))) > 5e-5   # 50x the tolerance
  batch = next(iter(distill.build_inputs(None, training=True)))
  outputs = model(distill.model_inputs(batch), training=False)
  soft = DistillationTask(teacher=teacher_dir, student="teacher_layers:1,2",
                          inputs=INPUTS)
  losses = [float(t.compute_stats(batch, outputs)["prediction_loss"][0])
            for t in (distill, soft)]
  assert abs(losses[0] - losses[1]) > 1e-3


def test_vocab_mismatch_names_both_files(tmp_path, teacher_dir):
  tokens = open(_tasks.vocab(), encoding="utf-8").read().split("\n")
  tokens[1000], tokens[1001] = tokens[1001], tokens[1000]
  other = tmp_path / "other_vocab.txt"
  other.write_text("\n".join(tokens), encoding="utf-8")
  config = small_config(vocab_size=30522, max_position_embeddings=128)
  student = checkpoints.save(BertEncoder(config), str(tmp_path / "student"),
                             vocab_file=str(other), lower_case=True)
  with pytest.raises(ConfigError) as e:
    DistillationTask(teacher=teacher_dir, student=student, inputs=INPUTS)
  message = str(e.value).splitlines()[0]   # (gin adds a line naming the call)
  assert os.path.join(student, "vocab.txt") in message
  assert _tasks.vocab() in message and "line 1001" in message
  # The same checkpoint with the teacher's vocab is a student.
  good = checkpoints.save(BertEncoder(config), str(tmp_path / "good"),
                          vocab_file=_tasks.vocab(), lower_case=True)
  task = DistillationTask(teacher=teacher_dir, student=good, inputs=INPUTS)
  assert task.initial_checkpoint is not None and task.taken is None
  with pytest.raises(ConfigError, match=r"blocks of the teacher's 0\.\.2"):
    DistillationTask(teacher=teacher_dir, student="teacher_layers:0,3")


def test_a_pretraining_run_is_a_student(tmp_path, teacher_dir, pretraining_records):
  """A student pre-trained with this library: its run folder is the spec. The
  run records no casing, so the student reads with the teacher's."""
  config = tiny_pretraining_config().to_dict()
  run = write_run(str(tmp_path / "pretrained"), [
      "build_task.task_class = @PretrainingTask",
      f"EncoderSource.bert_config = {config!r}",
      f"EncoderSource.vocab_file = '{_tasks.vocab()}'",
      f"PretrainingInputs.train_files = '{pretraining_records}'",
      f"PretrainingInputs.seq_length = {PRETRAIN_SEQ}"])
  task = DistillationTask(teacher=teacher_dir, student=run, inputs=INPUTS)
  assert task.initial_checkpoint.format == "run" and task.taken is None
  assert task.student_task.tokenizer.lower_case is True
  model = task.build_model()
  task.initialize(model)
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(run))
  table = reader.get_tensor("model/encoder/embedding_layer/word_embeddings/"
                            ".ATTRIBUTES/VARIABLE_VALUE")
  np.testing.assert_array_equal(
      model.student.encoder.get_embedding_table().numpy(), table)


def test_teacher_kind_is_the_models_own_and_a_pretrainer_cannot_teach():
  """One rule for `bert-train --task=distill` and `fit(teacher=...)`: the
  teacher model's `distillation_kind`."""
  from bert import models  # pylint: disable=g-import-not-at-top
  encoder = BertEncoder(small_config())
  expected = {models.BertClassifier(encoder, 3): "classification",
              models.BertClassifier(encoder, 1): "regression",
              models.BertMultipleChoice(encoder): "classification",
              models.BertTokenClassifier(encoder, 5): "tokens",
              models.BertSpanLabeler(encoder): "spans"}
  where = "DistillationTask.teacher='RUN'"
  for model, kind in expected.items():
    assert distillation.teacher_kind(model, where) == kind, type(model).__name__
  with pytest.raises(ConfigError, match=r"teacher='RUN': a BertPretrainer "
                     r"cannot teach"):
    distillation.teacher_kind(models.BertPretrainer(encoder), where)
  # With a student: a model of its class, whatever it predicts.
  student = models.BertClassifier(encoder, 3)
  assert distillation.teacher_kind(models.BertClassifier(encoder, 2), "T",
                                   student) == "classification"
  with pytest.raises(ConfigError, match=r"^T must be a BertClassifier like "
                     r"the student, got BertMultipleChoice$"):
    distillation.teacher_kind(models.BertMultipleChoice(encoder), "T", student)


def test_one_set_of_pair_checks_for_both_paths():
  """The block and layer-map checks `DistillationTask`, `from_teacher`,
  `Distiller` and `DistillationConfig` share, and the vocab check of
  `fit(teacher=...)` and `DistillationTask`."""
  assert distillation.check_blocks("S", [0, 2], 3) == (0, 2)
  for bad in ([], [0, 0], [3], [-1], [True], [1.0]):
    with pytest.raises(ConfigError, match=r"^S must name distinct blocks of "
                       r"the teacher's 0\.\.2, got \["):
      distillation.check_blocks("S", bad, 3)
  assert distillation.check_layer_map("M", (1, 1), 2, 3) == (1, 1)
  for bad in ((0,), (0, 3), (0, 1, 2)):
    with pytest.raises(ConfigError, match=r"^M must give each of the "
                       r"student's 2 blocks a teacher block in 0\.\.2"):
      distillation.check_layer_map("M", bad, 2, 3)
  assert DistillationConfig(hidden_weight=1.0).student_layer_map(2, 4) == (1, 3)
  with pytest.raises(ConfigError, match=r"^DistillationConfig\.layer_map "):
    DistillationConfig(layer_map=(0, 4)).student_layer_map(2, 4)
  vocab = ["[PAD]", "a", "b"]
  distillation.check_same_vocab("O", (vocab, True, "s"), (list(vocab), True, "t"))
  for student, message in (
      ((["[PAD]", "x", "b"], True, "s"), r"^O: the student's vocab \(s\) is "
       r"not the teacher's \(t\): line 2 is 'x' against 'a'; student and"),
      ((vocab[:2], True, "s"), r"2 tokens against 3"),
      ((vocab, False, "s"), r"^O: the student's casing \(lower_case=False, "
       r"s\) is not the teacher's \(lower_case=True, t\)$")):
    with pytest.raises(ConfigError, match=message):
      distillation.check_same_vocab("O", student, (vocab, True, "t"))


@pytest.mark.heavy
def test_a_gin_run_with_inner_losses_serves_as_its_student(tmp_path, teacher_dir):
  """configs/distill.gin with a wider random student (hidden states through
  a learned projection, teacher on the fly): the run's checkpoint holds the
  student and the projection, never the teacher, and the run loads back as
  a plain classification run of the student."""
  from bert import configs  # pylint: disable=g-import-not-at-top
  student_dir = str(tmp_path / "student")
  gin.clear_config()
  try:
    gin.parse_config_files_and_bindings(
        [os.path.join(os.path.dirname(configs.__file__), "distill.gin")], [
            f"DistillationTask.teacher = '{teacher_dir}'",
            "DistillationTask.student = 'shape:bert_tiny'",
            "DistillationConfig.hidden_weight = 2.0",
            "DistillationConfig.temperature = 2.0",
            "DistillationConfig.mask_rate = 0.15",
            "FinetuningInputs.seq_length = 32"])
    task = build_task()
    assert task.distillation.on_the_fly and task.layer_map == (0, 2)
    model, results = run_experiment(
        task, student_dir, "train",
        RuntimeConfig(train_steps=2, steps_per_loop=2), log_fn=None)
    with open(os.path.join(student_dir, "operative_config.gin"), "w") as f:
      f.write(gin.operative_config_str())
  finally:
    gin.clear_config()
  assert np.isfinite(results["hidden_loss"]) and results["hidden_loss"] > 0
  assert results["loss"] == pytest.approx(results["prediction_loss"]
                                          + results["hidden_loss"], rel=1e-5)
  assert model.hidden_projection.kernel.shape == (128, 64)
  assert model.masking.rate == 0.15
  names = [n for n, _ in tf.train.list_variables(tf.train.latest_checkpoint(
      student_dir))]
  assert any("hidden_projection" in n for n in names)
  blocks = {n.split("transformer_layers/")[1].split("/")[0] for n in names
            if "transformer_layers/" in n}
  assert blocks == {"0", "1"}        # the student's; the teacher's 3 are not saved
  assert not any("teacher" in n for n in names)
  served_task, served = trained_run.load_trained_task(student_dir)
  assert isinstance(served_task, ClassificationTask)
  assert served.encoder.config.hidden_size == 128
  for a, b in zip(served.weights, model.student.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  # Attention transfer needs equal head counts (bert_tiny has 2, the teacher 4).
  with pytest.raises(ConfigError, match="2 attention heads, the teacher 4"):
    DistillationTask(teacher=teacher_dir, student="shape:bert_tiny",
                     distillation=DistillationConfig(attention_weight=1.0))


@pytest.mark.heavy
def test_transfer_text_is_labeled_by_the_teacher_only(tmp_path, teacher_dir):
  transfer = tmp_path / "unlabeled.txt"
  transfer.write_text("a good movie\n\nthe long bad story\nmusic and places\n")
  task = DistillationTask(teacher=teacher_dir, student="teacher_layers:0",
                          inputs=INPUTS, transfer_files=(str(transfer),),
                          distillation=DistillationConfig(alpha=0.5))
  f = task.features("train")
  assert len(f["label"]) == 128 + 3
  np.testing.assert_array_equal(f["has_label"][-4:], [1, 0, 0, 0])
  np.testing.assert_array_equal(f["label"][-3:], [-1, -1, -1])
  _, teacher = trained_run.load_trained_task(teacher_dir)
  rows = {k: tf.constant(v[-3:]) for k, v in task.model_inputs(f).items()}
  np.testing.assert_allclose(f["teacher_logits"][-3:],
                             teacher(rows, training=False)["logits"], atol=1e-5)
  assert task._transfer_origins == [f"{transfer}: line {n}" for n in (1, 3, 4)]
  assert task.describe_batch(dict(example_row=np.array([0, 129]))).endswith(
      f"{transfer}: line 3")
  # The hard loss counts the labeled rows only.
  batch = {k: tf.constant(v[122:]) for k, v in f.items()}
  stats = task.compute_stats(batch, dict(logits=tf.zeros([9, 2])))
  assert float(stats["hard_loss"][1]) == 6 and float(stats["soft_loss"][1]) == 9
  pairs = tmp_path / "pairs.txt"
  pairs.write_text("one\ttwo\n")
  task = DistillationTask(teacher=teacher_dir, student="teacher_layers:0",
                          inputs=INPUTS, transfer_files=(str(pairs),))
  with pytest.raises(ValueError, match=r"pairs.txt:1: expected one text"):
    task.features("train")


# ------------------------------------------------------- the Keras path
def _classifier(layers, seed, lower_case=True):
  from bert.layers.bert_tokenizer import read_vocab  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  from bert.models.preprocessors import TextClassifierPreprocessor  # pylint: disable=g-import-not-at-top
  tf_keras.utils.set_random_seed(seed)
  model = BertClassifier(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=32, num_hidden_layers=layers)), 2)
  model.attach_preprocessor(TextClassifierPreprocessor(
      vocabulary=read_vocab(_tasks.vocab()), lower_case=lower_case, seq_length=32,
      labels=["neg", "pos"], text_pairs=False))
  return model


@pytest.mark.heavy
def test_keras_fit_with_a_teacher(tmp_path):
  """`fit(x, y, teacher=...)`: alpha = 0 is plain `fit` (same init, seed,
  batches), alpha = 1 learns without labels, and what it cannot do it says."""
  import csv  # pylint: disable=g-import-not-at-top
  with open(_tasks.write_data(str(tmp_path), 64, 0)) as f:
    rows = list(csv.DictReader(f, delimiter="\t"))
  texts, labels = [r["text"] for r in rows], [r["label"] for r in rows]
  teacher = _classifier(2, seed=1)
  # DistilBERT's student from the Keras side: all of the teacher's blocks
  # is the teacher; one of them, that block's weights.
  whole = type(teacher).from_teacher(teacher, [0, 1])
  probs = [m.predict(texts[:8])["probabilities"] for m in (teacher, whole)]
  np.testing.assert_allclose(probs[0], probs[1], atol=1e-6)
  half = type(teacher).from_teacher(teacher, [1])
  np.testing.assert_array_equal(half.encoder.transformer_layers[0].get_weights()[0],
                                teacher.encoder.transformer_layers[1].get_weights()[0])
  assert half.preprocessor.labels == ["neg", "pos"]
  with pytest.raises(ValueError, match="blocks of the teacher's 0..1"):
    type(teacher).from_teacher(teacher, [2])
  weights, histories = [], []
  plain = DistillationConfig(alpha=0.0, temperature=1.0)
  for kwargs in (dict(teacher=teacher, distillation=plain), {}):
    student = _classifier(1, seed=2)
    student.compile()
    tf_keras.utils.set_random_seed(5)
    histories.append(student.fit(texts, labels, batch_size=16, epochs=1,
                                 verbose=0, **kwargs).history)
    weights.append(student.get_weights())
  for a, b in zip(*weights):
    np.testing.assert_allclose(a, b, atol=1e-6)
  assert set(histories[0]) == {"loss", "accuracy", "f1", "soft_loss", "hard_loss"}
  assert histories[0]["loss"] == pytest.approx(histories[1]["loss"], rel=1e-5)
  assert histories[0]["f1"] == pytest.approx(histories[1]["f1"])
  # Unlabeled text: soft targets only (the hard loss has no rows).
  student = _classifier(1, seed=2)
  student.compile()
  history = student.fit(texts, None, batch_size=16, epochs=2, verbose=0,
                        teacher=teacher,
                        distillation=DistillationConfig(temperature=2.0))
  soft = history.history["soft_loss"]
  assert soft[1] < soft[0] and history.history["hard_loss"] == [0.0, 0.0]
  assert not np.allclose(student.get_weights()[0], weights[1][0])
  assert "soft_loss" not in {m.name for m in student.metrics}   # after the fit
  with pytest.raises(ValueError, match="bert-train --task=distill"):
    student.fit(texts, labels, teacher=teacher,
                distillation=DistillationConfig(hidden_weight=1.0))
  # The checks `DistillationTask` makes: one vocabulary, a teacher of the
  # student's class.
  with pytest.raises(ConfigError, match=r"fit: the student's casing "
                     r"\(lower_case=True, this model's preprocessor\)"):
    student.fit(texts, labels, teacher=_classifier(1, seed=3, lower_case=False))
  with pytest.raises(ConfigError, match=r"fit: the teacher must be a "
                     r"BertClassifier like the student"):
    student.fit(texts, labels, teacher=BertEncoder(small_config()))


def test_token_masking_masks_real_pieces_only_while_training():
  from bert.layers.token_masking import TokenMasking  # pylint: disable=g-import-not-at-top
  tf_keras.utils.set_random_seed(3)
  layer = TokenMasking(0.5, mask_id=103, keep_ids=(101, 102))
  ids = np.full([64, 40], 2000, np.int32)
  ids[:, 0], ids[:, 29], ids[:, 30:] = 101, 102, 0
  mask = (ids > 0).astype(np.int32)
  inputs = dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask))
  out = layer(inputs, training=True)["input_word_ids"].numpy()
  masked = out == 103
  assert not masked[:, [0, 29]].any() and not masked[:, 30:].any()
  assert 0.45 < masked[:, 1:29].mean() < 0.55
  np.testing.assert_array_equal(out[~masked], ids[~masked])
  again = layer(inputs, training=True)["input_word_ids"].numpy()
  assert (again != out).any()                      # drawn anew each call
  np.testing.assert_array_equal(
      layer(inputs, training=False)["input_word_ids"].numpy(), ids)


def _transfer_text(*argv):
  """`python -m bench.transfer_text ARGV` as the README runs it (a command:
  the tests do not import bench/); the lines it wrote to its --out."""
  out = argv[argv.index("--out") + 1]
  subprocess.run([sys.executable, "-m", "bench.transfer_text", *argv],
                 cwd=REPO_ROOT, check=True, capture_output=True)
  assert not os.path.exists(out + ".tmp")
  with open(out, encoding="utf-8", newline="") as f:
    return f.read().split("\n")[:-1]        # one line a row, "\n"-ended


def test_transfer_text_of_the_readme_runs(tmp_path):
  """`bench.transfer_text`: SST-2's rows after the teacher's 10,000, and
  MRPC's pairs swapped and with words dropped (each a subsequence of its
  original), unlabeled."""
  from bert.data import classification_data as cd  # pylint: disable=g-import-not-at-top
  from conftest import shared_data  # pylint: disable=g-import-not-at-top
  sst2 = shared_data("glue", "SST-2", "train.tsv")
  rest = _transfer_text("rest", "--glue_task", "sst-2", "--train_file", sst2,
                        "--skip", "10000", "--out", str(tmp_path / "rest.txt"))
  examples = cd.read_glue("sst-2", sst2)
  assert rest == [e.text_a for e in examples[10000:]] and len(rest) == 57349
  mrpc = shared_data("glue", "MRPC", "train.tsv")
  pairs = cd.read_glue("mrpc", mrpc)[:50]
  lines = _transfer_text("pairs", "--train_file", mrpc, "--drop", "0.15",
                         "--seed", "1", "--out", str(tmp_path / "t.txt"))
  assert len(lines) == 4 * 3668 and all(l.count("\t") == 1 for l in lines)
  out = [tuple(l.split("\t")) for l in lines[:200]]

  def subsequence(short, long):
    words = iter(long.split())
    return all(w in words for w in short.split())

  shorter = 0
  for e, variants in zip(pairs, [out[i:i + 4] for i in range(0, 200, 4)]):
    assert variants[0] == (e.text_b, e.text_a)
    for (a, b), (src_a, src_b) in zip(variants[1:], [(e.text_a, e.text_b),
                                                     (e.text_a, e.text_b),
                                                     (e.text_b, e.text_a)]):
      assert subsequence(a, src_a) and subsequence(b, src_b)
      shorter += (a != src_a) + (b != src_b)
  assert shorter > 100                     # words were dropped (control)
  again = _transfer_text("pairs", "--train_file", mrpc,
                         "--out", str(tmp_path / "t2.txt"))
  assert again == lines                    # seeded (defaults: 0.15, seed 1)
