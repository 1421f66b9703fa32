"""Benchmark worker for KerasHub `BertBackbone` (Keras 3, TensorFlow backend,
XLA), run as its users run it: `compile(jit_compile=True)`, then
`predict_on_batch` for inference and `train_on_batch` (dropout 0.1 + dense
head on `pooled_output`, AdamW with weight decay 0.01 and global clipnorm 1.0)
for training. Needs its own venv (`bash bench/make_keras_hub_venv.sh`):

  bench/.venv_keras_hub/bin/python -m bench._keras_hub_worker
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["KERAS_BACKEND"] = "tensorflow"

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench import _protocol as P  # noqa: E402


def build(spec):
  if spec["mode"] == "matmul":
    raise ValueError("matmul is measured by the torch and TF workers")
  if P.gelu_form(spec) != "tanh":
    # BertBackbone fixes its feed-forward activation to the tanh form.
    raise ValueError("KerasHub's BertBackbone computes the tanh GELU only")
  s = P.SHAPES[spec["model"]]
  # bf16: Keras 3's `mixed_bfloat16` policy (bf16 compute, fp32 variables).
  keras.config.set_dtype_policy("mixed_bfloat16" if spec.get("bf16") else "float32")
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=P.VOCAB, num_layers=s["layers"], num_heads=s["heads"],
      hidden_dim=s["hidden"], intermediate_dim=s["intermediate"], dropout=0.1,
      max_sequence_length=P.MAX_POSITIONS, num_segments=P.TYPE_VOCAB)
  ids, mask, types, labels = P.synthetic_batch(spec["batch"], spec["seq"])
  x = dict(token_ids=np.array(ids, np.int32), segment_ids=np.array(types, np.int32),
           padding_mask=np.array(mask, np.int32))
  if spec["mode"] == "infer":
    backbone.compile(jit_compile=True)
    return lambda: backbone.predict_on_batch(x)
  pooled = backbone(backbone.input)["pooled_output"]
  logits = keras.layers.Dense(P.NUM_CLASSES)(keras.layers.Dropout(0.1)(pooled))
  model = keras.Model(backbone.input, logits)
  model.compile(
      optimizer=keras.optimizers.AdamW(5e-5, weight_decay=0.01, epsilon=1e-6,
                                       global_clipnorm=1.0),
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      jit_compile=True)
  y = np.array(labels, np.int32)
  return lambda: model.train_on_batch(x, y)


if __name__ == "__main__":
  tf.config.threading.set_intra_op_parallelism_threads(P.THREADS)
  tf.config.threading.set_inter_op_parallelism_threads(P.THREADS)
  P.serve(build)
