"""Embedding clients (they live in :mod:`ravi.kernel.embeddings`, and are importable here too), and the check of
what a client returned that every in-memory store applies."""

import numpy as np

from ravi.kernel.embeddings import CallableEmbeddingClient, HashingEmbeddingClient, check_embeddings
from ravi.kernel.errors import InvalidArgument


def embedded(vectors: object, count: int, dimension: int) -> np.ndarray:
    """What an embedding client returned for ``count`` texts, as a ``count`` by ``dimension`` float32 array, once
    :func:`~ravi.kernel.embeddings.check_embeddings` finds it right; ``InvalidArgument`` otherwise, and for a
    number past float32's range (it would be kept as an infinity)."""
    checked = check_embeddings(vectors, count, dimension)
    with np.errstate(over="ignore"):  # a number past float32's range becomes an infinity, refused below
        rows = np.asarray(checked, dtype=np.float32).reshape(count, dimension)
    if not np.all(np.isfinite(rows)):
        raise InvalidArgument("embeddings must be finite numbers within float32's range")
    return rows


__all__ = ["CallableEmbeddingClient", "HashingEmbeddingClient", "embedded"]
