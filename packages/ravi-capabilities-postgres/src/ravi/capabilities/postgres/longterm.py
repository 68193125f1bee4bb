"""``PgLongTermMemory``: an agent's long-term memory in PostgreSQL, found again with pgvector."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Unpack

import asyncpg
import numpy as np

from ravi.capabilities.postgres._db import Migration, PoolOptions, PostgresStore
from ravi.capabilities.postgres._jsonb import dumps as jsonb_dumps
from ravi.capabilities.postgres.options import PgLongTermOptions
from ravi.capabilities.postgres.vector import HNSW_MAX_DIMENSIONS, register_vector_codec
from ravi.kernel.embeddings import HashingEmbeddingClient, check_embedding_client, check_embeddings, check_measurable
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.storage import Memory, check_forget
from ravi.kernel.values import check_count, check_memory, check_scope


def _migrations(dimension: int) -> list[Migration]:
    return [
        Migration(
            1,
            f"memories with {dimension}-dimension embeddings",
            f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE {{schema}}."{{prefix}}memories" (
    id         text PRIMARY KEY,
    agent_id   text NOT NULL,
    namespace  text NOT NULL,
    content    text NOT NULL,
    metadata   jsonb NOT NULL,
    embedding  vector({dimension}) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz
);
CREATE INDEX "{{prefix}}memories_scope" ON {{schema}}."{{prefix}}memories" (agent_id, namespace);
CREATE INDEX "{{prefix}}memories_expiry" ON {{schema}}."{{prefix}}memories" (expires_at) WHERE expires_at IS NOT NULL;
"""
            + (  # pgvector indexes no wider vectors: the table is made without the index
                'CREATE INDEX "{prefix}memories_hnsw" ON {schema}."{prefix}memories" '
                "USING hnsw (embedding vector_cosine_ops);\n"
                if dimension <= HNSW_MAX_DIMENSIONS
                else ""
            ),
        ),
    ]


class PgLongTermMemory(PostgresStore):
    """The ``LongTermMemory`` contract on PostgreSQL with pgvector.

    Memories are rows keyed by ``(agent_id, namespace)`` with an embedding from ``embedding_client``
    (:class:`~ravi.agents.storage.HashingEmbeddingClient` by default, offline); search is cosine similarity
    within the scope, best first. A memory saved with a ``ttl`` is never returned after it expires, and expired
    rows are deleted as new memories arrive. The table's vector dimension is fixed by the embedding client of
    the first process that creates it; one of more than 2,000 dimensions (pgvector's index's limit) has no HNSW
    index.

    A separate class from :class:`~ravi.capabilities.postgres.PgVectorStore`: the two Protocols use the same
    method names (``search``, ``get``, ``delete``) with different meanings, so one object cannot be both.
    """

    Options = PgLongTermOptions
    component = "longterm"

    init = staticmethod(register_vector_codec)

    def __init__(
        self, dsn: str, *, embedding_client: EmbeddingClient | None = None, **options: Unpack[PoolOptions]
    ) -> None:
        PgLongTermOptions.check(dsn=dsn, embedding_client=embedding_client, **options)
        if embedding_client is not None:
            check_embedding_client(embedding_client)
        self._embedder = embedding_client or HashingEmbeddingClient()
        self.migrations = _migrations(self._embedder.dimension)
        super().__init__(dsn, **options)
        self._table = self.db.table("memories")

    async def _embed(self, text: str, what: str) -> np.ndarray:
        [vector] = check_embeddings(await self._embedder.embed([text]), 1, self._embedder.dimension)
        # refused, never made another: a zero vector was stored as [1, 0, ...], a direction it never had
        check_measurable(vector, what)
        return np.asarray(vector, dtype=np.float32)

    @staticmethod
    def _memory(row: asyncpg.Record, score: float | None = None) -> Memory:
        return Memory(
            id=row["id"],
            agent_id=row["agent_id"],
            namespace=row["namespace"],
            content=row["content"],
            metadata=json.loads(row["metadata"]),
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            score=score,
        )

    async def save(
        self,
        agent_id: str,
        content: str,
        namespace: str = "default",
        ttl: timedelta | float | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Store a memory; returns its id."""
        seconds, checked = check_memory(agent_id, content, namespace, ttl, metadata)
        meta = jsonb_dumps(checked)
        vector = await self._embed(content, "the embedding of the memory")
        memory_id = uuid.uuid4().hex
        async with self.db.connection() as connection:
            await connection.execute(
                f"WITH gone AS (DELETE FROM {self._table} WHERE expires_at < now()) "
                f"INSERT INTO {self._table} (id, agent_id, namespace, content, metadata, embedding, expires_at) "
                "VALUES ($1, $2, $3, $4, $5::jsonb, $6, now() + make_interval(secs => $7))",
                memory_id,
                agent_id,
                namespace,
                content,
                meta,
                vector,
                seconds,
            )
        return memory_id

    async def search(self, agent_id: str, query: str, namespace: str = "default", limit: int = 5) -> list[Memory]:
        """The closest live memories, best first, each with its cosine ``score``."""
        check_scope(agent_id=agent_id, namespace=namespace)
        limit = check_count(limit, "limit")  # a bool is not a count, as everywhere one is given
        if limit == 0:
            return []
        vector = await self._embed(query, "the embedding of the query")
        rows = await self.db.fetch(
            f"SELECT id, agent_id, namespace, content, metadata::text AS metadata, created_at, expires_at, "
            f"embedding <=> $3 AS distance FROM {self._table} "
            "WHERE agent_id = $1 AND namespace = $2 AND (expires_at IS NULL OR expires_at > now()) "
            "ORDER BY distance, id LIMIT $4",
            agent_id,
            namespace,
            vector,
            limit,
        )
        return [self._memory(r, max(-1.0, min(1.0, 1.0 - float(r["distance"])))) for r in rows]

    async def get(self, agent_id: str, memory_id: str, namespace: str = "default") -> Memory | None:
        """One live memory by id, or ``None``."""
        check_scope(agent_id=agent_id, namespace=namespace, memory_id=memory_id)
        row = await self.db.fetchrow(
            f"SELECT id, agent_id, namespace, content, metadata::text AS metadata, created_at, expires_at "
            f"FROM {self._table} WHERE id = $1 AND agent_id = $2 AND namespace = $3 "
            "AND (expires_at IS NULL OR expires_at > now())",
            memory_id,
            agent_id,
            namespace,
        )
        return None if row is None else self._memory(row)

    async def delete(self, agent_id: str, memory_id: str, namespace: str = "default") -> bool:
        """Remove one memory; ``False`` if it was not there (or had expired)."""
        check_scope(agent_id=agent_id, namespace=namespace, memory_id=memory_id)
        removed = await self.db.fetchval(
            f"DELETE FROM {self._table} WHERE id = $1 AND agent_id = $2 AND namespace = $3 "
            "RETURNING expires_at IS NULL OR expires_at > now()",
            memory_id,
            agent_id,
            namespace,
        )
        return bool(removed)

    async def clear(self, agent_id: str, namespace: str | None = None) -> int:
        """Remove the agent's memories in ``namespace`` (every namespace when ``None``); returns the live ones."""
        check_scope(agent_id=agent_id)
        if namespace is not None:
            check_scope(namespace=namespace)
        count = await self.db.fetchval(
            f"WITH gone AS (DELETE FROM {self._table} WHERE agent_id = $1 AND ($2::text IS NULL OR namespace = $2) "
            "RETURNING expires_at) SELECT count(*) FROM gone WHERE expires_at IS NULL OR expires_at > now()",
            agent_id,
            namespace,
        )
        return int(count)

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the agent's memories in every namespace (``Forgetter``), or, for a session, those whose metadata
        has ``session_id`` equal to it; returns how many (expired ones included)."""
        check_forget(agent_id, session_id)
        if session_id is None:
            status = await self.db.execute(f"DELETE FROM {self._table} WHERE agent_id = $1", agent_id)
        else:
            status = await self.db.execute(
                f"DELETE FROM {self._table} WHERE agent_id = $1 AND metadata @> $2::jsonb",
                agent_id,
                json.dumps({"session_id": session_id}, ensure_ascii=False),
            )
        return int(status.split()[-1])


__all__ = ["PgLongTermMemory"]
