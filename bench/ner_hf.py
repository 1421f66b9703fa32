"""The NER recipe of `configs/ner_wnut17.gin` with Hugging Face `transformers`
(PyTorch, CPU) from the same weights, for the README's comparison table.

  python -m bench.ner_hf --model=MINILM_DIR --data_dir=ner/wnut17

Identical input rows (our CoNLL reader and first-piece label alignment, so
both models see the same ids and labels), identical hyper-parameters (batch
32, 3 epochs, AdamW lr 5e-5, betas 0.9/0.999, eps 1e-6, weight decay 0.01
except LayerNorm/bias, 10% warmup + linear decay, clipping 1.0, dropout 0.1,
seq 128, seed 42) and the same seqeval entity F1 on the test file.
"""

import json
import os
import time

import torch
import transformers

from bench import _torch_recipe
from bert.data import ner_data
from bert.data.tokenization import Tokenizer
from bert.tasks.token_classification import entity_metrics


def token_classifier(model, num_labels):
  """`BertForTokenClassification` from the weights in folder `model`, with a
  freshly drawn head (torch's global RNG) and the recipe's dropout."""
  return transformers.BertForTokenClassification.from_pretrained(
      model, num_labels=num_labels, hidden_dropout_prob=0.1,
      attention_probs_dropout_prob=0.1)


def main():
  def extra(p):
    p.add_argument("--train_file", default="wnut17train.conll")
    p.add_argument("--eval_file", default="emerging.test.annotated")

  args = _torch_recipe.parse_args(extra)

  tokenizer = Tokenizer(os.path.join(args.model, "vocab.txt"), lower_case=True)
  train = ner_data.read_conll(os.path.join(args.data_dir, args.train_file))
  test = ner_data.read_conll(os.path.join(args.data_dir, args.eval_file))
  labels = ner_data.label_list(train)
  f_train = ner_data.encode_sentences(train, tokenizer, args.seq_length, labels)
  f_test = ner_data.encode_sentences(test, tokenizer, args.seq_length, labels)
  as_t = lambda f, k: torch.tensor(f[k], dtype=torch.long)
  model = token_classifier(args.model, len(labels))

  y = as_t(f_train, "label_ids").masked_fill(as_t(f_train, "label_ids") < 0, -100)
  start = time.time()
  steps = _torch_recipe.train(
      model, dict(input_ids=as_t(f_train, "input_word_ids"),
                  attention_mask=as_t(f_train, "input_mask"),
                  token_type_ids=as_t(f_train, "input_type_ids")),
      y, args.epochs, args.batch_size, args.learning_rate, args.seed)
  logits = _torch_recipe.predict(model, dict(
      input_ids=as_t(f_test, "input_word_ids"),
      attention_mask=as_t(f_test, "input_mask"),
      token_type_ids=as_t(f_test, "input_type_ids")))["logits"]
  words = ner_data.word_predictions(test, f_test, logits.argmax(-1), labels)
  result = entity_metrics([s.tags for s in test], words)
  result.update(task="wnut17", steps=steps, seconds=round(time.time() - start, 1))
  print(json.dumps(result))


if __name__ == "__main__":
  main()
