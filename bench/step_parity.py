"""Step-by-step parity of our fine-tuning step with the PyTorch recipe.

Both sides start from the same weights (the checkpoint's encoder, and our
freshly initialised head copied into Hugging Face's), see the same batches
in the same order with dropout off, and use the same optimiser recipe
(AdamW, warmup, linear decay, clipping 1.0). Any difference in the model,
loss, gradient, clipping, weight decay or schedule shows up as diverging
losses and weights; a match to float32 noise over many steps leaves only
the random parts (data order, dropout masks, head init) as causes of a
metric gap between the two recipes.

  python -m bench.step_parity --model=MINILM_DIR --data_dir=ner/wnut17 --steps=30
"""

import argparse
import math
import os

import numpy as np
import tensorflow as tf
import torch
import transformers

from bench import _torch_recipe
from bert.tasks.token_classification import TokenClassificationTask
from bert.training import run as run_lib
from bert.training.optimization import OptimizerConfig, build_optimizer
from bert.training.trainer import Trainer


def _hf_state_from_ours(model, hf):
  """Copies our token head into `hf.classifier` (Dense kernel [in, out] ->
  Linear weight [out, in])."""
  kernel, bias = model.get_layer("token_logits").get_weights()
  with torch.no_grad():
    hf.classifier.weight.copy_(torch.from_numpy(kernel.T.copy()))
    hf.classifier.bias.copy_(torch.from_numpy(bias))


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--model", required=True)
  p.add_argument("--data_dir", required=True)
  p.add_argument("--steps", type=int, default=30)
  p.add_argument("--total_steps", type=int, default=319,
                 help="schedule length (WNUT-17 3 epochs: 319)")
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--learning_rate", type=float, default=5e-5)
  p.add_argument("--ours_lr_scale", type=float, default=1.0,
                 help="our peak rate x this (our warmup peaks at 0.9 x lr)")
  args = p.parse_args()
  torch.set_num_threads(2)

  runtime = run_lib.RuntimeConfig(strategy="one_device")
  strategy = run_lib._setup(runtime)   # pylint: disable=protected-access
  task = TokenClassificationTask(
      train_file="wnut17train.conll", data_dir=args.data_dir,
      init_checkpoint=args.model, seq_length=128,
      global_batch_size=args.batch_size, dropout_rate=0.0)
  import dataclasses
  task.config = dataclasses.replace(task.config, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0)
  with strategy.scope():
    model = task.build_model()
    optimizer = build_optimizer(OptimizerConfig(
        learning_rate=args.learning_rate * args.ours_lr_scale, num_train_steps=args.total_steps,
        warmup_fraction=0.1))
  task.initialize(model)
  trainer = Trainer(task, model, optimizer, strategy, clip_norm=1.0,
                    train_steps=args.total_steps, log_fn=None)

  hf = transformers.BertForTokenClassification.from_pretrained(
      args.model, num_labels=len(task.labels), hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0)
  _hf_state_from_ours(model, hf)

  f = task.features("train")
  rng = np.random.RandomState(0)
  order = rng.permutation(len(f["input_word_ids"]))
  keys = ("input_word_ids", "input_mask", "input_type_ids", "label_ids")

  # The torch optimiser, exactly as bench/_torch_recipe.train builds it.
  decay = [p for n, p in hf.named_parameters()
           if not any(k in n for k in ("LayerNorm", "bias"))]
  no_decay = [p for n, p in hf.named_parameters()
              if any(k in n for k in ("LayerNorm", "bias"))]
  topt = torch.optim.AdamW(
      [dict(params=decay, weight_decay=0.01), dict(params=no_decay, weight_decay=0.0)],
      lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
  sched = transformers.get_linear_schedule_with_warmup(
      topt, int(0.1 * args.total_steps), args.total_steps)
  hf.train()

  def batches():
    for step in range(args.steps):
      idx = order[step * args.batch_size:(step + 1) * args.batch_size]
      yield {k: f[k][idx] for k in keys}

  print("step  loss_ours  loss_hf   lr_ours    lr_hf     max|dW|/max|W| (classifier, word emb, layer0 q)")
  it = iter(list(batches()))
  for step, batch in enumerate(batches()):
    # Ours: the real Trainer step on this batch.
    tfb = {k: tf.constant(v) for k, v in batch.items()}
    out = model(task.model_inputs(tfb), training=False)
    stats = task.compute_stats(tfb, out)
    loss_ours = float(stats["loss"][0] / stats["loss"][1])
    lr_ours = float(optimizer.learning_rate(optimizer.iterations)) \
        if callable(optimizer.learning_rate) else float(optimizer.learning_rate)
    trainer.train_step(iter([tfb]))
    # HF: the recipe's step on the same batch.
    tb = _torch_recipe.trim(dict(
        input_ids=torch.from_numpy(batch["input_word_ids"]).long(),
        attention_mask=torch.from_numpy(batch["input_mask"]).long(),
        token_type_ids=torch.from_numpy(batch["input_type_ids"]).long(),
        labels=torch.from_numpy(batch["label_ids"]).long().masked_fill(
            torch.from_numpy(batch["label_ids"]) < 0, -100)))
    lr_hf = sched.get_last_lr()[0]
    loss = hf(**tb).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
    topt.step(); sched.step(); topt.zero_grad()
    # Weight differences after the step.
    k = model.get_layer("token_logits").get_weights()[0]
    dk = np.abs(k.T - hf.classifier.weight.detach().numpy()).max() / np.abs(k).max()
    emb = [v for v in model.trainable_variables if "word_embeddings" in v.name][0].numpy()
    de = np.abs(emb - hf.bert.embeddings.word_embeddings.weight.detach().numpy()).max() / np.abs(emb).max()
    print(f"{step + 1:4d}  {loss_ours:.5f}  {loss.item():.5f}  {lr_ours:.3e}  {lr_hf:.3e}  "
          f"{dk:.2e}  {de:.2e}", flush=True)


if __name__ == "__main__":
  main()
