"""The GLUE fine-tuning recipe of `configs/glue_*.gin`, run with Hugging Face
`transformers` in PyTorch (CPU) from the same weights, for the README's
comparison table.

  python -m bench.glue_hf --task=mrpc --model=MINILM_DIR --data_dir=glue/MRPC
  python -m bench.glue_hf --task=sst-2 --model=MINILM_DIR --data_dir=glue/SST-2 \\
      --max_train_examples=10000 --seq_length=64

Same data readers (ours, so the same examples in the same order), same
hyper-parameters: batch 32, 3 epochs, AdamW lr 5e-5 (betas 0.9/0.999, eps
1e-6, weight decay 0.01 except LayerNorm weights and biases), 10% linear
warmup then linear decay, global-norm clipping 1.0, dropout 0.1, the same seq
length and seed. Prints the dev metrics as one JSON line.
"""

import json
import time

import numpy as np
import torch
import transformers

from bench import _torch_recipe
from bert.data import classification_data as cd
from bert.metrics import classification_metrics


def encode(tokenizer, examples, seq_length):
  a = [e.text_a for e in examples]
  b = [e.text_b for e in examples] if examples[0].text_b is not None else None
  enc = tokenizer(a, b, truncation="longest_first", max_length=seq_length,
                  padding="max_length", return_tensors="pt")
  return enc


def main():
  def extra(p):
    p.add_argument("--task", required=True)
    p.add_argument("--max_train_examples", type=int, default=0)

  args = _torch_recipe.parse_args(extra)
  layout = cd.glue_layout(args.task)
  train = cd.read_glue(args.task, f"{args.data_dir}/train.tsv", "train")
  if args.max_train_examples:
    train = train[:args.max_train_examples]
  dev = cd.read_glue(args.task, f"{args.data_dir}/{layout.dev_files[0]}", "dev")
  labels = list(layout.labels)
  tokenizer = transformers.BertTokenizerFast(f"{args.model}/vocab.txt",
                                             do_lower_case=True)
  model = transformers.BertForSequenceClassification.from_pretrained(
      args.model, num_labels=len(labels), hidden_dropout_prob=0.1,
      attention_probs_dropout_prob=0.1)
  x_train = encode(tokenizer, train, args.seq_length)
  y_train = torch.tensor([labels.index(e.label) for e in train])
  x_dev = encode(tokenizer, dev, args.seq_length)
  y_dev = np.array([labels.index(e.label) for e in dev])

  start = time.time()
  steps = _torch_recipe.train(
      model, {k: x_train[k] for k in ("input_ids", "attention_mask", "token_type_ids")},
      y_train, args.epochs, args.batch_size, args.learning_rate, args.seed)
  logits = _torch_recipe.predict(
      model, {k: x_dev[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
  )["logits"]
  result = classification_metrics(y_dev, logits.argmax(-1),
                                  layout.metrics)
  result.update(task=args.task, train_examples=len(train), steps=steps,
                seconds=round(time.time() - start, 1))
  print(json.dumps(result))


if __name__ == "__main__":
  main()
