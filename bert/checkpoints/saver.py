"""`save`: a loaded checkpoint or an encoder written as a checkpoint folder
in one of the writable formats (`load` reads them back)."""

import json
import os
from typing import Optional, Union

import tensorflow as tf
from absl import logging

from bert.checkpoints import google_research
from bert.checkpoints import hf
from bert.checkpoints import mapping
from bert.checkpoints import model_garden
from bert.checkpoints import tf1
from bert.checkpoints.errors import CheckpointError
from bert.checkpoints.loader import (WRITABLE_FORMATS, BertCheckpoint,
                                     _tf2_objects)
from bert.checkpoints.reader import GOOGLE_CONFIG, HF_CONFIG, METADATA_FILE
from bert.checkpoints.reader import TF2_PREFIX as _TF2_PREFIX
from bert.checkpoints.reader import check_vocab as _check_vocab
from bert.io import atomic_folder
from bert.networks.bert_encoder import BertEncoder
from bert.validation import renamed_keywords


@renamed_keywords(do_lower_case="lower_case")
def save(obj: Union[BertCheckpoint, BertEncoder], path: str,
         format: str = "tf2", *, vocab_file: Optional[str] = None,
         lower_case: Optional[bool] = None) -> str:
  """Writes `obj` as a checkpoint folder at `path`; returns `path`.

  Formats: "tf2" (ours), "tf1" (google-research names, loadable by its
  `modeling.py`), "hf" (safetensors + config.json for `transformers`),
  "model_garden" (`tf.train.Checkpoint(encoder=...)` that
  `tfm.nlp.networks.BertEncoder` restores, + bert_config.json). The
  pre-training heads are written when `obj` has them, except to
  "model_garden", whose heads have another design (a warning says so); so is
  an ELECTRA discriminator's head (`obj.discriminator`: to "hf" as
  ElectraForPreTraining, which holds no masked-LM head beside it). The
  write is atomic: a temp folder beside `path` is filled and then renamed, so
  an interrupted save never leaves a half-written checkpoint where a good one
  was.
  """
  if isinstance(obj, BertEncoder):
    obj = BertCheckpoint(config=obj.config, encoder=obj)
  if format not in WRITABLE_FORMATS:
    hint = {"tfhub": " (a TF Hub SavedModel: bert-export --kind=encoder)",
            "keras_hub": " (KerasHub reads the \"hf\" format: "
                         "BertBackbone.from_preset(folder))"}.get(format, "")
    raise CheckpointError(f"cannot write format {format!r}; use one of "
                          f"{', '.join(WRITABLE_FORMATS)}{hint}")
  if format == "model_garden":
    model_garden.check_writable(obj.config)
  if obj.next_sentence is not None and obj.masked_lm is None:
    raise CheckpointError("save: a sentence head (next_sentence) needs the "
                          "masked-LM head (masked_lm) too")
  if obj.config.family == "bert" and (obj.masked_lm is None) != (
      obj.next_sentence is None):
    raise CheckpointError("save: give both pre-training heads (masked_lm and "
                          "next_sentence) or neither")
  if obj.next_sentence is not None and obj.config.sentence_task is None:
    raise CheckpointError(f"save: a {obj.config.family} model has no sentence "
                          "head (next_sentence); BERT and ALBERT do")
  if obj.discriminator is not None and obj.config.family != "electra":
    raise CheckpointError(f"save: a discriminator head is ELECTRA's; this is "
                          f"a {obj.config.family} encoder")
  if (format == "hf" and obj.discriminator is not None
      and obj.masked_lm is not None):
    raise CheckpointError("save: a Hugging Face ELECTRA folder holds either "
                          "the discriminator head (ElectraForPreTraining) or "
                          "the masked-LM head (ElectraForMaskedLM), not both")
  if obj.masked_lm is not None and obj.masked_lm.embedding_table is None:
    raise CheckpointError("save: the masked-LM head is not tied to the word "
                          "embeddings; BERT checkpoint formats store only tied "
                          "heads")
  if format == "tf1" and obj.config.hidden_act not in ("gelu", "relu", "tanh",
                                                       "linear"):
    logging.warning(
        "hidden_act=%r is not understood by google-research modeling.py; the "
        "TF1 checkpoint loads here but not there", obj.config.hidden_act)
  if format == "model_garden" and (obj.masked_lm is not None
                                   or obj.discriminator is not None):
    logging.warning(
        "Model Garden checkpoints hold the encoder only here: its pre-training "
        "heads differ from BERT's (a next-sentence head with its own pooler), "
        "so the masked-LM and next-sentence heads are not written")
  vocab_file = vocab_file or obj.vocab_file
  lower_case = obj.lower_case if lower_case is None else lower_case
  vocabulary = (_check_vocab(vocab_file, obj.config)
                if vocab_file is not None else None)
  with _atomic_folder(path) as tmp:
    # Our metadata goes into every format; the other ecosystems' readers
    # ignore the extra file, and it keeps the casing where they have no
    # place for it (TF1). The files' key is do_lower_case, as in
    # transformers' tokenizer_config.json and TF Hub's asset.
    _write_json(os.path.join(tmp, METADATA_FILE), dict(
        format="bert-tf2" if format == "tf2" else format, version=1,
        checkpoint=_TF2_PREFIX,
        has_heads=obj.masked_lm is not None and format != "model_garden",
        has_sentence_head=obj.next_sentence is not None,
        has_discriminator=(obj.discriminator is not None
                           and format != "model_garden"),
        do_lower_case=lower_case))
    if format == "tf2":
      tf.train.Checkpoint(**_tf2_objects(obj)).write(os.path.join(tmp, _TF2_PREFIX))
      obj.config.to_json_file(os.path.join(tmp, GOOGLE_CONFIG))
    elif format == "model_garden":
      model_garden.write(mapping.to_tf1(obj.encoder),
                         obj.config.num_attention_heads,
                         os.path.join(tmp, tf1.DEFAULT_PREFIX))
      obj.config.to_json_file(os.path.join(tmp, GOOGLE_CONFIG))
      if obj.config.family == "albert":
        _write_json(os.path.join(tmp, google_research.ALBERT_CONFIG),
                    google_research.albert_config_dict(obj.config))
    else:
      arrays = mapping.to_tf1(obj.encoder, obj.masked_lm, obj.next_sentence,
                              obj.discriminator)
      if format == "tf1":
        # In the names of the family's own repository (ALBERT's groups,
        # ELECTRA's electra/ scope), so its code reads the file too.
        tf1.write_arrays(
            google_research.from_canonical(arrays, obj.config.family),
            os.path.join(tmp, tf1.DEFAULT_PREFIX))
        obj.config.to_json_file(os.path.join(tmp, GOOGLE_CONFIG))
        if obj.config.family == "albert":
          _write_json(os.path.join(tmp, google_research.ALBERT_CONFIG),
                      google_research.albert_config_dict(obj.config))
      else:
        family = obj.config.family
        hf.write(arrays, tmp, family=family)
        hf_config = obj.config.to_hf_dict()
        if obj.masked_lm is not None:
          hf_config["architectures"] = [_HF_PRETRAINING[family]]
        if obj.discriminator is not None:
          hf_config["architectures"] = ["ElectraForPreTraining"]
        _write_json(os.path.join(tmp, HF_CONFIG), hf_config)
        if vocabulary is not None or lower_case is not None:
          _write_json(os.path.join(tmp, "tokenizer_config.json"),
                      _tokenizer_config(family, lower_case))
    if vocabulary is not None:
      # The vocabulary's own files (vocab.txt; vocab.json and merges.txt;
      # spiece.model), whichever file it was read from.
      vocabulary.write(tmp)
  return path


def _tokenizer_config(family, lower_case):
  """transformers' tokenizer_config.json: the family's tokenizer class and
  special tokens, and the casing where the family has one."""
  config = dict(tokenizer_class=_HF_TOKENIZER[family])
  if family == "roberta":
    config.update(bos_token="<s>", cls_token="<s>", eos_token="</s>",
                  sep_token="</s>", pad_token="<pad>", unk_token="<unk>",
                  mask_token="<mask>", add_prefix_space=False)
  elif lower_case is not None:
    config.update(do_lower_case=lower_case)
  if family == "albert":
    config.update(keep_accents=False)
  return config


_HF_TOKENIZER = dict(bert="BertTokenizer", distilbert="DistilBertTokenizer",
                     electra="ElectraTokenizer", roberta="RobertaTokenizer",
                     albert="AlbertTokenizer")


# The Hugging Face class of an encoder with its pre-training heads.
_HF_PRETRAINING = dict(bert="BertForPreTraining", roberta="RobertaForMaskedLM",
                       albert="AlbertForPreTraining",
                       distilbert="DistilBertForMaskedLM",
                       electra="ElectraForMaskedLM")


def _write_json(path, d):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(d, f, indent=2, sort_keys=True)
    f.write("\n")


def _replaceable(path) -> bool:
  """An existing folder may be replaced only if it is empty or a checkpoint
  folder (never, say, a home directory given by mistake)."""
  if not os.path.isdir(path):
    return False
  files = set(os.listdir(path))
  return not files or METADATA_FILE in files


def _atomic_folder(path):
  return atomic_folder(path, _replaceable, "a checkpoint folder",
                       CheckpointError)
