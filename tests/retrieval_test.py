"""bert.retrieval: exact search against a full sort, the FAISS and usearch
HNSW indexes' recall against exact search, save/load of every backend, and
one-line errors for bad input and damaged index folders."""

import json
import os
import sys

import numpy as np
import pytest

from bert.metrics import retrieval_metrics
from bert.retrieval import BackendMissingError, Index, stores, top_k
from conftest import one_line

ANN = ("faiss", "usearch")


def _reference(queries, corpus, ids, k, cosine):
  """The top k by a full sort of every score (float64), ties to the lower
  id: (scores [q, k], ids [q, k])."""
  q, x = np.asarray(queries, np.float64), np.asarray(corpus, np.float64)
  if cosine:
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
  scores = q @ x.T                                    # [q, n]
  order = np.stack([np.lexsort((ids, -row)) for row in scores])[:, :k]
  return np.take_along_axis(scores, order, 1), np.asarray(ids)[order]


def _random(n, dim=64, seed=0):
  return np.random.default_rng(seed).standard_normal((n, dim)).astype(
      np.float32)


@pytest.fixture(scope="module")
def corpus():
  """5,000 random 64-dim vectors, 200 queries, and the exact top 10."""
  x, q = _random(5000), _random(200, seed=1)
  exact = Index(64)
  exact.add(x)
  return x, q, exact.search(q, 10)


def test_top_k_equals_a_full_sort_ties_to_the_lower_column():
  rng = np.random.default_rng(0)
  scores = rng.integers(-3, 4, (50, 40)).astype(np.float32)  # many ties
  want = np.stack([np.lexsort((np.arange(40), -row)) for row in scores])
  for k in (1, 5, 17, 39, 40, 100):
    values, cols = top_k(scores, k)
    assert cols.shape == (50, min(k, 40)) and cols.dtype == np.int64
    np.testing.assert_array_equal(cols, want[:, :k])
    np.testing.assert_array_equal(values, np.take_along_axis(scores, cols, 1))


def test_exact_search_equals_a_full_sort(monkeypatch):
  # Small chunks, so the queries are scored in several matrix products.
  monkeypatch.setattr(stores, "_CHUNK_SCORES", 4000)
  rng = np.random.default_rng(2)
  # Dot products of small integers are exact in float32, and tie often:
  # the lower id must come first, whatever the order of adding.
  x = rng.integers(-2, 3, (900, 8)).astype(np.float32)
  q = rng.integers(-2, 3, (37, 8)).astype(np.float32)
  ids = rng.permutation(10**6)[:900] * 7
  index = Index(8, metric="dot")
  for part in np.array_split(np.arange(900), 3):
    index.add(x[part], ids[part])
  scores, found = index.search(q, 25)
  want_scores, want_ids = _reference(q, x, ids, 25, cosine=False)
  np.testing.assert_array_equal(found, want_ids)
  np.testing.assert_array_equal(scores, want_scores)
  # Cosine on real-valued vectors: normalised on add and on search.
  x, q = _random(2000, 32, seed=3) * 5, _random(50, 32, seed=4)
  index = Index(32)
  index.add(x)
  scores, found = index.search(q, 10)
  want_scores, want_ids = _reference(q, x, np.arange(2000), 10, cosine=True)
  np.testing.assert_array_equal(found, want_ids)
  np.testing.assert_allclose(scores, want_scores, atol=1e-6)
  assert scores.dtype == np.float32 and found.dtype == np.int64
  # Control: "dot" on the same vectors ranks by length too.
  dot = Index(32, metric="dot")
  dot.add(x)
  assert not np.array_equal(dot.search(q, 10)[1], found)


def test_k_is_capped_at_the_size_and_ids_follow_the_last_one():
  index = Index(4)
  index.add(_random(3, 4), ids=[10, 3, 7])
  index.add(_random(2, 4, seed=5))               # ids 11, 12
  assert len(index) == 5
  scores, ids = index.search(_random(2, 4, seed=6), k=50)
  assert scores.shape == ids.shape == (2, 5)
  assert sorted(ids[0].tolist()) == [3, 7, 10, 11, 12]
  assert np.all(np.diff(scores, axis=1) <= 0)
  for backend in ANN:
    ann = Index(4, backend=backend)
    ann.add(_random(3, 4))
    assert ann.search(_random(1, 4), k=10)[1].shape == (1, 3)


def test_a_zero_vector_scores_zero_under_cosine():
  index = Index(3)
  index.add([[0, 0, 0], [1, 0, 0]], ids=[5, 6])
  scores, ids = index.search([[2.0, 0, 0]], k=2)
  assert ids.tolist() == [[6, 5]] and scores.tolist() == [[1.0, 0.0]]


@pytest.mark.parametrize("backend", ANN)
def test_hnsw_reaches_recall_095_of_exact_search(backend, corpus):
  x, q, (_, exact_ids) = corpus
  index = Index(64, backend=backend)
  index.add(x[:3000])
  index.add(x[3000:])                            # ids 3000.. follow
  scores, ids = index.search(q, 10)
  truth = [set(row) for row in exact_ids.tolist()]
  recall = retrieval_metrics(ids, truth, ks=(10,))["recall@10"]
  print(f"{backend} HNSW recall@10 vs exact: {recall:.4f}")
  assert recall >= 0.95
  assert np.all(np.diff(scores, axis=1) <= 0)
  # Control: the libraries' own defaults (a shallower search) miss more,
  # so the figure above is no artefact of the check.
  low = dict(faiss=dict(m=32, ef_construction=40, ef_search=16),
             usearch=dict(m=16, ef_construction=128, ef_search=64))[backend]
  weak = Index(64, backend=backend, **low)
  weak.add(x)
  weak_recall = retrieval_metrics(weak.search(q, 10)[1], truth,
                                  ks=(10,))["recall@10"]
  print(f"{backend} with {low}: {weak_recall:.4f}")
  assert weak_recall < recall - 0.02


def test_faiss_flat_equals_exact_search(corpus):
  x, q, (exact_scores, exact_ids) = corpus
  flat = Index(64, backend="faiss", hnsw=False)
  flat.add(x)
  scores, ids = flat.search(q, 10)
  np.testing.assert_array_equal(ids, exact_ids)
  np.testing.assert_allclose(scores, exact_scores, atol=1e-5)


@pytest.mark.parametrize("backend, params", [
    ("exact", {}), ("faiss", {}), ("faiss", dict(hnsw=False)),
    ("usearch", dict(m=24, ef_search=100))])
def test_a_saved_index_loads_and_returns_the_same_top_k(backend, params,
                                                        tmp_path):
  x, q = _random(1500, 16, seed=7), _random(40, 16, seed=8)
  ids = np.arange(1500) * 3 + 1
  index = Index(16, metric="dot", backend=backend, **params)
  index.add(x[:1000], ids[:1000])
  index.add(x[1000:], ids[1000:])
  scores, found = index.search(q, 10)
  path = str(tmp_path / "index")
  assert index.save(path) == path
  with open(os.path.join(path, "index.json"), encoding="utf-8") as f:
    manifest = json.load(f)
  assert manifest["count"] == 1500 and manifest["backend"] == backend
  loaded = Index.load(path)
  assert (len(loaded), loaded.dim, loaded.metric, loaded.backend) == (
      1500, 16, "dot", backend)
  assert loaded.parameters == index.parameters
  again_scores, again = loaded.search(q, 10)
  np.testing.assert_array_equal(again, found)
  np.testing.assert_array_equal(again_scores, scores)
  # Control: another index (other vectors) does not give these results.
  other = Index(16, metric="dot", backend=backend, **params)
  other.add(_random(1500, 16, seed=9), ids)
  assert not np.array_equal(other.search(q, 10)[1], found)
  # A loaded index takes more vectors; a vector finds itself first.
  loaded.add(x[:5] * 100, ids=[10**9 + i for i in range(5)])
  assert loaded.search(x[:5] * 100, 1)[1][:, 0].tolist() == [
      10**9 + i for i in range(5)]
  # Saving over an index replaces it whole.
  loaded.save(path)
  assert len(Index.load(path)) == 1505


def test_save_never_replaces_a_folder_holding_other_files(tmp_path):
  index = Index(4)
  index.add(_random(3, 4))
  folder = tmp_path / "mine"
  folder.mkdir()
  (folder / "notes.txt").write_text("keep")
  with pytest.raises(FileExistsError) as e:
    index.save(str(folder))
  one_line(e, str(folder), "refusing to replace")
  assert os.listdir(folder) == ["notes.txt"]
  index.save(str(tmp_path / "ok"))
  (tmp_path / "ok" / "notes.txt").write_text("mine")   # put into an index
  with pytest.raises(FileExistsError) as e:
    index.save(str(tmp_path / "ok"))
  one_line(e, "notes.txt")


def _saved(tmp_path, backend="exact"):
  index = Index(8, backend=backend)
  index.add(_random(20, 8))
  return index.save(str(tmp_path / backend))


def _edit_manifest(path, **changes):
  file = os.path.join(path, "index.json")
  with open(file, encoding="utf-8") as f:
    manifest = json.load(f)
  manifest.update(changes)
  with open(file, "w", encoding="utf-8") as f:
    json.dump(manifest, f)


@pytest.mark.parametrize("damage, error, fragments", [
    (lambda p: _edit_manifest(p, version=2), ValueError,
     ["index.json", "version 2"]),
    (lambda p: _edit_manifest(p, format="other"), ValueError, ["index.json"]),
    (lambda p: _edit_manifest(p, dim=9), ValueError,
     ["vectors.npy", "float32 (20, 8)", "(20, 9)"]),
    (lambda p: _edit_manifest(p, count=21), ValueError, ["ids.npy", "(21,)"]),
    (lambda p: _edit_manifest(p, metric="l2"), ValueError,
     ["index.json", "Index.metric"]),
    (lambda p: _edit_manifest(p, parameters=dict(m=4)), ValueError,
     ["index.json", "Index.m", "backend='exact'"]),
    (lambda p: _edit_manifest(p, parameters=dict(depth=4)), ValueError,
     ["index.json", "parameters"]),
    (lambda p: open(os.path.join(p, "index.json"), "w").write("{"),
     ValueError, ["index.json"]),
    (lambda p: os.remove(os.path.join(p, "index.json")), FileNotFoundError,
     ["index.json", "no such file"]),
    (lambda p: os.remove(os.path.join(p, "ids.npy")), FileNotFoundError,
     ["ids.npy", "no such file"]),
    (lambda p: np.save(os.path.join(p, "ids.npy"),
                       np.array([{"x": 1}] * 20, dtype=object)),
     ValueError, ["ids.npy", "not a readable .npy file"]),
    (lambda p: np.save(os.path.join(p, "ids.npy"), np.zeros(20, np.int64)),
     ValueError, ["ids.npy", "id 0 is given twice"]),
    (lambda p: np.save(os.path.join(p, "ids.npy"), -np.arange(20)),
     ValueError, ["ids.npy", "[0, 2**63)"]),
    (lambda p: np.save(os.path.join(p, "vectors.npy"),
                       np.zeros((20, 8), np.float64)),
     ValueError, ["vectors.npy", "float64"]),
    (lambda p: _truncate(os.path.join(p, "vectors.npy")), ValueError,
     ["vectors.npy"]),
])
def test_a_damaged_index_folder_is_one_line_naming_the_file(
    damage, error, fragments, tmp_path):
  path = _saved(tmp_path)
  Index.load(path)                                 # control: loads intact
  damage(path)
  with pytest.raises(error) as e:
    Index.load(path)
  one_line(e, *fragments)


def _truncate(file):
  with open(file, "rb") as f:
    data = f.read()
  with open(file, "wb") as f:
    f.write(data[:len(data) // 2])


@pytest.mark.parametrize("backend", ANN)
@pytest.mark.parametrize("damage, fragments", [
    (lambda f: open(f, "wb").write(b"garbage" * 9), ["not a readable"]),
    (_truncate, []),
    (os.remove, ["no such file"]),
])
def test_a_damaged_library_index_file_is_one_line(backend, damage, fragments,
                                                  tmp_path):
  path = _saved(tmp_path, backend)
  file = os.path.join(path, f"{backend}.index")
  damage(file)
  with pytest.raises((ValueError, FileNotFoundError)) as e:
    Index.load(path)
  one_line(e, file, *fragments)


@pytest.mark.parametrize("backend, changes, fragments", [
    ("faiss", dict(dim=9), ["faiss.index", "does not match"]),
    ("faiss", dict(parameters=dict(hnsw=False)), ["faiss.index"]),
    ("faiss", dict(parameters=dict(hnsw=True, m=16, ef_construction=200,
                                   ef_search=128)), ["faiss.index"]),
    ("usearch", dict(dim=9), ["usearch.index", "does not match"]),
    ("usearch", dict(parameters=dict(hnsw=True, m=16, ef_construction=200,
                                     ef_search=128)), ["usearch.index"]),
])
def test_a_manifest_that_does_not_match_the_library_file(
    backend, changes, fragments, tmp_path):
  path = _saved(tmp_path, backend)
  _edit_manifest(path, **changes)
  with pytest.raises(ValueError) as e:
    Index.load(path)
  one_line(e, *fragments)


def test_load_needs_an_index_folder(tmp_path):
  with pytest.raises(FileNotFoundError) as e:
    Index.load(str(tmp_path / "none"))
  one_line(e, "none", "no such folder")
  (tmp_path / "file").write_text("x")
  with pytest.raises(NotADirectoryError) as e:
    Index.load(str(tmp_path / "file"))
  one_line(e, "is a file")


@pytest.mark.parametrize("kwargs, fragments", [
    (dict(dim=0), ["Index.dim", ">= 1"]),
    (dict(dim=4, metric="l2"), ["Index.metric", "'cosine', 'dot'"]),
    (dict(dim=4, backend="annoy"), ["Index.backend", "'faiss'"]),
    (dict(dim=4, m=8), ["Index.m", "backend='exact'"]),
    (dict(dim=4, hnsw=False), ["Index.hnsw", "backend='exact'"]),
    (dict(dim=4, backend="faiss", hnsw=False, ef_search=8),
     ["Index.ef_search", "hnsw=False"]),
    (dict(dim=4, backend="usearch", hnsw=False), ["Index.hnsw=False"]),
    (dict(dim=4, backend="faiss", m=1), ["Index.m", ">= 2"]),
    (dict(dim=4, backend="usearch", ef_search=0), ["Index.ef_search"]),
])
def test_bad_index_arguments_are_one_line(kwargs, fragments):
  with pytest.raises(ValueError) as e:
    Index(**kwargs)
  one_line(e, *fragments)


@pytest.mark.parametrize("vectors, ids, fragments", [
    (np.ones((2, 5)), None, ["Index.add: vectors", "(2, 5)", "4-dim"]),
    (np.ones(4), None, ["Index.add: vectors", "v[None]"]),
    (np.ones((0, 4)), None, ["Index.add: vectors", "(0, 4)"]),
    ([[1, 2, 3, 4], [1, 2]], None, ["Index.add: vectors", "ragged"]),
    ([[1, 2, 3, np.nan]], None, ["Index.add: vectors: row 0", "NaN"]),
    ([[1, 2, 3, 1e39]], None, ["row 0", "beyond float32"]),
    (np.ones((2, 4)), [1], ["Index.add: ids", "2 integer ids"]),
    (np.ones((2, 4)), [1.0, 2.0], ["Index.add: ids", "float64"]),
    (np.ones((2, 4)), [-1, 2], ["Index.add: ids", "[0, 2**63)"]),
    (np.ones((2, 4)), [3, 3], ["Index.add: ids: id 3 is given twice"]),
    (np.ones((2, 4)), [5, 0], ["Index.add: ids: id 0 is already in"]),
])
def test_bad_add_is_one_line(vectors, ids, fragments):
  index = Index(4)
  index.add(np.ones((1, 4)))                       # id 0
  with pytest.raises(ValueError) as e:
    index.add(vectors, ids)
  one_line(e, *fragments)
  assert len(index) == 1                           # nothing half-added


def test_bad_search_is_one_line():
  index = Index(4)
  with pytest.raises(ValueError) as e:
    index.search(np.ones((1, 4)))
  one_line(e, "the index is empty")
  index.add(np.ones((2, 4)))
  for queries, k, fragments in [
      (np.ones((1, 4)), 0, ["Index.search.k", ">= 1"]),
      (np.ones((1, 3)), 1, ["Index.search: queries", "(1, 3)"]),
      (np.ones(4), 1, ["Index.search: queries", "v[None]"]),
      (None, 1, ["Index.search: queries"])]:
    with pytest.raises(ValueError) as e:
      index.search(queries, k)
    one_line(e, *fragments)


@pytest.mark.parametrize("backend, package", [("faiss", "faiss-cpu"),
                                              ("usearch", "usearch")])
def test_a_missing_backend_library_is_one_line(backend, package, monkeypatch):
  Index(4, backend=backend)                       # control: installed here
  module = dict(faiss="faiss", usearch="usearch.index")[backend]
  monkeypatch.setitem(sys.modules, module, None)  # import fails
  with pytest.raises(BackendMissingError) as e:
    Index(4, backend=backend)
  assert isinstance(e.value, ImportError)
  assert one_line(e) == (f"backend='{backend}' needs {package}: pip install "
                         "'bert-tf2[retrieval]'")
