"""Benchmark worker for real-length data (`bench.real_lengths`), real
all-MiniLM-L6-v2 weights:

  python -m bench._real_worker ours|hf DATA.npz ...

`ours`: inference with `bert.data.length_buckets.predict_by_length` (rows in
length order, batches cut to a few fixed lengths); fine-tuning through this
library's training loop (`bert.training.Trainer`) fed by
`FinetuningTask.build_inputs` (length-grouped batches cut to their bucket).
With `pack` in the spec: `bert.data.packing.predict_packed` (examples packed
into rows of the length `choose_row_length` picks, 32 rows per batch) and
`FinetuningInputs(pack=True)` (each step's 32 examples packed into as few rows
of its chosen length as they fill).
SST-2 and MRPC (`pooled_only` in the spec) run as sentence classification:
our classifier computes the last layer for the [CLS] rows only
(the encoder's `pooled_only=True`); SQuAD rows run the whole encoder: inference
outputs every token, and training puts a loss on every real token (a token
classifier, the cost of span training).
`hf`: `transformers` BertModel / BertForSequenceClassification in PyTorch,
as its users run it: batches in file order (inference) or a seeded random
order (training), each padded to its longest row.

Each step returns the real (non-padding) tokens it processed; the protocol
reply's "work" is their sum, so the driver reports real tokens/s.
`bf16` in the spec: ours under tf_keras' `mixed_bfloat16` policy, HF under
`torch.autocast("cpu", dtype=torch.bfloat16)` (bf16 matmuls, fp32 weights
and optimizer state in both).
"""

import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from bench import _protocol as P  # noqa: E402

BATCH = 32


def _load(path):
  with np.load(path) as f:
    return {k: f[k] for k in f.files}


def _ours(spec, model_dir):
  import bert  # pylint: disable=g-import-not-at-top,unused-import  # before TF: its oneDNN default
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert.data import length_buckets as lb  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(P.THREADS)
  tf.config.threading.set_inter_op_parallelism_threads(P.THREADS)
  data = _load(spec["data"])
  inputs = {k: data[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
  seq = inputs["input_mask"].shape[1]
  buckets = lb.default_length_buckets(seq)
  if spec["mode"] == "infer":
    from bert import checkpoints  # pylint: disable=g-import-not-at-top
    from bert.data import packing  # pylint: disable=g-import-not-at-top
    loaded = checkpoints.load(model_dir)
    encoder = loaded.encoder
    # Sentence classification (sst2, mrpc) needs the pooled vector only, and
    # our classifier computes it with `pooled_only=True`; SQuAD needs every
    # token's output, so there the whole encoder runs.
    pooled_only = bool(spec.get("pooled_only"))
    encode = lambda x, training: encoder(x, training=training,
                                         pooled_only=pooled_only)
    forward = tf.function(
        lambda x: dict(pooled_output=tf.cast(
            encode(x, training=False)["pooled_output"], tf.float32)),
        jit_compile=spec.get("xla", False))
    real = int(inputs["input_mask"].sum())
    name = "packed" if spec.get("pack") else "ours"
    # The library's choice of packed row length (as `FinetuningInputs(pack=
    # True)` makes it for predictions): the bucket of least estimated cost.
    row_length = packing.choose_row_length(
        inputs["input_mask"].sum(1), buckets, loaded.config.hidden_size)

    def infer():
      if spec.get("pack"):
        out = packing.predict_packed(forward, inputs, BATCH, seq,
                                     row_length=row_length)
      else:
        out = lb.predict_by_length(forward, inputs, BATCH, buckets)
      np.save(spec["data"] + f".{name}_pooled.npy", out["pooled_output"])
      return real

    return infer
  return _ours_train(spec, model_dir, data, seq)


def _ours_train(spec, model_dir, data, seq):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert.models import BertClassifier, BertTokenClassifier  # pylint: disable=g-import-not-at-top
  from bert.networks import BertEncoder  # pylint: disable=g-import-not-at-top
  from bert.tasks import FinetuningTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import DataFiles, EncoderSource, FinetuningInputs  # pylint: disable=g-import-not-at-top
  from bert.losses import example_weights, softmax_stats  # pylint: disable=g-import-not-at-top
  from bert.training import OptimizerConfig, Trainer, build_optimizer  # pylint: disable=g-import-not-at-top

  class Rows(FinetuningTask):
    """Sentence classification on `label` (pooled output only)."""
    loss_names = ("loss",)
    stat_names = ("loss", "accuracy")
    packable = True

    def encode(self, split):
      return data

    def build_model(self):
      return BertClassifier(BertEncoder(self.config), 2, dropout_rate=0.1)

    def loss_denominators(self, f):
      return dict(loss=tf.reduce_sum(example_weights(f, f["label"])))

    def compute_stats(self, f, outputs):
      return softmax_stats(outputs["logits"], f["label"],
                           example_weights(f, f["label"]))

  class Tokens(Rows):
    """A loss on every real token (`label_ids`, -1 on padding), so the whole
    encoder runs as in SQuAD span training."""
    pack_pad_values = {"label_ids": -1}

    def encode(self, split):
      return dict(data, label_ids=np.where(data["input_mask"] > 0, 0, -1).astype(np.int32))

    def build_model(self):
      return BertTokenClassifier(BertEncoder(self.config), 2, dropout_rate=0.1)

    def loss_denominators(self, f):
      return dict(loss=tf.reduce_sum(tf.cast(f["label_ids"] >= 0, tf.float32)))

    def compute_stats(self, f, outputs):
      return softmax_stats(outputs["logits"], tf.maximum(f["label_ids"], 0),
                           tf.cast(f["label_ids"] >= 0, tf.float32))

  task = (Rows if spec.get("pooled_only") else Tokens)(
      data=DataFiles(), encoder=EncoderSource(init_checkpoint=model_dir),
      inputs=FinetuningInputs(seq_length=seq, global_batch_size=BATCH,
                              pack=bool(spec.get("pack"))))
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    model = task.build_model()
    optimizer = build_optimizer(OptimizerConfig(
        learning_rate=5e-5, num_train_steps=10**6, warmup_steps=100))
  task.initialize(model)
  trainer = Trainer(task, model, optimizer, strategy, log_fn=None,
                    jit_compile=spec.get("xla", False))
  trainer.train_dataset = strategy.distribute_datasets_from_function(
      lambda ctx: task.build_inputs(ctx, training=True))
  steps = spec["steps"]
  # Real tokens of a step: the batch size times the mean row length (the
  # expected value over the shuffled epoch; both implementations count so).
  per_step = BATCH * float(data["input_mask"].sum(1).mean())
  n = tf.constant(steps, tf.int32)

  def train():
    trainer.train(n)
    return int(round(per_step * steps))

  return train


def _hf(spec, model_dir):
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from bench import _torch_recipe  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(P.THREADS)
  autocast = ((lambda: torch.autocast("cpu", dtype=torch.bfloat16))
              if spec.get("bf16") else contextlib.nullcontext)
  data = _load(spec["data"])
  x = dict(input_ids=torch.tensor(data["input_word_ids"], dtype=torch.long),
           attention_mask=torch.tensor(data["input_mask"], dtype=torch.long),
           token_type_ids=torch.tensor(data["input_type_ids"], dtype=torch.long))
  if spec["mode"] == "infer":
    model = transformers.BertModel.from_pretrained(model_dir).eval()
    real = int(data["input_mask"].sum())

    def infer():
      with autocast():
        out = _torch_recipe.predict(
            lambda **b: dict(pooled_output=model(**b).pooler_output.float()),
            x, BATCH)
      np.save(spec["data"] + ".hf_pooled.npy", out["pooled_output"])
      return real

    return infer
  token_level = not spec.get("pooled_only")
  model = (transformers.BertForTokenClassification if token_level
           else transformers.BertForSequenceClassification).from_pretrained(
               model_dir, num_labels=2).train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, eps=1e-6,
                                weight_decay=0.01)
  labels = torch.tensor(data["label"], dtype=torch.long)
  if token_level:   # the loss on every real token, as in `Tokens`
    labels = torch.where(x["attention_mask"] > 0, 0, -100)
  generator = torch.Generator().manual_seed(0)
  per_step = BATCH * float(data["input_mask"].sum(1).mean())

  def train():
    for _ in range(spec["steps"]):
      idx = torch.randint(len(labels), (BATCH,), generator=generator)
      batch = _torch_recipe.trim(dict({k: v[idx] for k, v in x.items()},
                                      labels=labels[idx]))
      with autocast():
        loss = model(**batch).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      optimizer.zero_grad()
    return int(round(per_step * spec["steps"]))

  return train


def build(spec):
  impl, model_dir = sys.argv[1], sys.argv[2]
  if impl != "ours":
    return _hf(spec, model_dir)
  from bert import precision  # pylint: disable=g-import-not-at-top
  with precision.policy_scope("mixed_bfloat16" if spec.get("bf16") else "float32"):
    return _ours(spec, model_dir)


if __name__ == "__main__":
  P.serve(build)
