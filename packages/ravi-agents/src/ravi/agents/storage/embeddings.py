"""Embedding clients (they live in :mod:`ravi.kernel.embeddings`, and are importable here too), and the check of
what a client returned that every in-memory store applies."""

import numpy as np

from ravi.kernel.embeddings import CallableEmbeddingClient, HashingEmbeddingClient
from ravi.kernel.errors import InvalidArgument


def embedded(vectors: object, count: int, dimension: int) -> np.ndarray:
    """What an embedding client returned for ``count`` texts, as a ``count`` by ``dimension`` array of finite
    numbers; ``InvalidArgument`` for anything else (the client is code of the caller's)."""
    try:
        rows = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"the embedder returned vectors that are not lists of numbers: {error}") from None
    if rows.ndim == 0 or len(rows) != count:
        raise InvalidArgument(
            f"the embedder returned {len(rows) if rows.ndim else 'no list of'} vectors for {count} texts"
        )
    if rows.ndim != 2 or rows.shape[1] != dimension:
        raise InvalidArgument(f"embeddings must have {dimension} dimensions, got shape {rows.shape}")
    if not np.all(np.isfinite(rows)):
        raise InvalidArgument("embeddings must be finite numbers")
    return rows


__all__ = ["CallableEmbeddingClient", "HashingEmbeddingClient", "embedded"]
