"""PostgreSQL backends for Ravi, registered under the name ``postgres``.

* :class:`PostgresHistoryProvider` (``history``): durable, ordered, idempotent conversation history.
* :class:`PostgresMemoryStore` (``state``): session state as jsonb, merged atomically.
* :class:`PgVectorStore` (``vector``): documents searched with pgvector's HNSW index.
* :class:`PgLongTermMemory` (``longterm``): an agent's memories, found again by similarity, with TTL.
* :class:`PgTaskStore` (``tasks``): task boards with the kernel's lifecycle under row locks.
* :class:`LocalPostgres`: a throwaway server from the ``[local]`` extra (``ravi dev postgres`` runs one).

Every store takes a ``dsn``, a ``schema`` (default ``ravi``), a ``table_prefix`` and pool sizes, creates and
migrates its tables on first use, and raises only the kernel's typed errors.
"""

from ravi.capabilities.postgres.history import PostgresHistoryProvider
from ravi.capabilities.postgres.local import LocalPostgres
from ravi.capabilities.postgres.longterm import PgLongTermMemory
from ravi.capabilities.postgres.state import PostgresMemoryStore
from ravi.capabilities.postgres.summaries import PostgresSummaryStore
from ravi.capabilities.postgres.tasks import PgTaskStore
from ravi.capabilities.postgres.vector import PgVectorStore

__all__ = [
    "LocalPostgres",
    "PostgresSummaryStore",
    "PgLongTermMemory",
    "PgTaskStore",
    "PgVectorStore",
    "PostgresHistoryProvider",
    "PostgresMemoryStore",
]
