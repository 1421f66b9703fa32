"""Vector indexes for semantic search: add vectors under ids, search top k.

    index = Index(384)                       # cosine, exact search in NumPy
    index.add(corpus_vectors)                # [n, 384]; ids 0..n-1
    scores, ids = index.search(query_vectors, k=10)   # [q, 10] each
    index.save("corpus-index"); index = Index.load("corpus-index")

Backends: "exact" (a float32 matrix product, the default), and approximate
HNSW graphs from FAISS ("faiss", faiss-cpu) or usearch ("usearch"), the
optional extra `pip install 'bert-tf2[retrieval]'`, for corpora too large
for a matrix product per query. Metric "cosine" normalises vectors when they
are added and searched (a zero vector stays zero: its scores are 0); "dot"
takes them as they are. Either way a score is an inner product, higher is
closer.

An index is saved as a folder, written atomically (bert.io.atomic_folder):
`index.json` (format, version, dim, metric, backend, count, parameters),
`ids.npy`, and the vectors: `vectors.npy` (exact) or the library's own
index file (`faiss.index`, `usearch.index`). Nothing is pickled; a missing,
damaged or mismatched file is a one-line error naming it. The FAISS and
usearch files are read by those libraries' own readers: load only folders
you trust, as with any native binary format.
"""

# pylint: disable=unused-import
from bert.retrieval.index import (  # noqa: F401
    BACKENDS, HNSW_DEFAULTS, METRICS, Index)
from bert.retrieval.stores import BackendMissingError, top_k  # noqa: F401
