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

The comparison is `bert.testing.step_parity`;
`tests/training/hf_step_parity_test.py` runs a few steps of it.
"""

import argparse

from bert import testing


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
      testing.step_parity(args.model, args.data_dir, args.steps,
                          args.total_steps), 1):
    print(f"{step:4d}  {lo:.5f}  {lh:.5f}  {ro:.3e}  {rh:.3e}  {dk:.2e}  {de:.2e}",
          flush=True)


if __name__ == "__main__":
  main()
