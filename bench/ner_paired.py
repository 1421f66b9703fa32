"""WNUT-17 with the same initial weights on both sides: our recipe
(`configs/ner_wnut17.gin`, the `bert-train` code path) started from the
encoder *and* the token-classification head that `bench.ner_hf` starts from
at the same seed.

  python -m bench.ner_paired --model=MINILM_DIR --data_dir=ner/wnut17 \\
      --seed=N --model_dir=runs/wnut17_paired_N

The head is a fresh 384 x 13 random draw on each side, and across seeds it
moves the test F1 by several points on both sides (the runs are short: 319
steps). Comparing ours and Hugging Face over seeds therefore compares two
sets of head draws as much as two trainers; starting ours from Hugging
Face's draw removes that part, leaving data order and dropout masks as the
only random parts that differ. Prints our final metrics as JSON.
"""

import argparse
import json
import os

import numpy as np


def hf_initial_head(model, num_labels, seed):
  """Kernel [hidden, labels] and bias of `BertForTokenClassification`'s
  classifier as `bench.ner_hf` draws it (torch seeded, then loaded)."""
  import torch  # pylint: disable=g-import-not-at-top
  from bench import ner_hf  # pylint: disable=g-import-not-at-top
  torch.manual_seed(seed)
  classifier = ner_hf.token_classifier(model, num_labels).classifier
  return (classifier.weight.detach().numpy().T.copy(),
          classifier.bias.detach().numpy().copy())


def main():
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--model", required=True)
  p.add_argument("--data_dir", required=True)
  p.add_argument("--model_dir", required=True)
  p.add_argument("--seed", type=int, default=42)
  args = p.parse_args()

  import gin  # pylint: disable=g-import-not-at-top
  from bert import configs, tasks  # pylint: disable=g-import-not-at-top,unused-import
  from bert.training import run as runner  # pylint: disable=g-import-not-at-top
  gin.parse_config_files_and_bindings(
      [os.path.join(os.path.dirname(configs.__file__), "ner_wnut17.gin")],
      [f"INIT_CHECKPOINT = {args.model!r}", f"DATA_DIR = {args.data_dir!r}",
       f"RuntimeConfig.seed = {args.seed}",
       f"FinetuningInputs.seed = {args.seed}"])
  task = tasks.build_task()
  kernel, bias = hf_initial_head(args.model, len(task.labels), args.seed)
  initialize = task.initialize

  def initialize_with_hf_head(model):
    initialize(model)
    dense = [l for l in model.submodules if l.name == "token_logits"][0]
    if tuple(dense.kernel.shape) != kernel.shape:
      raise ValueError(f"head shapes differ: ours {dense.kernel.shape}, "
                       f"HF {kernel.shape}")
    dense.kernel.assign(kernel)
    dense.bias.assign(bias)

  task.initialize = initialize_with_hf_head
  _, results = runner.run_experiment(task, args.model_dir, "train_and_eval",
                                  runner.RuntimeConfig(mixed_precision="fp32"), runner.OptimizerConfig())
  print(json.dumps(dict({k: float(v) for k, v in results.items()},
                        task="wnut17_paired", seed=args.seed)))


if __name__ == "__main__":
  main()
