"""Benchmark worker for the TensorFlow implementations (tf_keras):

  python -m bench._tf_worker ours|model_garden

`ours`: `bert.BertEncoder`; the train step is this library's own training
loop (`bert.training.Trainer`: the orbit while-loop over steps, global-batch
loss normalisation, clipping, AdamW from official.modeling.optimization),
the path `bert-train` runs. `model_garden`: `tfm.nlp.networks.BertEncoder`
with a dense head, trained by a tf.function step as Model Garden's own
trainers do (forward/backward, clip 1.0, AdamW with weight decay).
Spec keys: model, mode (infer|train|matmul), batch, seq, xla, bf16, served
(infer: the bf16 serving export's frozen network), gelu (tanh|erf).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from bench import _protocol as P  # noqa: E402


def _inputs(spec):
  ids, mask, types, labels = P.synthetic_batch(spec["batch"], spec["seq"])
  features = dict(input_word_ids=tf.constant(ids, tf.int32),
                  input_mask=tf.constant(mask, tf.int32),
                  input_type_ids=tf.constant(types, tf.int32))
  return features, tf.constant(labels, tf.int32)


def _matmul(spec):
  n = spec["seq"]          # square n x n matmul, fp32 or bf16 operands
  dtype = tf.bfloat16 if spec.get("bf16") else tf.float32
  a = tf.cast(tf.random.normal([n, n]), dtype)
  b = tf.cast(tf.random.normal([n, n]), dtype)
  f = tf.function(lambda: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)))
  return lambda: f().numpy()


def _ours_encoder(spec):
  import bert  # pylint: disable=g-import-not-at-top
  s = P.SHAPES[spec["model"]]
  config = bert.BertConfig(
      vocab_size=P.VOCAB, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
      num_attention_heads=s["heads"], intermediate_size=s["intermediate"],
      max_position_embeddings=P.MAX_POSITIONS, type_vocab_size=P.TYPE_VOCAB,
      hidden_act="gelu_exact" if P.gelu_form(spec) == "erf" else "gelu")
  return bert.BertEncoder(config), config


def _model_garden_encoder(spec):
  from official.nlp.modeling import networks  # pylint: disable=g-import-not-at-top
  s = P.SHAPES[spec["model"]]
  return networks.BertEncoder(
      vocab_size=P.VOCAB, hidden_size=s["hidden"], num_layers=s["layers"],
      num_attention_heads=s["heads"], inner_dim=s["intermediate"],
      max_sequence_length=P.MAX_POSITIONS, type_vocab_size=P.TYPE_VOCAB,
      # Its default is the tanh form; tf_keras's "gelu" is the erf form.
      **(dict(inner_activation="gelu") if P.gelu_form(spec) == "erf" else {}),
      dict_outputs=True)


def _trained_like(encoder, features):
  """Random non-zero biases and LayerNorm offsets, as a trained model has
  (at zero, grappler removes the bias adds of a frozen graph, and with them
  oneDNN's matmul + bias + GELU fusion)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  encoder(features)
  rng = np.random.default_rng(0)
  encoder.set_weights([w + rng.normal(0, 0.02, w.shape).astype(w.dtype)
                       if w.ndim == 1 else w for w in encoder.get_weights()])


def _served(encoder, spec):
  """The bf16 serving export's network (`bert.serving.frozen`): weights
  stored in bf16 and frozen into the graph."""
  from bert.serving import frozen  # pylint: disable=g-import-not-at-top
  features, _ = _inputs(spec)
  _trained_like(encoder, features)
  copy = frozen.bf16_weights_copy(encoder)
  network = frozen.freeze(
      lambda x: dict(copy(x, training=False)),
      {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in features})

  def forward():
    out = network(features)
    return (tf.reduce_sum(tf.cast(out["sequence_output"], tf.float32)) +
            tf.reduce_sum(tf.cast(out["pooled_output"], tf.float32))).numpy()

  return forward


def _infer(encoder, spec):
  features, _ = _inputs(spec)
  if spec.get("served"):
    return _served(encoder, spec)
  _trained_like(encoder, features)

  # Unknown batch and length, as a served model (and `predict`) runs.
  @tf.function(jit_compile=spec["xla"], input_signature=[{
      k: tf.TensorSpec([None, None], v.dtype) for k, v in features.items()}])
  def forward(x):
    out = encoder(x, training=False)
    return (tf.reduce_sum(tf.cast(out["sequence_output"], tf.float32)) +
            tf.reduce_sum(tf.cast(out["pooled_output"], tf.float32)))

  return lambda: forward(features).numpy()


def _ours_train(spec):
  from bert.models import BertClassifier  # pylint: disable=g-import-not-at-top
  from bert.losses import softmax_stats  # pylint: disable=g-import-not-at-top
  from bert.tasks.base import Task  # pylint: disable=g-import-not-at-top
  from bert.training import OptimizerConfig, Trainer, build_optimizer  # pylint: disable=g-import-not-at-top
  features, labels = _inputs(spec)
  batch = dict(features, label=labels)

  class Synthetic(Task):
    loss_names = ("loss",)
    stat_names = ("loss", "accuracy")
    global_batch_size = spec["batch"]

    def model_inputs(self, f):
      return {k: f[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}

    def loss_denominators(self, f):
      return dict(loss=tf.cast(tf.shape(f["label"])[0], tf.float32))

    def compute_stats(self, f, outputs):
      return softmax_stats(outputs["logits"], f["label"])

  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    model = BertClassifier(_ours_encoder(spec)[0], P.NUM_CLASSES, dropout_rate=0.1)
    optimizer = build_optimizer(OptimizerConfig(
        learning_rate=5e-5, num_train_steps=10**6, warmup_steps=100))
  trainer = Trainer(Synthetic(), model, optimizer, strategy,
                    jit_compile=spec["xla"], log_fn=None)
  trainer.train_dataset = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensors(batch).repeat())
  one = tf.constant(1, tf.int32)
  return lambda: trainer.train(one)


def _model_garden_train(spec):
  from official.modeling import optimization  # pylint: disable=g-import-not-at-top
  from official.modeling.optimization import legacy_adamw  # pylint: disable=g-import-not-at-top
  encoder = _model_garden_encoder(spec)
  features, labels = _inputs(spec)
  head = tf_keras.layers.Dense(P.NUM_CLASSES)
  dropout = tf_keras.layers.Dropout(0.1)
  schedule = tf_keras.optimizers.schedules.PolynomialDecay(5e-5, 10**6, 0.0)
  optimizer = legacy_adamw.AdamWeightDecay(
      optimization.LinearWarmup(schedule, 100, 5e-5),
      weight_decay_rate=0.01, epsilon=1e-6, gradient_clip_norm=0.0,
      exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])

  def loss_fn():
    pooled = encoder(features, training=True)["pooled_output"]
    logits = head(dropout(pooled, training=True))
    return tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
        labels, logits, from_logits=True))

  loss_fn()   # builds the head
  variables = encoder.trainable_variables + head.trainable_variables

  @tf.function(jit_compile=spec["xla"])
  def gradients():
    with tf.GradientTape() as tape:
      loss = loss_fn()
    return loss, tape.gradient(loss, variables)

  @tf.function
  def step():
    loss, grads = gradients()
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, variables))
    return loss

  return lambda: step().numpy()


def build(spec):
  if spec["mode"] == "matmul":
    return _matmul(spec)
  # bf16: everything built under tf_keras' `mixed_bfloat16` policy (bf16
  # compute, fp32 variables and optimizer state), as both libraries document.
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if spec.get("bf16") else "float32")
  try:
    impl = sys.argv[1]
    if spec["mode"] == "infer":
      encoder = (_ours_encoder(spec)[0] if impl == "ours"
                 else _model_garden_encoder(spec))
      return _infer(encoder, spec)
    return _ours_train(spec) if impl == "ours" else _model_garden_train(spec)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


if __name__ == "__main__":
  tf.config.threading.set_intra_op_parallelism_threads(P.THREADS)
  tf.config.threading.set_inter_op_parallelism_threads(P.THREADS)
  P.serve(build)
