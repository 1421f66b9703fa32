"""The fine-tuning recipe of our gin configs, in PyTorch, for the comparison
scripts: AdamW (betas 0.9/0.999, eps 1e-6, weight decay 0.01 except LayerNorm
weights and biases), 10% linear warmup then linear decay, clipping 1.0, a
seeded shuffle per epoch. Batches are cut to their longest row (padding to
the longest sequence in each batch, as Hugging Face's own collators do): the
same numbers as full-length padding, with no compute on trailing padding."""

import argparse
import math
import time

import numpy as np
import torch


def parse_args(extra, seq_length=128, epochs=3.0):
  """The recipe's flags (--model, --data_dir, --seq_length, --batch_size,
  --epochs, --learning_rate, --seed, --threads), plus the script's own:
  `extra(parser)` adds them. Also sets the seed and thread count."""
  p = argparse.ArgumentParser()
  p.add_argument("--model", required=True)
  p.add_argument("--data_dir", required=True)
  p.add_argument("--seq_length", type=int, default=seq_length)
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--epochs", type=float, default=epochs)
  p.add_argument("--learning_rate", type=float, default=5e-5)
  p.add_argument("--seed", type=int, default=42)
  p.add_argument("--threads", type=int, default=2)
  extra(p)
  args = p.parse_args()
  torch.manual_seed(args.seed)
  torch.set_num_threads(args.threads)
  return args


def trim(batch, mask_key="attention_mask"):
  """Cuts every tensor of `batch` whose last axis is the padded sequence axis
  down to the longest row of `batch[mask_key]` (1 = real token)."""
  mask = batch[mask_key]
  full = mask.shape[-1]
  longest = int(mask.reshape(-1, full).sum(-1).max())
  return {k: (v[..., :longest].contiguous() if v.dim() >= 2 and v.shape[-1] == full
              else v)
          for k, v in batch.items()}


def predict(model, tensors, batch_size=64, pad_value=-1e9):
  """Runs `model` on all rows of `tensors` (dict of model inputs) in order
  and returns each output named in the model's output dict as one NumPy
  array, per-token outputs padded back to the full sequence length."""
  n = len(next(iter(tensors.values())))
  full = tensors["attention_mask"].shape[-1]
  parts = {}
  with torch.no_grad():
    for i in range(0, n, batch_size):
      out = model(**trim({k: v[i:i + batch_size] for k, v in tensors.items()}))
      for k, v in out.items():
        v = v.numpy()
        if v.ndim >= 2 and v.shape[1] < full:   # [batch, seq, ...] cut
          pad = [(0, 0)] * v.ndim
          pad[1] = (0, full - v.shape[1])
          v = np.pad(v, pad, constant_values=pad_value)
        parts.setdefault(k, []).append(v)
  return {k: np.concatenate(v) for k, v in parts.items()}


def optimizer(model, learning_rate, steps):
  """The recipe's (AdamW, linear schedule with 10% warmup) for `steps` steps
  (`bert.testing`, which the step-parity test shares; imported here, not at
  the top, so the serving workers that only `trim` and `predict` never
  import the library)."""
  from bert import testing  # pylint: disable=g-import-not-at-top
  return testing.torch_recipe_optimizer(model, learning_rate, steps)


def step(model, adamw, schedule, batch):
  """One training step on `batch` (model inputs and labels, cut to its
  longest row): forward, backward, clipping to 1.0, update. Returns the
  loss."""
  from bert import testing  # pylint: disable=g-import-not-at-top
  return testing.torch_recipe_step(model, adamw, schedule, trim(batch))


def train(model, tensors, labels, epochs, batch_size, learning_rate, seed):
  """Fine-tunes `model` (in place) on rows of `tensors` (dict of model inputs)
  and `labels`; returns the number of steps."""
  n = len(labels)
  steps = int(math.ceil(n * epochs / batch_size))
  adamw, schedule = optimizer(model, learning_rate, steps)
  generator = torch.Generator().manual_seed(seed)
  order = torch.cat([torch.randperm(n, generator=generator)
                     for _ in range(int(math.ceil(epochs)) + 1)])
  model.train()
  start = time.time()
  for i in range(steps):
    idx = order[i * batch_size:(i + 1) * batch_size]
    loss = step(model, adamw, schedule,
                dict({k: v[idx] for k, v in tensors.items()}, labels=labels[idx]))
    if (i + 1) % 50 == 0:
      print(f"step {i + 1}/{steps} loss {loss:.4f} "
            f"{(i + 1) * batch_size / (time.time() - start):.1f} ex/s",
            flush=True)
  model.eval()
  return steps
