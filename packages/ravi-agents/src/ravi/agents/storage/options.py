"""The options of the in-memory stores that take any (most take none: :class:`ravi.kernel.options.NoOptions`)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from ravi.kernel.options import BackendOptions


class InMemoryLongTermOptions(BackendOptions):
    """The options of ``InMemoryLongTermMemory`` (``[longterm] backend = "memory"``)."""

    code_only: ClassVar[frozenset[str]] = frozenset({"embedding_client", "clock"})
    embedding_client: Any = Field(
        None, description="An `EmbeddingClient` (in code only); the hashing embedder by default."
    )
    clock: Any = Field(None, description="A clock for expiry (in code only, for tests); the system clock by default.")


class InMemoryVectorOptions(BackendOptions):
    """The options of ``InMemoryVectorStore`` (``[vector] backend = "memory"``)."""

    code_only: ClassVar[frozenset[str]] = frozenset({"embedding_client"})
    embedding_client: Any = Field(
        None, description="An `EmbeddingClient` (in code only) for documents that come without an embedding."
    )


class InMemoryBlobOptions(BackendOptions):
    """The options of ``InMemoryFileStore`` (``[blob] backend = "memory"``)."""

    code_only: ClassVar[frozenset[str]] = frozenset({"clock"})
    clock: Any = Field(None, description="A clock for expiry (in code only, for tests); the system clock by default.")


class InMemorySummaryOptions(BackendOptions):
    """The options of ``InMemorySummaryStore`` (``[summaries] backend = "memory"``)."""

    max_entries: int = Field(10_000, ge=1, description="Summaries kept at most; the oldest go first.")


__all__ = ["InMemoryBlobOptions", "InMemoryLongTermOptions", "InMemorySummaryOptions", "InMemoryVectorOptions"]
