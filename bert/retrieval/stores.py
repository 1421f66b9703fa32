"""The backends of `bert.retrieval.Index`: exact (NumPy), FAISS, usearch.

Each holds its vectors and `ids` (the id of each, in its own order); the
optional libraries are imported when a backend is first used.
"""

import importlib
import os
from typing import Tuple

import numpy as np

from bert.errors import DataError, UserError
from bert.io import present
from bert.validation import check_int

# Scores of a query chunk [chunk, n] held at once in exact search: bounds
# its memory whatever the corpus size.
_CHUNK_SCORES = 1 << 24


class BackendMissingError(UserError, ImportError):
  """The optional library an index backend needs is not installed."""


def top_k(scores: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
  """The k largest of each row of `scores` [q, n], best first, ties broken
  by the lower column; k is capped at n (as sentence-transformers'
  `semantic_search` caps top_k at the corpus size). Returns (values
  [q, min(k, n)], columns [q, min(k, n)] int64)."""
  scores = np.asarray(scores)
  if scores.ndim != 2 or not scores.shape[1]:
    raise DataError(f"scores must be [q, n] with n >= 1, got shape "
                    f"{scores.shape}")
  k = min(check_int("top_k", "k", k, minimum=1), scores.shape[1])
  if k < scores.shape[1]:
    cols = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    values = np.take_along_axis(scores, cols, 1)
    # argpartition takes any of the scores equal to the k-th; a row with
    # more of them than places left is chosen again, lower columns first.
    tied = np.flatnonzero(
        (scores >= values.min(1, keepdims=True)).sum(1) > k)
    if tied.size:
      cols[tied] = np.argsort(-scores[tied], 1, kind="stable")[:, :k]
      values[tied] = np.take_along_axis(scores[tied], cols[tied], 1)
  else:
    cols = np.broadcast_to(np.arange(k), scores.shape).copy()
    values = scores.copy()
  order = np.lexsort((cols, -values), axis=1)
  return (np.take_along_axis(values, order, 1),
          np.take_along_axis(cols, order, 1).astype(np.int64))


def read_npy(file: str, dtype, shape) -> np.ndarray:
  """The array in the .npy `file`, never unpickled, of `dtype` and `shape`;
  anything else is a one-line error naming the file."""
  if not present(file):
    raise FileNotFoundError(f"{file}: no such file")
  try:
    array = np.load(file, allow_pickle=False)
  except (OSError, ValueError, EOFError) as e:
    reason = (str(e).splitlines() or [type(e).__name__])[0]
    raise DataError(f"{file}: not a readable .npy file ({reason})") from None
  if not isinstance(array, np.ndarray):   # an .npz archive
    array.close()
    raise DataError(f"{file}: is an .npz archive, not an .npy array")
  if array.dtype != dtype or array.shape != shape:
    raise DataError(f"{file}: holds {array.dtype} {array.shape}; the "
                    f"manifest says {np.dtype(dtype)} {shape}")
  return array


def _library(backend: str):
  module, package = dict(faiss=("faiss", "faiss-cpu"),
                         usearch=("usearch.index", "usearch"))[backend]
  try:
    return importlib.import_module(module)
  except ImportError:
    raise BackendMissingError(f"backend={backend!r} needs {package}: pip "
                              "install 'bert-tf2[retrieval]'") from None


class _Store:
  """A backend's vectors; `ids[i]` is the id of its i-th vector."""
  file = ""

  def __init__(self, dim: int, params: dict):
    self.dim, self.params = dim, params
    self.ids = np.zeros([0], np.int64)

  def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
    self._add(vectors)
    self.ids = np.concatenate([self.ids, ids])

  def search(self, queries, k):
    """(scores [q, k], ids [q, k]); a position < 0 (none found): -1, -inf."""
    scores, positions = self._search(queries, k)
    found = positions >= 0
    ids = np.where(found, self.ids[np.maximum(positions, 0)], -1)
    return np.where(found, scores, -np.inf), ids

  def _check(self, file: str, what: str, ok: bool) -> None:
    if not ok:
      raise DataError(f"{file}: {what} does not match the manifest ("
                      f"{self.dim}-dim, {len(self.ids)} vectors, {self.params})")


class _Exact(_Store):
  file = "vectors.npy"

  def __init__(self, dim, params):
    super().__init__(dim, params)
    self._matrix = np.zeros([0, dim], np.float32)   # [n, dim], by id
    self._pending = []                               # added since

  def _add(self, vectors):
    self._pending.append(vectors)

  def _sorted(self) -> np.ndarray:
    """The vectors [n, dim] in id order (so ties go to the lower id)."""
    if self._pending:
      matrix = np.concatenate([self._matrix] + self._pending)
      order = np.argsort(self.ids, kind="stable")
      self._matrix, self.ids, self._pending = matrix[order], self.ids[order], []
    return self._matrix

  def _search(self, queries, k):
    matrix = self._sorted()
    chunk = max(1, _CHUNK_SCORES // len(matrix))
    parts = [top_k(queries[i:i + chunk] @ matrix.T, k)   # [chunk, n]
             for i in range(0, len(queries), chunk)]
    return (np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]))

  def write(self, folder):
    np.save(os.path.join(folder, self.file), self._sorted(), allow_pickle=False)

  def read(self, folder, ids):
    self._pending = [read_npy(os.path.join(folder, self.file), np.float32,
                               (len(ids), self.dim))]
    self.ids = ids


class _Faiss(_Store):
  file = "faiss.index"

  def __init__(self, dim, params):
    super().__init__(dim, params)
    self._faiss = _library("faiss")
    if params["hnsw"]:
      self._index = self._faiss.IndexHNSWFlat(
          dim, params["m"], self._faiss.METRIC_INNER_PRODUCT)
      self._tune()
    else:
      self._index = self._faiss.IndexFlatIP(dim)

  def _tune(self):
    # As the manifest says (the same as the file's, unless edited by hand).
    self._index.hnsw.efConstruction = self.params["ef_construction"]
    self._index.hnsw.efSearch = self.params["ef_search"]

  def _add(self, vectors):
    self._index.add(vectors)

  def _search(self, queries, k):
    return self._index.search(queries, k)

  def write(self, folder):
    self._faiss.write_index(self._index, os.path.join(folder, self.file))

  def read(self, folder, ids):
    file = os.path.join(folder, self.file)
    if not present(file):
      raise FileNotFoundError(f"{file}: no such file")
    try:
      index = self._faiss.read_index(file)
    except RuntimeError:
      raise DataError(f"{file}: not a readable FAISS index") from None
    kind = (self._faiss.IndexHNSWFlat if self.params["hnsw"]
            else self._faiss.IndexFlatIP)
    self.ids = ids
    self._check(file, "the FAISS index", isinstance(index, kind)
                and index.d == self.dim and index.ntotal == len(ids)
                and index.metric_type == self._faiss.METRIC_INNER_PRODUCT)
    self._index = index
    if self.params["hnsw"]:
      self._check(file, "its HNSW graph",
                  index.hnsw.nb_neighbors(0) == 2 * self.params["m"])
      self._tune()


class _Usearch(_Store):
  file = "usearch.index"

  def __init__(self, dim, params):
    super().__init__(dim, params)
    self._usearch = _library("usearch")
    self._index = self._usearch.Index(
        ndim=dim, metric="ip", dtype="f32", connectivity=params["m"],
        expansion_add=params["ef_construction"],
        expansion_search=params["ef_search"])

  def _add(self, vectors):
    start = len(self.ids)
    self._index.add(np.arange(start, start + len(vectors), dtype=np.uint64),
                    vectors)

  def _search(self, queries, k):
    found = self._index.search(queries, k)
    # One query: its matches alone (as many as found); more: [q, k] arrays
    # and the count found of each.
    keys = np.asarray(found.keys, np.int64).reshape(len(queries), -1)
    distances = np.asarray(found.distances).reshape(keys.shape)
    counts = (np.asarray(found.counts).reshape(-1, 1) if len(queries) > 1
              else keys.shape[1])
    real = np.arange(keys.shape[1]) < counts
    pad = [(0, 0), (0, k - keys.shape[1])]
    # usearch's "ip" distance is 1 - the inner product.
    scores = np.pad(np.where(real, 1 - distances.astype(np.float64), -np.inf),
                    pad, constant_values=-np.inf)
    return scores, np.pad(np.where(real, keys, -1), pad, constant_values=-1)

  def write(self, folder):
    self._index.save(os.path.join(folder, self.file))

  def read(self, folder, ids):
    file = os.path.join(folder, self.file)
    if not present(file):
      raise FileNotFoundError(f"{file}: no such file")
    try:
      index = self._usearch.Index.restore(file)
    except (RuntimeError, ValueError):
      index = None
    if index is None:
      raise DataError(f"{file}: not a readable usearch index")
    self.ids = ids
    kinds = self._usearch
    self._check(file, "the usearch index", index.ndim == self.dim
                and len(index) == len(ids)
                and index.metric == kinds.MetricKind.IP
                and index.dtype == kinds.ScalarKind.F32
                and index.connectivity == self.params["m"]
                and bool(np.all(index.contains(
                    np.arange(len(ids), dtype=np.uint64)))))
    # usearch keeps neither in its file.
    index.expansion_add = self.params["ef_construction"]
    index.expansion_search = self.params["ef_search"]
    self._index = index


STORES = dict(exact=_Exact, faiss=_Faiss, usearch=_Usearch)
