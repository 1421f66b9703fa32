"""Exports load without this library and match the in-memory models."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras

from bert import BertEncoder, export
from bert.data import classification_data as cd
from bert.models import BertClassifier, build_pretraining_heads
from bert.networks import make_preprocessing_model
from conftest import random_inputs, shared_data, small_config, vocab


def run_without_bert(script):
  """Runs `script` in a fresh Python that has only TF (+ tensorflow_text)."""
  code = "import sys\nsys.modules['bert'] = None  # importing bert would fail\n" + \
      textwrap.dedent(script)
  out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, timeout=300,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_encoder_and_mlm_load_without_bert(tmp_path):
  encoder = BertEncoder(small_config(vocab_size=120))
  masked_lm, _ = build_pretraining_heads(encoder)
  path = str(tmp_path / "encoder")
  export.export_encoder(encoder, path, masked_lm=masked_lm)
  x = random_inputs(3, 9, vocab_size=120)
  positions = np.array([[1, 2], [3, 0], [4, 5]], np.int32)
  got = run_without_bert(f"""
      import json
      import numpy as np, tensorflow as tf
      m = tf.saved_model.load({path!r})
      x = {{k: tf.constant(v) for k, v in {json.dumps({k: v.numpy().tolist() for k, v in x.items()})}.items()}}
      out = m(x, training=False)
      mlm = m.mlm(dict(x, masked_lm_positions=tf.constant({positions.tolist()})), training=False)
      print(json.dumps(dict(seq=out["sequence_output"].numpy().tolist(),
                            pooled=out["pooled_output"].numpy().tolist(),
                            layers=len(out["encoder_outputs"]),
                            mlm=mlm["mlm_logits"].numpy().tolist(),
                            trainable=len(m.trainable_variables))))
  """)
  ref = encoder(x, training=False)
  assert np.abs(np.array(got["seq"]) - ref["sequence_output"].numpy()).max() <= 1e-5
  assert np.abs(np.array(got["pooled"]) - ref["pooled_output"].numpy()).max() <= 1e-5
  assert got["layers"] == 2
  ref_mlm = masked_lm(ref["sequence_output"], tf.constant(positions))
  assert np.abs(np.array(got["mlm"]) - ref_mlm.numpy()).max() <= 1e-5
  assert got["trainable"] == (len(encoder.trainable_variables)
                              + len(masked_lm.trainable_variables))


def test_hub_keras_layer_fine_tunes_with_the_exported_preprocessor(tmp_path):
  encoder_path, pre_path = str(tmp_path / "encoder"), str(tmp_path / "pre")
  export.export_encoder(BertEncoder(small_config(vocab_size=30522,
                                                 max_position_embeddings=64)),
                        encoder_path)
  export.export_preprocessing_model(vocab(), pre_path, seq_length=64, num_text_inputs=2)
  examples = cd.read_glue("mrpc", shared_data("glue", "MRPC", "train.tsv"))[:16]
  preprocessor = hub.KerasLayer(pre_path)
  a = tf_keras.Input(shape=(), dtype=tf.string)
  b = tf_keras.Input(shape=(), dtype=tf.string)
  pooled = hub.KerasLayer(encoder_path, trainable=True)(preprocessor([a, b]))["pooled_output"]
  model = tf_keras.Model([a, b], tf_keras.layers.Dense(2)(pooled))
  model.compile(tf_keras.optimizers.Adam(1e-3),
                tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  x = [tf.constant([e.text_a for e in examples]), tf.constant([e.text_b for e in examples])]
  y = tf.constant([int(e.label) for e in examples])
  history = model.fit(x, y, epochs=30, batch_size=16, verbose=0).history["loss"]
  assert history[-1] < history[0] - 0.2, history
  # The encoder's own weights were trained, not only the new head.
  assert len(model.trainable_variables) > 2


def test_classifier_serving_on_raw_strings(tmp_path):
  model = BertClassifier(BertEncoder(small_config(vocab_size=30522,
                                                  max_position_embeddings=64)), 2)
  path = str(tmp_path / "classifier")
  export.export_classifier(model, path, vocab(), True, 32, ["no", "yes"], pairs=True)
  a = ["A man plays a guitar.", "Straße ½ …", ""]
  b = ["Someone plays music.", "zweite", "only b"]
  got = run_without_bert(f"""
      import json
      import tensorflow as tf, tensorflow_text  # registers the tokenizer ops
      m = tf.saved_model.load({path!r})
      out = m.signatures["serving_default"](text=tf.constant({a!r}),
                                           text_b=tf.constant({b!r}))
      print(json.dumps(dict(p=out["probabilities"].numpy().tolist(),
                            label=[s.decode() for s in out["label"].numpy()])))
  """)
  inputs = make_preprocessing_model(vocab(), seq_length=32, num_text_inputs=2)(
      [tf.constant(a), tf.constant(b)])
  probabilities = tf.nn.softmax(model(inputs, training=False)["logits"]).numpy()
  assert np.abs(np.array(got["p"]) - probabilities).max() <= 1e-5
  assert got["label"] == [["no", "yes"][i] for i in probabilities.argmax(-1)]
  cli = subprocess.run([os.path.join(os.path.dirname(sys.executable), "saved_model_cli"),
                        "show", "--dir", path, "--all"], capture_output=True,
                       text=True, timeout=300)
  listing = cli.stdout
  assert "signature_def['serving_default']" in listing
  assert "inputs['text'] tensor_info:" in listing and "dtype: DT_STRING" in listing
  assert "inputs['text_b'] tensor_info:" in listing
  assert "outputs['probabilities']" in listing and "outputs['label']" in listing


def _trained_classifier_run(tmp_path):
  """A 6-step `bert-train` classification run: (model_dir, train file, env)."""
  config = tmp_path / "bert_config.json"
  small_config(vocab_size=30522, max_position_embeddings=32).to_json_file(str(config))
  data = tmp_path / "train.tsv"
  data.write_text("text\tlabel\n" + "".join(
      f"{'good' if i % 2 else 'bad'} film number {i}\t{'pos' if i % 2 else 'neg'}\n"
      for i in range(32)))
  gin_file = tmp_path / "run.gin"
  gin_file.write_text(f"""
build_task.task_class = @ClassificationTask
EncoderSource.bert_config = "{config}"
EncoderSource.vocab_file = "{vocab()}"
EncoderSource.lower_case = True
ClassificationData.train_file = "{data}"
ClassificationData.eval_file = "{data}"
ClassificationData.text_a_column = "text"
ClassificationData.labels = ["neg", "pos"]
FinetuningInputs.seq_length = 16
FinetuningInputs.global_batch_size = 8
RuntimeConfig.train_steps = 6
RuntimeConfig.steps_per_loop = 3
RuntimeConfig.strategy = "one_device"
""")
  model_dir = str(tmp_path / "run")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  subprocess.run([sys.executable, "-m", "bert.scripts.train", f"--gin_file={gin_file}",
                  f"--model_dir={model_dir}"], check=True, env=env,
                 capture_output=True, timeout=300)
  return model_dir, data, env


def _expected_probabilities(model_dir, texts):
  from bert.tasks.trained_run import load_trained_task  # pylint: disable=g-import-not-at-top
  task, model = load_trained_task(model_dir)
  inputs = task.tokenizer.encode(texts, None, 16)
  return tf.nn.softmax(model({k: tf.constant(v) for k, v in inputs.items()},
                             training=False)["logits"]).numpy()


def test_cli_exports_a_trained_classifier_run(tmp_path):
  model_dir, _, env = _trained_classifier_run(tmp_path)
  out = str(tmp_path / "served")
  done = subprocess.run([sys.executable, "-m", "bert.scripts.export", "--kind=classifier",
                         f"--checkpoint={model_dir}", f"--output={out}"],
                        env=env, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  texts = ["a good film", "a bad film"]
  got = run_without_bert(f"""
      import json
      import tensorflow as tf, tensorflow_text
      m = tf.saved_model.load({out!r})
      r = m.signatures["serving_default"](text=tf.constant({texts!r}))
      print(json.dumps(r["probabilities"].numpy().tolist()))
  """)
  assert np.abs(np.array(got) - _expected_probabilities(model_dir, texts)).max() <= 1e-5


# Slow: the gate and the int8 export run by default in
# tests/serving/precision_test.py; this is their command-line wiring.
@pytest.mark.slow
def test_cli_int8_export_of_a_trained_run_goes_through_the_gate(tmp_path):
  model_dir, data, env = _trained_classifier_run(tmp_path)
  texts = ["a good film", "a bad film"]
  expected = _expected_probabilities(model_dir, texts)
  out8 = str(tmp_path / "served8")
  done = subprocess.run([sys.executable, "-m", "bert.scripts.export",
                         "--kind=classifier", f"--checkpoint={model_dir}",
                         f"--output={out8}", "--precision=int8",
                         "--max_accuracy_drop=100"],
                        env=env, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  assert f"accuracy gate: accuracy on {data}: fp32 " in done.stdout
  assert ", int8 " in done.stdout and "limit: 100 points" in done.stdout
  served = export.load_serving(out8)(text=texts)["probabilities"].numpy()
  assert np.abs(served - expected).max() <= 0.05


def test_span_labeler_serving_matches_postprocessing(tmp_path):
  from bert.data.squad_config import SquadConfig  # pylint: disable=g-import-not-at-top
  from bert.data.squad_examples import SquadExample, encode_examples  # pylint: disable=g-import-not-at-top
  from bert.data.squad_eval import postprocess  # pylint: disable=g-import-not-at-top
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  from bert.models import BertSpanLabeler  # pylint: disable=g-import-not-at-top
  model = BertSpanLabeler(BertEncoder(small_config(vocab_size=30522,
                                                   max_position_embeddings=64)))
  path = str(tmp_path / "span")
  squad = SquadConfig(seq_length=64, max_query_length=16, max_answer_length=5,
                      doc_stride=16)
  export.export_span_labeler(model, path, vocab(), True, squad)
  long_context = " ".join(f"Sentence {i} tells of Émile and the year {1900 + i}."
                          for i in range(12))
  questions = ["Who wrote it?", "Wo ist das Straße-Schild?", "Which year?"]
  contexts = ["The  Quick-Brown fox wrote Émile's letter in 1990.",
              "Das Schild steht an der Straße ½ km von hier.", long_context]
  got = run_without_bert(f"""
      import json
      import tensorflow as tf, tensorflow_text
      m = tf.saved_model.load({path!r})
      r = m.signatures["serving_default"](question=tf.constant({questions!r}),
                                         context=tf.constant({contexts!r}))
      print(json.dumps(dict(answer=[a.decode() for a in r["answer"].numpy()],
                            score=r["score"].numpy().tolist())))
  """)
  examples = [SquadExample(str(i), q, c, [("x", 0)]) for i, (q, c) in
              enumerate(zip(questions, contexts))]
  arrays, meta = encode_examples(examples, Tokenizer(vocab()), squad)
  assert len(meta) > 6                        # the long context: many windows
  out = model({k: tf.constant(arrays[k]) for k in
               ("input_word_ids", "input_mask", "input_type_ids")}, training=False)
  predictions, nbest, _ = postprocess(
      examples, meta, out["start_logits"].numpy(), out["end_logits"].numpy(),
      squad)
  assert got["answer"] == [predictions[str(i)] for i in range(3)]
  for i in range(3):
    best = nbest[str(i)][0]
    assert abs(got["score"][i] - (best["start_logit"] + best["end_logit"])) <= 1e-5
    assert got["answer"][i] in contexts[i]
  # The long context's answer may come from any window, not the first only.
  first_window = [m for m in meta if m["example"] == 2][0]
  assert max(first_window["char_spans"].values())[1] < len(long_context)


def test_tagger_serving_matches_word_predictions(tmp_path):
  from bert.data import ner_data  # pylint: disable=g-import-not-at-top
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  from bert.models import BertTokenClassifier  # pylint: disable=g-import-not-at-top
  labels = ["O", "B-person", "I-person", "B-location"]
  model = BertTokenClassifier(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=64)), len(labels))
  path = str(tmp_path / "tagger")
  export.export_tagger(model, path, vocab(), True, 64, labels)
  # Past the 64 pieces of a row: a sentence of 3 rows, a word of 80 pieces
  # (cut to a row's 62). Every word is tagged, as predict tags it.
  texts = ["John Smith visited Paris yesterday", "xylophonists \u200b play", "",
           " ".join(["xylophonists visited Zürich"] * 20), "a " + "x," * 40 + " b"]
  got = run_without_bert(f"""
      import json
      import tensorflow as tf, tensorflow_text
      m = tf.saved_model.load({path!r})
      r = m.signatures["serving_default"](text=tf.constant({texts!r}))
      print(json.dumps(dict(words=[[w.decode() for w in row] for row in r["words"].numpy()],
                            tags=[[t.decode() for t in row] for row in r["tags"].numpy()])))
  """)
  kept = [i for i, t in enumerate(texts) if t.split()]
  sentences = [ner_data.Sentence(texts[i].split(), None, 1) for i in kept]
  features = ner_data.encode_sentences(sentences, Tokenizer(vocab()), 64)
  assert np.bincount(features["sentence_id"]).tolist() == [1, 1, 3, 3]
  predicted = model({k: tf.constant(features[k]) for k in
                     ("input_word_ids", "input_mask", "input_type_ids")},
                    training=False)["logits"].numpy().argmax(-1)
  expected = ner_data.word_predictions(sentences, features, predicted, labels)
  for row, sentence, tags in zip([got["tags"][i] for i in kept], sentences,
                                 expected):
    n = len(sentence.words)
    assert row[:n] == tags and all(t == "" for t in row[n:])
  assert got["words"][0][:5] == texts[0].split()
  assert all(t == "" for t in got["tags"][2])
