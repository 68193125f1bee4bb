"""Recall by meaning in the process: each message embedded once, kept as a row of a matrix, and the units whose
messages lie closest to a request.

The same code serves the in-memory history provider's hybrid search and an in-process ranking over a history,
so both give the same units.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ravi.agents.storage.embeddings import embedded
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.loops import KeyedLocks
from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import MEANING_LOOKBACK, UnitMatch, match_units, message_text

EMBEDDED_CHARS = 2_000
"""How much of a message's searchable text is embedded: the start says what a long tool output is about, and a
static model's cost grows with the text."""


class MessageVectors:
    """The unit-length embeddings of a growing list of messages under one model, a row per message (zeros for a
    message without text, which then matches nothing).

    The tasks of one event loop extend it one at a time, so they never embed the same rows twice; tasks of other
    loops (other threads) may embed rows at the same time, and the rows the first of them stores are kept (the
    same messages give the same rows). Rows are read and written under a ``threading.Lock``."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.size = 0
        self._buffer = np.zeros((0, 0), dtype=np.float32)  # rows beyond ``size`` are room to grow into
        self._truncations = 0  # an extension that began before a truncation stores nothing
        self._extending = KeyedLocks[None]()  # one extension at a time per loop
        self._lock = threading.Lock()  # held without awaiting, by every thread that reads or writes the rows

    async def extend(self, messages: Sequence[ChatMessage], embedder: EmbeddingClient) -> None:
        """Embed ``messages[self.size:]``, those appended since the last call (the list may grow meanwhile:
        what it holds when the call starts is embedded)."""
        async with self._extending(None):
            start, end, truncations = self.size, len(messages), self._truncations
            if end <= start:
                return
            texts = [message_text(messages[i])[:EMBEDDED_CHARS] for i in range(start, end)]
            wanted = [i for i, t in enumerate(texts) if t.strip()]
            dimension = embedder.dimension
            with self._lock:
                self._check_dimension(dimension)
            rows = np.zeros((len(texts), dimension), dtype=np.float32)
            if wanted:
                vectors = await embedder.embed([texts[i] for i in wanted])
                rows[wanted] = _unit_rows(embedded(vectors, len(wanted), dimension), dimension)
            with self._lock:
                self._check_dimension(dimension)  # another loop may have stored rows of another client meanwhile
                if truncations == self._truncations:
                    self._store(rows, start, end)

    def _check_dimension(self, dimension: int) -> None:
        """``InvalidArgument`` unless the rows held (if any) have ``dimension`` numbers."""
        held = self._buffer.shape[1] if self.size else dimension
        if held != dimension:
            raise InvalidArgument(
                f"the embeddings of model {self.model!r} have {held} dimensions, this client's {dimension}",
                hint="give each embedding model its own name",
            )

    def _store(self, rows: np.ndarray, start: int, end: int) -> None:
        """Keep ``rows``, the embeddings of messages ``start`` to ``end``, past those already held."""
        held = self.size
        if end <= held:  # another loop stored them meanwhile
            return
        if end > len(self._buffer) or self._buffer.shape[1] != rows.shape[1]:
            grown = np.zeros((max(end, 2 * len(self._buffer), 256), rows.shape[1]), dtype=np.float32)
            if held:
                grown[:held] = self._buffer[:held]
            self._buffer = grown
        self._buffer[held:end] = rows[held - start :]
        self.size = end

    def truncate(self, size: int) -> None:
        """Forget the embeddings from message ``size`` on (the history changed there)."""
        with self._lock:
            self.size = min(self.size, size)
            self._truncations += 1

    def similarity(self, vector: Sequence[float] | np.ndarray, stop: int) -> np.ndarray:
        """The cosine similarity to ``vector`` of the last :data:`~ravi.kernel.search.MEANING_LOOKBACK` of the
        first ``stop`` messages, by position (zero for the messages before them, and for any not embedded)."""
        out = np.zeros(stop, dtype=np.float32)
        with self._lock:
            [query] = _unit_rows([vector], self._buffer.shape[1] if self.size else len(vector))
            end = min(stop, self.size)
            start = max(0, end - MEANING_LOOKBACK)
            if end > start:
                # einsum runs in this thread: a matrix-vector product through BLAS wakes its thread pool, which
                # costs milliseconds on a busy machine for what one core does in a tenth of one
                out[start:end] = np.einsum("ij,j->i", self._buffer[start:end], query)
        return out


def _unit_rows(vectors: Sequence[Sequence[float] | np.ndarray] | np.ndarray, dimension: int) -> np.ndarray:
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim != 2 or rows.shape[1] != dimension:
        raise InvalidArgument(f"embeddings must have {dimension} dimensions, got shape {rows.shape}")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = rows / norms
    return unit


def meaning_units(
    messages: Sequence[ChatMessage],
    similarity: np.ndarray,
    *,
    before: Sequence[int],
    systems: Sequence[int],
    stop: int,
    limit: int,
) -> list[UnitMatch]:
    """The ``limit`` units of ``messages[:stop]`` whose messages are most similar (``similarity``, by position),
    as :func:`~ravi.kernel.search.match_units` ranks them: only the best messages are looked at, as many as it
    takes to fill ``limit`` units."""
    if not limit or not stop:
        return []
    take = min(stop, max(4 * limit, 64))
    while True:
        best = np.argpartition(-similarity[:stop], take - 1)[:take] if take < stop else np.arange(stop)
        scores = {int(i): float(similarity[i]) for i in best if similarity[i] > 0}
        found = match_units(messages, scores, before=before, systems=systems, stop=stop, limit=limit)
        if len(found) >= limit or take >= stop:
            return found
        take = min(stop, take * 4)


__all__ = ["EMBEDDED_CHARS", "MessageVectors", "meaning_units"]
