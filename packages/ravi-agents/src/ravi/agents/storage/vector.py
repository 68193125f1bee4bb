"""``InMemoryVectorStore``: exact cosine search with NumPy, one matrix per collection."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ravi.agents.storage.embeddings import embedded
from ravi.agents.storage.options import InMemoryVectorOptions
from ravi.kernel.closing import Closeable
from ravi.kernel.embeddings import check_embedding_client
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.storage import Document, Filter, SearchResult, check_filter, check_forget, in_scope, matches
from ravi.kernel.values import check_count, check_ids, check_items, check_length, check_scope, check_vector

Matrix = npt.NDArray[np.float32]


@dataclass
class _Collection:
    dimension: int
    # Unit vectors as the columns of a (dimension x capacity) matrix: a search reads it once, and this layout
    # makes NumPy's matrix-vector product measurably faster than the row-major one (it is memory-bound).
    vectors: Matrix
    raw: Matrix  # the embeddings as given (float32, one per row), for ``get``
    docs: list[Document] = field(default_factory=list)  # stored without embeddings
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.docs)

    def reserve(self, extra: int) -> None:
        need = self.size + extra
        if need <= len(self.raw):
            return
        capacity = max(need, 2 * len(self.raw), 64)
        raw = np.zeros((capacity, self.dimension), dtype=np.float32)
        raw[: self.size] = self.raw[: self.size]
        vectors = np.zeros((self.dimension, capacity), dtype=np.float32)
        vectors[:, : self.size] = self.vectors[:, : self.size]
        self.raw, self.vectors = raw, vectors


def _cosines(raw: Matrix, query: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The cosine similarity of each row of ``raw`` with ``query``, in float64, in [-1, 1]: each row's sums are
    taken in one order (down the columns of its transpose), so equal rows score exactly alike."""
    columns = raw.T.astype(np.float64)
    dots = (columns * query[:, None]).sum(axis=0)
    norms = np.sqrt((columns * columns).sum(axis=0)) * float(np.sqrt(query @ query))
    cosines: npt.NDArray[np.float64] = np.clip(dots / norms, -1.0, 1.0)
    return cosines


def _validate_filter(filter: Filter | None) -> None:
    check_filter(filter)


class InMemoryVectorStore(Closeable):
    """Documents per collection, searched by exact cosine similarity (scores in [-1, 1], higher is closer).

    Vectors live in one float32 matrix per collection and a search is one matrix-vector product and a partial
    sort, so it scales to a few hundred thousand vectors per collection. A collection takes the dimension of its
    first vector; a vector of another dimension is refused. Embeddings come back from ``get`` as float32 values
    (as pgvector stores them). Documents without an embedding are embedded with ``embedding_client`` if one was
    given; otherwise they are refused with ``InvalidArgument`` (a ``ValueError``). Embeddings are made before the
    store's ``threading.Lock`` is taken, and nothing awaits holding it, so tasks of any event loop, in any thread,
    may share the store.
    """

    Options = InMemoryVectorOptions
    """The store's options model, for configuration."""

    def __init__(self, *, embedding_client: EmbeddingClient | None = None) -> None:
        self._collections: dict[str, _Collection] = {}
        if embedding_client is not None:
            check_embedding_client(embedding_client)
        self._embedder = embedding_client
        self._lock = threading.Lock()

    async def _vectors(self, documents: Sequence[Document]) -> Matrix:
        missing = [i for i, d in enumerate(documents) if d.embedding is None]
        if missing and self._embedder is None:
            raise InvalidArgument(
                f"document {documents[missing[0]].id!r} has no embedding and the store has no embedding_client",
                hint="pass embedding=... or build the store with InMemoryVectorStore(embedding_client=...)",
            )
        made: dict[int, list[float]] = {}
        if missing:
            assert self._embedder is not None
            vectors = await self._embedder.embed([documents[i].text for i in missing])
            made = dict(zip(missing, embedded(vectors, len(missing), self._embedder.dimension).tolist(), strict=True))
        rows = [d.embedding if d.embedding is not None else made[i] for i, d in enumerate(documents)]
        dims = {len(r) for r in rows}
        if len(dims) > 1:
            raise InvalidArgument(f"documents of one call must share a dimension, got {sorted(dims)}")
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)
        if not np.all(np.isfinite(matrix)):
            raise InvalidArgument("embeddings must be finite numbers")
        if matrix.shape[1] == 0:
            raise InvalidArgument("embeddings must not be empty")
        return matrix

    def _check_collection(self, collection: str) -> None:
        check_scope(collection=collection)

    async def _write(self, documents: Sequence[Document], collection: str, *, replace: bool) -> list[str]:
        self._check_collection(collection)
        documents = check_items(documents, Document, "documents")
        if not documents:
            return []
        matrix = await self._vectors(documents)
        wide = matrix.astype(np.float64)
        squares = np.einsum("ij,ij->i", wide, wide)
        for document, squared in zip(documents, squares, strict=True):
            check_length(float(squared), f"document {document.id!r}")
        unit = matrix / np.linalg.norm(matrix, axis=1)[:, None]
        with self._lock:
            self._put(documents, matrix, unit, collection, replace=replace)
        return [d.id for d in documents]

    def _put(
        self, documents: Sequence[Document], matrix: Matrix, unit: Matrix, collection: str, *, replace: bool
    ) -> None:
        col = self._collections.get(collection)
        if col is not None and matrix.shape[1] != col.dimension:
            raise InvalidArgument(
                f"collection {collection!r} holds vectors of dimension {col.dimension}, got {matrix.shape[1]}"
            )
        if col is None:
            dim = matrix.shape[1]
            col = _Collection(dim, np.zeros((dim, 0), np.float32), np.zeros((0, dim), np.float32))
            self._collections[collection] = col
        col.reserve(len(documents))
        for i, doc in enumerate(documents):
            row = col.rows.get(doc.id)
            if row is not None and not replace:
                continue
            stored = doc.model_copy(update={"embedding": None})
            if row is None:
                row = col.size
                col.rows[doc.id] = row
                col.docs.append(stored)
            else:
                col.docs[row] = stored
            col.vectors[:, row] = unit[i]
            col.raw[row] = matrix[i]

    async def add(self, documents: Sequence[Document], collection: str) -> list[str]:
        """Insert documents whose id is new to the collection; existing ids are left as they are."""
        return await self._write(documents, collection, replace=False)

    async def upsert(self, documents: Sequence[Document], collection: str) -> list[str]:
        """Insert or replace documents by id."""
        return await self._write(documents, collection, replace=True)

    def _full(self, col: _Collection, row: int) -> Document:
        return col.docs[row].model_copy(update={"embedding": tuple(col.raw[row].tolist())})

    async def search(
        self,
        query_embedding: Sequence[float],
        *,
        collection: str = "default",
        limit: int = 5,
        filter: Filter | None = None,
    ) -> list[SearchResult]:
        """The ``limit`` most similar documents, best first (ties by id), among those matching ``filter``."""
        self._check_collection(collection)
        vector = check_vector(query_embedding)
        _validate_filter(filter)
        limit = check_count(limit, "limit")  # a bool is not a count, as everywhere one is given
        with self._lock:
            return self._search(vector, collection, limit, filter)

    def _search(
        self, vector: Sequence[float], collection: str, limit: int, filter: Filter | None
    ) -> list[SearchResult]:
        col = self._collections.get(collection)
        if col is None or limit == 0 or col.size == 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1 or query.shape[0] != col.dimension:
            raise InvalidArgument(
                f"collection {collection!r} holds vectors of dimension {col.dimension}, "
                f"the query has {query.shape[-1] if query.ndim else 0}"
            )
        wide = query.astype(np.float64)
        check_length(float(wide @ wide), "the query vector")
        norm = float(np.linalg.norm(query))
        scores = (query / norm) @ col.vectors[:, : col.size]
        if filter:
            mask = np.fromiter((matches(d.metadata, filter) for d in col.docs), dtype=bool, count=col.size)
            candidates = np.flatnonzero(mask)
            scores = scores[candidates]
        else:
            candidates = None
        k = min(limit, scores.shape[0])
        if k == 0:
            return []
        # The float32 product picks the candidates: the k best, and every one within its rounding of the k-th.
        # They are scored again exactly, alike for equal embeddings (the product rounds each column its own way,
        # so copies of one embedding scored apart in the last place), clamped, then ordered by score and id.
        kth = -np.partition(-scores, k - 1)[k - 1]
        near = np.flatnonzero(scores >= kth - 4 * col.dimension * float(np.finfo(np.float32).eps))
        rows = near if candidates is None else candidates[near]
        exact = _cosines(col.raw[rows], wide)
        picked = sorted(zip(exact.tolist(), rows.tolist(), strict=True), key=lambda sr: (-sr[0], col.docs[sr[1]].id))
        return [SearchResult.of(self._full(col, row), score) for score, row in picked[:k]]

    async def get(self, ids: Sequence[str], collection: str) -> list[Document]:
        """The documents with these ids that exist, in the order asked."""
        ids = check_ids(ids)
        self._check_collection(collection)
        with self._lock:
            col = self._collections.get(collection)
            if col is None:
                return []
            return [self._full(col, col.rows[i]) for i in ids if i in col.rows]

    async def delete(self, ids: Sequence[str], collection: str) -> int:
        """Remove documents by id; returns how many existed."""
        ids = check_ids(ids)
        self._check_collection(collection)
        with self._lock:
            col = self._collections.get(collection)
            return 0 if col is None else self._delete(col, ids)

    def _delete(self, col: _Collection, ids: Sequence[str]) -> int:
        removed = 0
        for doc_id in dict.fromkeys(ids):
            row = col.rows.pop(doc_id, None)
            if row is None:
                continue
            last = col.size - 1
            if row != last:  # move the last row into the hole
                moved = col.docs[last]
                col.docs[row] = moved
                col.vectors[:, row] = col.vectors[:, last]
                col.raw[row] = col.raw[last]
                col.rows[moved.id] = row
            col.docs.pop()
            removed += 1
        return removed

    async def list_collections(self) -> list[str]:
        """Collection names, sorted."""
        with self._lock:
            return sorted(self._collections)

    async def delete_collection(self, collection: str) -> bool:
        """Remove a collection; ``False`` if it did not exist."""
        self._check_collection(collection)
        with self._lock:
            return self._collections.pop(collection, None) is not None

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase every document whose metadata has ``agent_id`` (and ``session_id``) of the scope, in every
        collection (``Forgetter``); returns how many."""
        check_forget(agent_id, session_id)
        removed = 0
        with self._lock:
            for col in self._collections.values():
                doomed = [d.id for d in col.docs if in_scope(d.metadata, agent_id, session_id)]
                if doomed:
                    removed += self._delete(col, doomed)
        return removed


__all__ = ["InMemoryVectorStore"]
