"""Step-by-step parity of our fine-tuning step with the PyTorch recipe.

Both sides start from the same weights (the checkpoint's encoder, and our
freshly initialised head copied into Hugging Face's), see the same batches
in the same order with dropout off, and use the same optimiser recipe
(AdamW, 10% warmup, linear decay, clipping 1.0; `bench/_torch_recipe.py`).
Any difference in the model, loss, gradient, clipping, weight decay, Adam's
epsilon or the schedule shows up as diverging losses and weights; a match to
float32 noise over many steps leaves only the random parts (data order,
dropout masks, head init) as causes of a metric gap between the recipes.

  python -m bench.step_parity --model=MINILM_DIR --data_dir=ner/wnut17 --steps=40

(`tests/training/hf_step_parity_test.py` runs a few steps of it.)
"""

import argparse
import dataclasses

import numpy as np
import tensorflow as tf
import torch
import transformers

from bench import _torch_recipe
from bert.tasks.configs import (EncoderSource, FinetuningInputs, HeadConfig,
                                TaggingData)
from bert.tasks.token_classification import TokenClassificationTask
from bert.training import run as run_lib
from bert.optimization import OptimizerConfig, build_optimizer
from bert.training.trainer import Trainer


def compare(model_dir, data_dir, steps=40, total_steps=319, batch_size=32,
            learning_rate=5e-5, train_file="wnut17train.conll", state=None,
            seq_length=128):
  """Runs `steps` steps of WNUT-17 token classification on both sides;
  yields per step (loss_ours, loss_hf, lr_ours, lr_hf, classifier kernel
  and word-embedding max abs difference / max abs value) after the step.
  `state` (a dict), if given, receives the task and both models."""
  torch.set_num_threads(2)
  runtime = run_lib.RuntimeConfig(strategy="one_device")
  strategy = run_lib.setup(runtime)
  task = TokenClassificationTask(
      data=TaggingData(data_dir=data_dir, train_file=train_file),
      encoder=EncoderSource(init_checkpoint=model_dir),
      inputs=FinetuningInputs(seq_length=seq_length, global_batch_size=batch_size),
      head=HeadConfig(dropout_rate=0.0))
  task.config = dataclasses.replace(task.config, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0)
  with strategy.scope():
    model = task.build_model()
    optimizer = build_optimizer(OptimizerConfig(
        learning_rate=learning_rate, num_train_steps=total_steps,
        warmup_fraction=0.1))
  task.initialize(model)
  trainer = Trainer(task, model, optimizer, strategy, clip_norm=1.0,
                    train_steps=total_steps, log_fn=None)

  hf = transformers.BertForTokenClassification.from_pretrained(
      model_dir, num_labels=len(task.labels), hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0)
  kernel, bias = model.get_layer("token_logits").get_weights()
  with torch.no_grad():   # Dense kernel [in, out] -> Linear weight [out, in]
    hf.classifier.weight.copy_(torch.from_numpy(kernel.T.copy()))
    hf.classifier.bias.copy_(torch.from_numpy(bias))
  hf_optimizer, hf_schedule = _torch_recipe.optimizer(
      hf, learning_rate, total_steps)
  hf.train()

  f = task.features("train")
  rng = np.random.RandomState(0)
  n = len(f["input_word_ids"])
  order = np.concatenate([rng.permutation(n)
                          for _ in range(steps * batch_size // n + 1)])
  if state is not None:
    state.update(task=task, model=model, hf=hf)
  keys = ("input_word_ids", "input_mask", "input_type_ids", "label_ids")
  word_embeddings = [v for v in model.trainable_variables
                     if "word_embeddings" in v.name][0]
  for step in range(steps):
    idx = order[step * batch_size:(step + 1) * batch_size]
    batch = {k: f[k][idx] for k in keys}
    # Ours: the real Trainer step on this batch.
    tf_batch = {k: tf.constant(v) for k, v in batch.items()}
    stats = task.compute_stats(tf_batch, model(task.model_inputs(tf_batch),
                                               training=False))
    loss_ours = float(stats["loss"][0] / stats["loss"][1])
    lr_ours = float(optimizer.learning_rate(optimizer.iterations))
    trainer.train_step(iter([tf_batch]))
    # Hugging Face: the recipe's step on the same batch.
    labels = torch.from_numpy(batch["label_ids"]).long()
    lr_hf = hf_schedule.get_last_lr()[0]
    loss_hf = _torch_recipe.step(hf, hf_optimizer, hf_schedule, dict(
        input_ids=torch.from_numpy(batch["input_word_ids"]).long(),
        attention_mask=torch.from_numpy(batch["input_mask"]).long(),
        token_type_ids=torch.from_numpy(batch["input_type_ids"]).long(),
        labels=labels.masked_fill(labels < 0, -100)))
    k = model.get_layer("token_logits").get_weights()[0]
    dk = np.abs(k.T - hf.classifier.weight.detach().numpy()).max() / np.abs(k).max()
    emb = word_embeddings.numpy()
    de = (np.abs(emb - hf.bert.embeddings.word_embeddings.weight.detach().numpy())
          .max() / np.abs(emb).max())
    yield loss_ours, loss_hf, lr_ours, lr_hf, dk, de


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--model", required=True)
  p.add_argument("--data_dir", required=True)
  p.add_argument("--steps", type=int, default=40)
  p.add_argument("--total_steps", type=int, default=319,
                 help="schedule length (WNUT-17, 3 epochs: 319)")
  args = p.parse_args()
  print("step  loss_ours  loss_hf   lr_ours    lr_hf      "
        "max|dW|/max|W|: classifier  word embeddings")
  for step, (lo, lh, ro, rh, dk, de) in enumerate(
      compare(args.model, args.data_dir, args.steps, args.total_steps), 1):
    print(f"{step:4d}  {lo:.5f}  {lh:.5f}  {ro:.3e}  {rh:.3e}  {dk:.2e}  {de:.2e}",
          flush=True)


if __name__ == "__main__":
  main()
