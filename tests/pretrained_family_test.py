"""The BERT family's presets (`roberta_base`, `albert_base_v2`, ...) end to
end: the release table's own file list, served from 127.0.0.1 as a Hugging
Face repo of a random tiny model of the family (its config.json and
model.safetensors as transformers saves them, its vocabulary files as the
hub's repos hold them: vocab.json + merges.txt, spiece.model), downloads
once, and `BertClassifier.from_pretrained(preset)` computes transformers'
encoder outputs; a corrupt or missing tokenizer file is a one-line error
naming it, with nothing left in the cache."""

import dataclasses
import hashlib
import os
import urllib.parse

import numpy as np
import pytest
import torch
import transformers

from bert import pretrained
from bert.models import BertClassifier
from conftest import one_line
from family import family_folder, tokenizer_folder
from local_server import Server, local_only

TOL = 1e-5
TEXTS = (["The cat sat on the mat.", "A much longer first text, with commas."],
         ["It fell asleep.", "Short."])
# Each family's preset (an alias of hf_<shape>) and its vocabulary file,
# which the negative control breaks. RoBERTa and ALBERT (their own
# tokenizers) in the default tier, the WordPiece families in the slow one.
CASES = dict(roberta=("roberta_base", "merges.txt"),
             albert=("albert_base_v2", "spiece.model"),
             distilbert=("distilbert_base_uncased", "vocab.txt"),
             electra=("electra_small_discriminator", "vocab.txt"))
DEFAULT = ("albert", "roberta")


def families():
  return [f if f in DEFAULT else pytest.param(f, marks=pytest.mark.slow)
          for f in sorted(CASES)]


@pytest.fixture(autouse=True)
def _local_only(monkeypatch):
  local_only(monkeypatch)


@pytest.fixture
def server():
  s = Server()
  yield s
  s.stop()


@pytest.fixture
def cache(tmp_path, monkeypatch):
  folder = tmp_path / "cache"
  monkeypatch.setenv(pretrained.CACHE_ENV, str(folder))
  return folder


@pytest.fixture(autouse=True)
def _restore_presets(monkeypatch):
  monkeypatch.setattr(pretrained.presets, "PRESETS", dict(pretrained.PRESETS))
  monkeypatch.setattr(pretrained.presets, "ALIASES", dict(pretrained.ALIASES))


def serve(server, name, family, root, broken=None):
  """Points preset `name` at `server`, which serves the same file list (same
  paths) from a tiny `family` folder: model.safetensors with its sha256
  stated, as the release table states it for pinned revisions; `broken`
  (a file name) served corrupt, or absent if "-" + name. Returns the tiny
  folder and the preset."""
  real = pretrained.get_preset(name)
  folders = (family_folder(family, root), tokenizer_folder(family, root))
  files = []
  for rf in real.files:
    path = urllib.parse.urlparse(rf.url).path
    found = [os.path.join(f, rf.filename) for f in folders
             if os.path.isfile(os.path.join(f, rf.filename))]
    assert found or rf.optional, rf.filename     # every file the table asks for
    if not found or broken == "-" + rf.filename:
      files.append(dataclasses.replace(rf, url=server.url + path, sha256=None,
                                       size=None))
      continue
    with open(found[0], "rb") as f:
      data = f.read()
    if broken == rf.filename:                   # cut, then garbage
      data = data[:len(data) // 2] + b"\x00\xff garbage"
    server.files[path] = data
    files.append(dataclasses.replace(
        rf, url=server.url + path, size=None,
        sha256=hashlib.sha256(data).hexdigest() if rf.sha256 else None))
  preset = dataclasses.replace(real, files=tuple(files))
  pretrained.register_preset(preset, replace=True)
  return folders[0], preset


def transformers_output(folder, ids, mask, types, nudge=0.0):
  """transformers' sequence output of `folder`, its last LayerNorm's scale
  moved by `nudge` (a negative control)."""
  model = transformers.AutoModel.from_pretrained(folder).eval()
  kwargs = dict(input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long))
  if model.config.model_type != "distilbert":        # it has no token types
    kwargs["token_type_ids"] = torch.tensor(types, dtype=torch.long)
  with torch.no_grad():
    [*_, scale] = [p for n, p in model.named_parameters()
                   if "LayerNorm.weight" in n or "layer_norm.weight" in n]
    scale.add_(nudge)
    out = model(**kwargs)
  return out.last_hidden_state.numpy()


@pytest.mark.parametrize("family", families())
def test_preset_downloads_once_and_matches_transformers(
    family, server, cache, family_root):
  alias, _ = CASES[family]
  folder, preset = serve(server, alias, family, family_root)
  assert preset.name == f"hf_{alias}"
  model = BertClassifier.from_pretrained(alias, num_classes=2, seq_length=24)
  assert model.encoder.config.family == family
  fetched = len(server.requests)
  assert fetched == len(preset.files)        # tokenizer_config.json included
  # The cache folder holds the served files, byte for byte.
  cached = os.path.join(cache, preset.name)
  for path, data in server.files.items():
    with open(os.path.join(cached, os.path.basename(path)), "rb") as f:
      assert f.read() == data, path

  x = model.preprocessor.encode(TEXTS)
  ids, mask, types = (np.asarray(x[k]) for k in (
      "input_word_ids", "input_mask", "input_type_ids"))
  assert mask.sum() > 12 and (mask == 0).any()      # real tokens and padding
  ours = model.encoder(x)["sequence_output"].numpy()
  theirs = transformers_output(folder, ids, mask, types)
  diff = np.abs(ours - theirs)[mask.astype(bool)].max()
  assert diff <= TOL, f"{family}: max abs diff {diff:.2e}"
  # Negative control: the comparison sees a weight moved by 1e-3.
  nudged = transformers_output(folder, ids, mask, types, nudge=1e-3)
  assert np.abs(ours - nudged)[mask.astype(bool)].max() > 10 * TOL

  # Second call, by the hf_ name, with the server gone: from the cache.
  server.stop()
  again = BertClassifier.from_pretrained(preset.name, num_classes=2,
                                         seq_length=24)
  assert len(server.requests) == fetched
  np.testing.assert_allclose(again.encoder(x)["sequence_output"].numpy(),
                             ours, rtol=0, atol=1e-6)


@pytest.mark.parametrize("family", DEFAULT)
@pytest.mark.parametrize("how", ["corrupt", "missing"])
def test_bad_tokenizer_file_caches_nothing(family, how, server, cache,
                                           family_root):
  alias, name = CASES[family]
  broken = name if how == "corrupt" else "-" + name
  _, preset = serve(server, alias, family, family_root, broken=broken)
  url = next(f.url for f in preset.files if f.filename == name)
  with pytest.raises(pretrained.DownloadError) as e:
    BertClassifier.from_pretrained(alias, num_classes=2, seq_length=24)
  text = one_line(e.value, url)
  assert ("HTTP 404" if how == "missing" else "nothing was cached") in text
  assert ".tmp-" not in text                  # names the URL, not a temp path
  assert os.listdir(cache) == []              # no folder, temp or checksum
  # The same server with the file whole: accepted.
  serve(server, alias, family, family_root)
  BertClassifier.from_pretrained(alias, num_classes=2, seq_length=24)
  assert os.path.isfile(os.path.join(cache, preset.name, name))
