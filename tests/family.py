"""What the BERT-family tests share: random transformers models of each
family, the family vocabularies trained on WikiText-2, and Hugging Face
folders holding both (`family_folder`)."""

import os

import torch
import transformers

from bert import testing
from bert.testing import shared_data

FAMILIES = ("bert", "roberta", "albert", "distilbert", "electra")
# A tiny shape for every family (the vocabulary's size is the tokenizer's).
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=72)


def hf_model(family, shape):
  """A random transformers model of `family` with its pre-training heads,
  its LayerNorm and bias values moved off their initial 1 and 0."""
  T = transformers
  d = dict(shape)
  if family == "roberta":
    config, cls = T.RobertaConfig(**d, type_vocab_size=1, pad_token_id=1,
                                  layer_norm_eps=1e-5), T.RobertaForMaskedLM
  elif family == "albert":
    config, cls = T.AlbertConfig(**d, embedding_size=16,
                                 hidden_act="gelu_new"), T.AlbertForPreTraining
  elif family == "distilbert":
    config = T.DistilBertConfig(
        vocab_size=d["vocab_size"], dim=d["hidden_size"],
        n_layers=d["num_hidden_layers"], n_heads=d["num_attention_heads"],
        hidden_dim=d["intermediate_size"],
        max_position_embeddings=d["max_position_embeddings"])
    cls = T.DistilBertForMaskedLM
  elif family == "electra":
    config, cls = T.ElectraConfig(**d, embedding_size=16), T.ElectraForMaskedLM
  else:
    config, cls = T.BertConfig(**d), T.BertForPreTraining
  torch.manual_seed(0)
  model = cls(config).eval()
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
        p.add_(torch.randn_like(p) * 0.1)
  return model


def tokenizer_folder(family, root) -> str:
  """A folder with `family`'s vocabulary files: MiniLM's vocab.txt (BERT,
  DistilBERT, ELECTRA), a byte-level BPE (RoBERTa) or a SentencePiece model
  (ALBERT) trained on WikiText-2, each made once under `root`."""
  if family in ("bert", "distilbert", "electra"):
    return testing.minilm_dir()
  folder = os.path.join(root, f"{family}_vocab")
  if not os.path.isdir(folder):
    corpus = shared_data("corpus", "wikitext-2", "wiki.valid.tokens")
    if family == "roberta":
      testing.train_byte_pair_vocab(folder, corpus)
    else:
      testing.train_sentencepiece_vocab(folder, corpus)
  return folder


def hf_tokenizer(family, root):
  """transformers' tokenizer of `family` on `tokenizer_folder`."""
  folder = tokenizer_folder(family, root)
  T = transformers
  if family == "roberta":
    from tokenizers import AddedToken  # pylint: disable=g-import-not-at-top
    return T.RobertaTokenizerFast.from_pretrained(
        folder, mask_token=AddedToken("<mask>", lstrip=True, rstrip=False,
                                      special=True))
  if family == "albert":
    return T.AlbertTokenizer.from_pretrained(folder)
  return T.BertTokenizerFast.from_pretrained(folder)


def family_folder(family, root, shape=None) -> str:
  """A Hugging Face folder of a random tiny `family` model with its
  pre-training heads and its tokenizer, both as `save_pretrained` writes
  them (recent transformers: tokenizer.json, no vocab file), made once
  under `root`."""
  folder = os.path.join(root, f"{family}_hf")
  if not os.path.isdir(folder):
    tokenizer = hf_tokenizer(family, root)
    model = hf_model(family, dict(shape or TINY, vocab_size=len(tokenizer)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
  return folder
