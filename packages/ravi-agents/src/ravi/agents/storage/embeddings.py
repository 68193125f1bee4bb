"""Embedding clients; they live in :mod:`ravi.kernel.embeddings`, and are importable here too."""

from ravi.kernel.embeddings import CallableEmbeddingClient, HashingEmbeddingClient

__all__ = ["CallableEmbeddingClient", "HashingEmbeddingClient"]
