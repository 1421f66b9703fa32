"""Benchmark worker for Hugging Face `transformers` BertModel in PyTorch (CPU),
run as its users run it: `model.eval()` + `torch.inference_mode()` for
inference; `BertForSequenceClassification` (dropout 0.1 + linear on the
pooled output) with `torch.optim.AdamW` and clipping 1.0 for training.

  python -m bench._torch_worker
"""

import contextlib

import torch
import transformers

from bench import _protocol as P


def _config(spec):
  s = P.SHAPES[spec["model"]]
  return transformers.BertConfig(
      vocab_size=P.VOCAB, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
      num_attention_heads=s["heads"], intermediate_size=s["intermediate"],
      max_position_embeddings=P.MAX_POSITIONS, type_vocab_size=P.TYPE_VOCAB,
      num_labels=P.NUM_CLASSES,
      # Hugging Face's "gelu" is the erf form; its fused tanh form is
      # "gelu_pytorch_tanh" (one kernel, where "gelu_new" is five ops).
      hidden_act="gelu" if P.gelu_form(spec) == "erf" else "gelu_pytorch_tanh")


def build(spec):
  if spec["mode"] == "matmul":
    n = spec["seq"]
    dtype = torch.bfloat16 if spec.get("bf16") else torch.float32
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    return lambda: torch.matmul(a, b).float().sum().item()
  ids, mask, types, labels = P.synthetic_batch(spec["batch"], spec["seq"])
  x = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
           token_type_ids=torch.tensor(types))
  # bf16: torch.autocast (bf16 matmuls, fp32 weights and optimizer state).
  autocast = ((lambda: torch.autocast("cpu", dtype=torch.bfloat16))
              if spec.get("bf16") else contextlib.nullcontext)
  if spec["mode"] == "infer":
    model = transformers.BertModel(_config(spec)).eval()

    def forward():
      with torch.inference_mode(), autocast():
        out = model(**x)
        return (out.last_hidden_state.float().sum() +
                out.pooler_output.float().sum()).item()

    return forward
  model = transformers.BertForSequenceClassification(_config(spec)).train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, eps=1e-6,
                                weight_decay=0.01)
  y = torch.tensor(labels)

  def step():
    with autocast():
      loss = model(**x, labels=y).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()

  return step


if __name__ == "__main__":
  torch.set_num_threads(P.THREADS)
  P.serve(build)
