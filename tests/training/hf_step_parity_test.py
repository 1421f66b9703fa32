"""Our fine-tuning step equals the PyTorch recipe's (Hugging Face
`transformers`; `bert.testing`, the recipe of bench/'s baselines) step for
step, from the same all-MiniLM-L6-v2 weights and WNUT-17 batches with
dropout off: model, token loss, clipping,
AdamW (epsilon inside the bias correction, decoupled weight decay) and the
warmup + linear decay schedule. A difference in any of them compounds over
the steps (Keras' "epsilon hat" alone moved the losses apart by 2e-3 after
5 steps and 0.07 after 25)."""

import numpy as np

from bert.testing import step_parity
from conftest import minilm_dir, shared_data


def test_finetuning_steps_equal_the_pytorch_recipe():
  # WNUT-17's dev file (1,009 sentences, encoded faster than train's
  # 3,394), 16 rows of 64 tokens: the same recipe at a quarter of the compute.
  rows = list(step_parity(minilm_dir(), shared_data("ner", "wnut17"),
                          steps=8, total_steps=20, batch_size=16,
                          seq_length=64, train_file="emerging.dev.conll"))
  loss_ours, loss_hf, lr_ours, lr_hf, kernel_diff, embedding_diff = map(
      np.array, zip(*rows))
  assert loss_hf[0] - loss_hf[-1] > 0.3               # it trains
  np.testing.assert_allclose(lr_ours, lr_hf, rtol=1e-5, atol=0)
  assert lr_hf.max() == 5e-5                           # the peak is reached
  np.testing.assert_allclose(loss_ours, loss_hf, rtol=0, atol=2e-4)
  assert kernel_diff.max() <= 1e-5 and embedding_diff.max() <= 1e-5
