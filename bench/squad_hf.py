"""The SQuAD recipe of `configs/squad_v1.gin` with Hugging Face `transformers`
(PyTorch, CPU) from the same weights, for the README's comparison table.

  python -m bench.squad_hf --model=MINILM_DIR --data_dir=squad

The same article split, windows and labels (our reader and feature code), the
same post-processing and official EM/F1, the same hyper-parameters (batch 32,
2 epochs, AdamW lr 5e-5 with our recipe's betas/eps/decay/warmup/clipping,
dropout 0.1, max_seq_length 384, doc_stride 128, max_query_length 64, seed 42).
"""

import json
import os
import time

import torch
import transformers

from bench import _torch_recipe
from bert.data.squad_config import SquadConfig
from bert.data.squad_examples import (
    article_titles, encode_examples, read_squad, split_articles)
from bert.data.squad_eval import postprocess, squad_metrics
from bert.data.tokenization import Tokenizer


def main():
  def extra(p):
    p.add_argument("--file", default="dev-v1.1.json")
    p.add_argument("--train_fraction", type=float, default=0.8)
    p.add_argument("--doc_stride", type=int, default=128)
    p.add_argument("--max_query_length", type=int, default=64)

  args = _torch_recipe.parse_args(extra, seq_length=384, epochs=2.0)

  path = os.path.join(args.data_dir, args.file)
  train_titles, eval_titles = split_articles(
      article_titles(path), args.train_fraction, args.seed)
  tokenizer = Tokenizer(os.path.join(args.model, "vocab.txt"), lower_case=True)
  train = read_squad(path, train_titles)
  held_out = read_squad(path, eval_titles)
  squad = SquadConfig(seq_length=args.seq_length, doc_stride=args.doc_stride,
                      max_query_length=args.max_query_length)
  f_train, _ = encode_examples(train, tokenizer, squad, True)
  f_eval, meta = encode_examples(held_out, tokenizer, squad, False)
  as_t = lambda f, k: torch.tensor(f[k], dtype=torch.long)
  model = transformers.BertForQuestionAnswering.from_pretrained(
      args.model, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)

  class WithPositions(torch.nn.Module):
    """Passes `labels` (row indices) on as start/end positions."""

    def __init__(self, qa, starts, ends):
      super().__init__()
      self.qa, self.starts, self.ends = qa, starts, ends

    def forward(self, labels, **inputs):
      return self.qa(**inputs, start_positions=self.starts[labels],
                     end_positions=self.ends[labels])

  wrapper = WithPositions(model, as_t(f_train, "start_positions"),
                          as_t(f_train, "end_positions"))
  start = time.time()
  steps = _torch_recipe.train(
      wrapper, dict(input_ids=as_t(f_train, "input_word_ids"),
                    attention_mask=as_t(f_train, "input_mask"),
                    token_type_ids=as_t(f_train, "input_type_ids")),
      torch.arange(len(f_train["input_word_ids"])), args.epochs,
      args.batch_size, args.learning_rate, args.seed)
  logits = _torch_recipe.predict(model, dict(
      input_ids=as_t(f_eval, "input_word_ids"),
      attention_mask=as_t(f_eval, "input_mask"),
      token_type_ids=as_t(f_eval, "input_type_ids")))
  predictions, _, _ = postprocess(held_out, meta, logits["start_logits"],
                                  logits["end_logits"], squad)
  result = squad_metrics(held_out, predictions)
  result.update(task="squad_v1", train_questions=len(train),
                eval_questions=len(held_out), steps=steps,
                seconds=round(time.time() - start, 1))
  print(json.dumps(result))


if __name__ == "__main__":
  main()
