"""``PgVectorStore``: documents with embeddings in PostgreSQL, searched with pgvector's HNSW index."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, Unpack

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from ravi.capabilities.postgres._db import Migration, PoolOptions, PostgresStore
from ravi.capabilities.postgres._jsonb import dumps as jsonb_dumps
from ravi.capabilities.postgres.options import PgVectorOptions
from ravi.kernel.embeddings import check_embedding_client, check_embeddings
from ravi.kernel.errors import InvalidArgument, RaviError
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import TextBlock
from ravi.kernel.storage import Document, Filter, SearchResult, check_filter, check_forget
from ravi.kernel.values import check_count, check_ids, check_items, check_length, check_scope, check_vector, thaw

T = TypeVar("T")

_STALE = (asyncpg.exceptions.UndefinedTableError, asyncpg.exceptions.DataError)
"""What using a collection's remembered table raises when another process has deleted the collection (the table
is gone) or made it again with another dimension (pgvector: "expected 4 dimensions, not 3")."""

MIGRATIONS = [
    Migration(
        1,
        "pgvector and the collection catalogue",
        """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE {schema}."{prefix}collections" (
    name       text PRIMARY KEY,
    table_name text NOT NULL UNIQUE,
    dimension  int  NOT NULL CHECK (dimension > 0)
);
""",
    ),
    Migration(
        2,
        "documents keep content blocks beside their text",
        """
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT table_name FROM {schema}."{prefix}collections" LOOP
        EXECUTE format('ALTER TABLE %I.%I ADD COLUMN IF NOT EXISTS blocks jsonb', '{schema}', t);
    END LOOP;
END $$;
""",
    ),
]


HNSW_MAX_DIMENSIONS = 2000
"""The most dimensions pgvector's HNSW index takes: a collection (or memories table) of wider vectors is made
without one and searched exactly."""


def _stored_blocks(document: Document) -> str | None:
    """The ``blocks`` column: ``NULL`` when ``content`` is the text alone (one non-empty text block, or none)."""
    content = document.content
    if not content or (len(content) == 1 and isinstance(content[0], TextBlock) and content[0].text):
        return None
    return jsonb_dumps([b.model_dump(mode="json") for b in content], ensure_ascii=False)


async def register_vector_codec(connection: asyncpg.Connection) -> None:
    """Teach a connection pgvector's binary format (a pool ``init`` hook)."""
    await register_vector(connection)


def filter_sql(filter: Filter | None, first: int) -> tuple[str, list[Any]]:
    """SQL conditions for a metadata filter on the jsonb column ``metadata``, with their parameters.

    Each key must equal its value; a list value means any of its items. Keys and values travel as
    parameters.
    """
    check_filter(filter)
    if not filter:
        return "", []
    clauses, params = [], []
    n = first
    for key, wanted in filter.items():
        # thawed: json.dumps takes dicts only, and a MappingProxyType or a UserDict passed the check (a tuple stays
        # one value, as in memory: only a list is a choice)
        if isinstance(wanted, list):
            clauses.append(f"metadata -> ${n} = ANY(${n + 1}::jsonb[])")
            params += [str(key), [json.dumps(thaw(v)) for v in wanted]]
        else:
            clauses.append(f"metadata -> ${n} = ${n + 1}::jsonb")
            params += [str(key), json.dumps(thaw(wanted))]
        n += 2
    return " AND " + " AND ".join(clauses), params


class PgVectorStore(PostgresStore):
    """The ``VectorStore`` contract on PostgreSQL with pgvector.

    Each collection is a table of its own with a ``vector(dimension)`` column and an HNSW index for cosine
    distance, so collections never mix and each keeps its own dimension. pgvector indexes at most
    :data:`HNSW_MAX_DIMENSIONS` dimensions: a collection of wider vectors (up to 16,000, such as a 3,072-dimension
    model's) has no index and is always searched exactly. Metadata is jsonb and filters run in
    SQL (with pgvector's iterative index scans, so a filter does not starve the top ``limit``). Scores are
    cosine similarities: higher is closer.

    A small collection is searched exactly, every vector compared, as Qdrant does below its
    ``full_scan_threshold``: an HNSW graph is approximate, and it loses the most neighbours among near-duplicate
    vectors, such as the turns of one session (on 3,000 of them, pgvector's index found about 80% of the true ten
    nearest). Reading a table of a few megabytes costs a few milliseconds.

    Args:
        dsn, schema, table_prefix, min_size, max_size: as the other Postgres stores.
        embedding_client: Embeds documents that come without an embedding.
        ef_search: HNSW search breadth; higher gives better recall for a little more time.
        hnsw_m, hnsw_ef_construction: HNSW build parameters of new collections.
        exact_search_kb: A collection whose table (with its TOAST data) takes less than this many KiB is searched
            exactly; a larger one through its HNSW index. ``0`` always uses the index.
    """

    Options = PgVectorOptions
    component = "vector"
    migrations = MIGRATIONS

    init = staticmethod(register_vector_codec)

    def __init__(
        self,
        dsn: str,
        *,
        embedding_client: EmbeddingClient | None = None,
        ef_search: int = 100,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        exact_search_kb: int = 10_240,
        **options: Unpack[PoolOptions],
    ) -> None:
        checked = PgVectorOptions.check(
            dsn=dsn,
            ef_search=ef_search,
            hnsw_m=hnsw_m,
            hnsw_ef_construction=hnsw_ef_construction,
            exact_search_kb=exact_search_kb,
            **options,
        )
        ef_search, hnsw_m, hnsw_ef_construction = checked.ef_search, checked.hnsw_m, checked.hnsw_ef_construction
        if embedding_client is not None:
            check_embedding_client(embedding_client)
        exact_search_kb = checked.exact_search_kb
        options.setdefault("command_timeout", 60.0)
        super().__init__(dsn, **options)
        self._catalogue = self.db.table("collections")
        self._embedder = embedding_client
        self.ef_search = int(ef_search)
        self._hnsw = (int(hnsw_m), int(hnsw_ef_construction))
        self.exact_search_kb = exact_search_kb
        self._tables: dict[str, tuple[str, int]] = {}

    @staticmethod
    def _check_collection(collection: str) -> None:
        check_scope(collection=collection)

    async def _collection(self, collection: str, *, create_dimension: int | None = None) -> tuple[str, int] | None:
        self._check_collection(collection)
        known = self._tables.get(collection)
        if known is not None:
            return known
        row = await self.db.fetchrow(f"SELECT table_name, dimension FROM {self._catalogue} WHERE name = $1", collection)
        if row is None and create_dimension is not None:
            digest = hashlib.sha256(collection.encode()).hexdigest()[:24]
            table = f"{self.db.prefix}vec_{digest}"
            qualified = f'"{self.db.schema}"."{table}"'
            m, ef = self._hnsw
            async with self.db.connection() as connection, connection.transaction():
                # No conflict target: a concurrent creator of the same collection inserts the same table name
                # too, and the server may find that unique key taken before the name's (a target of ``name``
                # alone let that one raise).
                inserted = await connection.fetchval(
                    f"INSERT INTO {self._catalogue} (name, table_name, dimension) VALUES ($1, $2, $3) "
                    "ON CONFLICT DO NOTHING RETURNING table_name",
                    collection,
                    table,
                    create_dimension,
                )
                if inserted is not None:
                    await connection.execute(
                        f"CREATE TABLE {qualified} (id text PRIMARY KEY, content text NOT NULL, blocks jsonb, "
                        f"metadata jsonb NOT NULL, embedding vector({create_dimension}) NOT NULL)"
                    )
                    if create_dimension <= HNSW_MAX_DIMENSIONS:  # a wider collection is always searched exactly
                        await connection.execute(
                            f'CREATE INDEX "{table}_hnsw" ON {qualified} USING hnsw (embedding vector_cosine_ops) '
                            f"WITH (m = {m}, ef_construction = {ef})"
                        )
            row = await self.db.fetchrow(
                f"SELECT table_name, dimension FROM {self._catalogue} WHERE name = $1", collection
            )
        if row is None and create_dimension is not None:  # its table name is another collection's (a hash collision)
            raise RaviError(f"collection {collection!r} cannot be created: its table name is taken")
        if row is None:
            return None
        found = (f'"{self.db.schema}"."{row["table_name"]}"', int(row["dimension"]))
        self._tables[collection] = found
        return found

    async def _using(
        self, collection: str, run: Callable[[str, int], Awaitable[T]], *, size: int | None = None, create: bool = False
    ) -> T | None:
        """``run(table, dimension)`` on the collection's table; ``None`` when there is no such collection (made,
        for vectors of ``size``, when ``create``). The table this process remembers for a collection can be stale:
        another process may have deleted the collection, or made it again with another dimension, since. So a
        remembered one that disagrees with ``size``, or whose use fails as a stale one does (the table is gone,
        or holds vectors of another size), is read again from the catalogue, and ``run`` tried once more. A
        catalogue row whose table is gone (dropped outside Ravi) names data that no longer exists: the row is
        removed, and the collection is one that does not exist (made again when ``create``)."""
        remembered = collection in self._tables
        for attempt in (1, 2, 3):
            found = await self._collection(collection, create_dimension=size if create else None)
            if found is None:
                return None
            if remembered and attempt == 1 and size is not None and size != found[1]:
                self._tables.pop(collection, None)
                continue
            try:
                return await run(*found)
            except RaviError as error:
                if attempt == 3 or not isinstance(error.__cause__, _STALE):
                    raise
                self._tables.pop(collection, None)
                if remembered and attempt == 1:
                    continue  # read the catalogue again
                if not isinstance(error.__cause__, asyncpg.exceptions.UndefinedTableError):
                    raise
                if not await self._forget_orphan(collection, found[0]):
                    raise
        raise AssertionError("unreachable")

    async def _forget_orphan(self, collection: str, table: str) -> bool:
        """Remove the collection's catalogue row if it still names ``table`` and that table does not exist;
        whether it did."""
        name = table.rsplit(".", 1)[-1].strip('"')
        removed = await self.db.fetchval(
            f"DELETE FROM {self._catalogue} WHERE name = $1 AND table_name = $2 "
            "AND to_regclass(quote_ident($3) || '.' || quote_ident($2)) IS NULL RETURNING name",
            collection,
            name,
            self.db.schema,
        )
        return removed is not None

    async def _vectors(self, documents: Sequence[Document]) -> list[np.ndarray]:
        missing = [i for i, d in enumerate(documents) if d.embedding is None]
        if missing and self._embedder is None:
            raise InvalidArgument(
                f"document {documents[missing[0]].id!r} has no embedding and the store has no embedding_client",
                hint="pass embedding=... or build the store with embedding_client=...",
            )
        made: dict[int, list[float]] = {}
        if missing:
            assert self._embedder is not None
            answer = await self._embedder.embed([documents[i].text for i in missing])
            made = dict(zip(missing, check_embeddings(answer, len(missing), self._embedder.dimension), strict=True))
        vectors = []
        for i, d in enumerate(documents):
            v = np.asarray(d.embedding if d.embedding is not None else made[i], dtype=np.float32)
            if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
                raise InvalidArgument(f"document {d.id!r}: embeddings must be non-empty, finite numbers")
            wide = v.astype(np.float64)
            check_length(float(wide @ wide), f"document {d.id!r}")
            vectors.append(v)
        if len({v.size for v in vectors}) > 1:
            raise InvalidArgument("documents of one call must share a dimension")
        return vectors

    async def _write(self, documents: Sequence[Document], collection: str, *, replace: bool) -> list[str]:
        self._check_collection(collection)
        documents = check_items(documents, Document, "documents")
        if not documents:
            return []
        vectors = await self._vectors(documents)
        await self._using(
            collection,
            lambda table, dimension: self._insert(collection, table, dimension, documents, vectors, replace),
            size=vectors[0].size,
            create=True,
        )
        return [d.id for d in documents]

    async def _insert(
        self,
        collection: str,
        table: str,
        dimension: int,
        documents: Sequence[Document],
        vectors: list[np.ndarray],
        replace: bool,
    ) -> None:
        if vectors[0].size != dimension:
            raise InvalidArgument(
                f"collection {collection!r} holds vectors of dimension {dimension}, got {vectors[0].size}"
            )
        conflict = (
            (
                "DO UPDATE SET content = EXCLUDED.content, blocks = EXCLUDED.blocks, metadata = EXCLUDED.metadata, "
                "embedding = EXCLUDED.embedding"
            )
            if replace
            else "DO NOTHING"
        )
        rows = [
            (d.id, d.text, _stored_blocks(d), jsonb_dumps(d.metadata), v)
            for d, v in zip(documents, vectors, strict=True)
        ]
        async with self.db.connection() as connection, connection.transaction():
            await connection.executemany(
                f"INSERT INTO {table} (id, content, blocks, metadata, embedding) "
                f"VALUES ($1, $2, $3::jsonb, $4::jsonb, $5) ON CONFLICT (id) {conflict}",
                rows,
            )

    async def add(self, documents: Sequence[Document], collection: str) -> list[str]:
        """Insert documents whose id is new to the collection; existing ids are left as they are."""
        return await self._write(documents, collection, replace=False)

    async def upsert(self, documents: Sequence[Document], collection: str) -> list[str]:
        """Insert or replace documents by id."""
        return await self._write(documents, collection, replace=True)

    @staticmethod
    def _document(row: asyncpg.Record) -> Document:
        blocks = row["blocks"]
        return Document(
            id=row["id"],
            content=row["content"] if blocks is None else json.loads(blocks),
            metadata=json.loads(row["metadata"]),
            embedding=tuple(np.asarray(row["embedding"], dtype=np.float32).tolist()),
        )

    async def search(
        self,
        query_embedding: Sequence[float],
        *,
        collection: str = "default",
        limit: int = 5,
        filter: Filter | None = None,
    ) -> list[SearchResult]:
        """The ``limit`` most similar documents, best first, among those matching ``filter``."""
        self._check_collection(collection)
        vector = check_vector(query_embedding)
        limit = check_count(limit, "limit")  # a bool is not a count, as everywhere one is given
        where, params = filter_sql(filter, 3)
        if limit == 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        found = await self._using(
            collection,
            lambda table, dimension: self._search(collection, table, dimension, query, limit, where, params),
            size=query.size,
        )
        return [] if found is None else found

    async def _search(
        self, collection: str, table: str, dimension: int, query: np.ndarray, limit: int, where: str, params: list[Any]
    ) -> list[SearchResult]:
        if query.ndim != 1 or query.size != dimension:
            raise InvalidArgument(
                f"collection {collection!r} holds vectors of dimension {dimension}, the query has {query.size}"
            )
        if not np.all(np.isfinite(query)):
            raise InvalidArgument("the query vector must be finite")
        wide = query.astype(np.float64)
        check_length(float(wide @ wide), "the query vector")
        async with self.db.connection() as connection, connection.transaction():
            await connection.execute(f"SET LOCAL hnsw.ef_search = {self.ef_search}")
            if where:
                await connection.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            # one statement, two branches, one of them skipped by a one-time filter on the table's size (a scalar
            # subquery, evaluated once): the first orders by an expression the index cannot serve, so every
            # vector is compared. Equal distances come in id order before the limit, as on every store; the index
            # orders by distance alone, so its branch takes ef_search candidates (what the index looks through
            # anyway) and orders those by distance, then id.
            columns = "id, content, blocks::text AS blocks, metadata::text AS metadata, embedding"
            small = f"(SELECT pg_table_size('{table}'::regclass) < {self.exact_search_kb * 1024})"
            rows = await connection.fetch(
                f"(SELECT {columns}, embedding <=> $1 AS distance FROM {table} WHERE {small}{where} "
                "ORDER BY (embedding <=> $1) + 0, id LIMIT $2) UNION ALL "
                f"(SELECT * FROM (SELECT {columns}, embedding <=> $1 AS distance FROM {table} "
                f"WHERE NOT {small}{where} ORDER BY embedding <=> $1 LIMIT greatest($2, {self.ef_search})) AS near "
                "ORDER BY distance, id LIMIT $2)",
                query,
                limit,
                *params,
            )
        measured = (r for r in rows if not math.isnan(float(r["distance"])))
        ranked = sorted(measured, key=lambda r: (r["distance"], r["id"]))
        return [SearchResult.of(self._document(r), max(-1.0, min(1.0, 1.0 - float(r["distance"])))) for r in ranked]

    async def get(self, ids: Sequence[str], collection: str) -> list[Document]:
        """The documents with these ids that exist, in the order asked."""
        ids = check_ids(ids)
        self._check_collection(collection)
        if not ids:
            return []

        async def read(table: str, _: int) -> list[asyncpg.Record]:
            return await self.db.fetch(
                f"SELECT id, content, blocks::text AS blocks, metadata::text AS metadata, embedding FROM {table} "
                "WHERE id = ANY($1::text[])",
                list(ids),
            )

        rows = await self._using(collection, read) or []
        by_id = {r["id"]: self._document(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def delete(self, ids: Sequence[str], collection: str) -> int:
        """Remove documents by id; returns how many existed."""
        ids = check_ids(ids)
        self._check_collection(collection)
        if not ids:
            return 0

        async def remove(table: str, _: int) -> int:
            status = await self.db.execute(f"DELETE FROM {table} WHERE id = ANY($1::text[])", list(set(ids)))
            return int(status.split()[-1])

        return await self._using(collection, remove) or 0

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase every document whose metadata has ``agent_id`` (and ``session_id``) of the scope, in every
        collection (``Forgetter``); returns how many."""
        check_forget(agent_id, session_id)
        scope = {"agent_id": agent_id} if session_id is None else {"agent_id": agent_id, "session_id": session_id}
        removed = 0
        for row in await self.db.fetch(f'SELECT table_name FROM {self._catalogue} ORDER BY name COLLATE "C"'):
            status = await self.db.execute(
                f'DELETE FROM "{self.db.schema}"."{row["table_name"]}" WHERE metadata @> $1::jsonb',
                json.dumps(scope, ensure_ascii=False),
            )
            removed += int(status.split()[-1])
        return removed

    async def list_collections(self) -> list[str]:
        """Collection names, sorted."""
        rows = await self.db.fetch(f'SELECT name FROM {self._catalogue} ORDER BY name COLLATE "C"')
        return sorted(r["name"] for r in rows)

    async def delete_collection(self, collection: str) -> bool:
        """Remove a collection and its table; ``False`` if it did not exist."""
        self._check_collection(collection)
        self._tables.pop(collection, None)
        async with self.db.connection() as connection, connection.transaction():
            table = await connection.fetchval(
                f"DELETE FROM {self._catalogue} WHERE name = $1 RETURNING table_name", collection
            )
            if table is None:
                return False
            await connection.execute(f'DROP TABLE IF EXISTS "{self.db.schema}"."{table}"')
        return True


__all__ = ["HNSW_MAX_DIMENSIONS", "PgVectorStore", "filter_sql", "register_vector_codec"]
