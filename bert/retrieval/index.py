"""The vector index: `Index` (add, search, save, load) and its manifest."""

import json
import os
from typing import Optional, Tuple

import numpy as np

from bert.errors import DataError
from bert.io import atomic_folder, present
from bert.retrieval.stores import STORES, read_npy
from bert.untrusted import read_json
from bert.validation import ConfigError, check_bool, check_choice, check_int

FORMAT, VERSION = "bert-tf2 vector index", 1
MANIFEST, IDS_FILE = "index.json", "ids.npy"
METRICS = ("cosine", "dot")
BACKENDS = ("exact", "faiss", "usearch")
# HNSW's parameters (Malkov & Yashunin's names; usearch calls them
# connectivity, expansion_add, expansion_search). Above both libraries' own
# defaults (FAISS: 32, 40, 16; usearch: 16, 128, 64), which reach well under
# 0.95 recall@10 on high-dimensional data such as random 64-dim vectors.
HNSW_DEFAULTS = dict(m=32, ef_construction=200, ef_search=128)


class Index:
  """A vector index: `add` vectors under int64 ids, `search` the top k.

  Args:
    dim: the vectors' width.
    metric: "cosine" or "dot" (inner product of the vectors as given).
    backend: "exact", "faiss" or "usearch" (HNSW graphs; approximate).
    hnsw: backend "faiss" only: False makes a flat, exact IndexFlatIP.
    m, ef_construction, ef_search: the HNSW graph's parameters (edges per
      node; candidates kept while adding, while searching: higher is more
      accurate and slower). Defaults: HNSW_DEFAULTS.
  """

  def __init__(self, dim: int, metric: str = "cosine", backend: str = "exact",
               *, hnsw: Optional[bool] = None, m: Optional[int] = None,
               ef_construction: Optional[int] = None,
               ef_search: Optional[int] = None):
    self._dim = check_int("Index", "dim", dim, minimum=1)
    self._metric = check_choice("Index", "metric", metric, METRICS)
    self._backend = check_choice("Index", "backend", backend, BACKENDS)
    given = dict(m=m, ef_construction=ef_construction, ef_search=ef_search)
    hnsw = check_bool("Index", "hnsw", hnsw, optional=True)
    if backend == "usearch" and hnsw is False:
      raise ConfigError("Index.hnsw=False: usearch indexes are HNSW graphs; "
                        "for exact search use backend='exact' (or 'faiss')")
    if backend == "exact" and hnsw is not None:
      raise ConfigError("Index.hnsw is a parameter of backend 'faiss', not "
                        "of backend='exact'")
    extra = [k for k, v in given.items() if v is not None]
    if extra and (backend == "exact" or hnsw is False):
      raise ConfigError(f"Index.{extra[0]} is a parameter of an HNSW index "
                        f"(backend 'faiss' or 'usearch'), not of "
                        + ("backend='exact'" if backend == "exact"
                           else "hnsw=False (a flat IndexFlatIP)"))
    params = {}
    if backend != "exact":
      params["hnsw"] = hnsw is not False
    if params.get("hnsw"):
      for name, value in given.items():
        params[name] = check_int("Index", name, HNSW_DEFAULTS[name]
                                 if value is None else value,
                                 minimum=2 if name == "m" else 1)
    self._params = params
    self._store = STORES[backend](self._dim, params)

  dim = property(lambda self: self._dim)
  metric = property(lambda self: self._metric)
  backend = property(lambda self: self._backend)
  parameters = property(lambda self: dict(self._params))

  def __len__(self) -> int:
    return len(self._store.ids)

  def __repr__(self) -> str:
    return (f"Index(dim={self._dim}, metric={self._metric!r}, "
            f"backend={self._backend!r}, size={len(self)})")

  def add(self, vectors, ids=None) -> None:
    """Adds `vectors` [n, dim] under `ids` [n] (distinct integers >= 0, none
    already in the index; default: consecutive, from one past the largest
    id so far, 0 for an empty index). May be called again and again."""
    vectors = self._vectors("Index.add: vectors", vectors)
    n = len(vectors)
    if ids is None:
      start = int(self._store.ids.max()) + 1 if len(self) else 0
      ids = np.arange(start, start + n, dtype=np.int64)
    else:
      ids = _ids("Index.add: ids", ids, n)
    taken = ids[np.isin(ids, self._store.ids)]
    if taken.size:
      raise DataError(f"Index.add: ids: id {int(taken[0])} is already in the "
                      "index")
    self._store.add(vectors, ids)

  def search(self, queries, k: int = 10) -> Tuple[np.ndarray, np.ndarray]:
    """The k nearest vectors of each query [q, dim]: (scores [q, k] float32,
    ids [q, k] int64), best first, equal scores by the lower id. k is capped
    at the index's size, as in sentence-transformers' `semantic_search`. An
    approximate backend that finds fewer than k for a query (a rare early
    stop of the graph search) fills the row with id -1 and score -inf."""
    queries = self._vectors("Index.search: queries", queries)
    k = check_int("Index.search", "k", k, minimum=1)
    if not len(self):
      raise DataError("Index.search: the index is empty; add vectors first")
    scores, ids = self._store.search(queries, min(k, len(self)))
    order = np.lexsort((ids, -scores), axis=1)
    return (np.take_along_axis(scores, order, 1).astype(np.float32),
            np.take_along_axis(ids, order, 1))

  def save(self, path: str) -> str:
    """Writes the index as the folder `path` (a new or empty folder, or an
    index saved before, which is replaced whole; never a folder holding
    other files). Returns `path`."""
    manifest = dict(format=FORMAT, version=VERSION, dim=self._dim,
                    metric=self._metric, backend=self._backend,
                    count=len(self), parameters=self._params)
    with atomic_folder(path, _replaceable, "a vector index folder") as tmp:
      self._store.write(tmp)
      np.save(os.path.join(tmp, IDS_FILE), self._store.ids, allow_pickle=False)
      with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    return path

  @classmethod
  def load(cls, path: str) -> "Index":
    """The index `save` wrote in the folder `path`."""
    if not present(path):
      raise FileNotFoundError(f"{path}: no such folder")
    if not os.path.isdir(path):
      raise NotADirectoryError(f"{path}: is a file, not an index folder")
    file = os.path.join(path, MANIFEST)
    m = read_json(file, DataError)
    if m.get("format") != FORMAT or m.get("version") != VERSION:
      raise DataError(f"{file}: not a {FORMAT} of version {VERSION} (format "
                      f"{m.get('format')!r}, version {m.get('version')!r})")
    params = m.get("parameters")
    known = {"hnsw"} | set(HNSW_DEFAULTS)
    if not isinstance(params, dict) or set(params) - known:
      raise DataError(f"{file}: parameters must be an object of "
                      f"{sorted(known)}, got {params!r}")
    try:
      index = cls(m.get("dim"), m.get("metric"), m.get("backend"), **params)
      count = check_int("manifest", "count", m.get("count"), minimum=0)
    except ConfigError as e:
      raise DataError(f"{file}: {e}") from None
    if index.parameters != params:
      raise DataError(f"{file}: parameters {params} do not describe a "
                      f"{index.backend} index (expected keys "
                      f"{sorted(index.parameters)})")
    ids = read_npy(os.path.join(path, IDS_FILE), np.int64, (count,))
    _ids(os.path.join(path, IDS_FILE), ids, count)
    index._store.read(path, ids)
    return index

  def _vectors(self, name: str, value) -> np.ndarray:
    """`value` as float32 [n >= 1, dim], finite (normalised for cosine)."""
    try:
      with np.errstate(over="ignore"):   # beyond float32: inf, refused below
        vectors = np.asarray(value, np.float32)
    except (TypeError, ValueError):
      raise DataError(f"{name} must be a [n, {self._dim}] array of numbers "
                      "(not ragged)") from None
    if vectors.ndim != 2 or vectors.shape[1] != self._dim or not len(vectors):
      raise DataError(f"{name} has shape {vectors.shape}; the index holds "
                      f"{self._dim}-dim vectors: give [n >= 1, {self._dim}]"
                      + (" (one vector v: v[None])" if vectors.ndim == 1
                         else ""))
    bad = np.flatnonzero(~np.isfinite(vectors).all(1))
    if bad.size:
      raise DataError(f"{name}: row {bad[0]} holds NaN or inf (or a value "
                      "beyond float32)")
    if self._metric == "cosine":
      # The norm in float64: a float32 sum of squares overflows sooner.
      norm = np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
      vectors = (vectors / np.maximum(norm, 1e-12)).astype(np.float32)
    return np.ascontiguousarray(vectors)


def _ids(name: str, value, n: int) -> np.ndarray:
  """`value` as distinct int64 ids >= 0 [n]."""
  ids = np.asarray(value)
  if ids.shape != (n,) or (n and ids.dtype.kind not in "iu"):
    raise DataError(f"{name} must be {n} integer ids, one per vector; got "
                    f"shape {ids.shape} of {ids.dtype}")
  if n and (ids.min() < 0 or ids.max() > np.iinfo(np.int64).max):
    raise DataError(f"{name} must be in [0, 2**63); got "
                    f"{ids.min() if ids.min() < 0 else ids.max()}")
  ids = ids.astype(np.int64)
  unique, counts = np.unique(ids, return_counts=True)
  if unique.size < n:
    raise DataError(f"{name}: id {int(unique[counts > 1][0])} is given twice")
  return ids


def _replaceable(path: str) -> bool:
  """An existing folder is replaced only if empty or an index's."""
  return os.path.isdir(path) and (not os.listdir(path) or os.path.isfile(
      os.path.join(path, MANIFEST)))

