"""The Postgres and AGE backends through PgBouncer in transaction pooling mode, the usual production front of
PostgreSQL: every conformance contract, with asyncpg's statement cache off (prepared statements do not follow
a client from one server connection to the next)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
from servers import Server, age_graph, closing

from ravi.capabilities.age import AGEGraphStore
from ravi.capabilities.postgres import (
    PgLongTermMemory,
    PgTaskStore,
    PgVectorStore,
    PostgresHistoryProvider,
    PostgresMemoryStore,
    PostgresSummaryStore,
)
from ravi.conformance import (
    CypherCapableContract,
    GraphStoreContract,
    HistoryProviderContract,
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    TaskStoreContract,
    VectorStoreContract,
)

BOUNCED = {"statement_cache_size": 0}


@pytest_asyncio.fixture
async def bouncer_schema(pgbouncer_server: Server) -> AsyncIterator[str]:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield schema
    connection = await asyncpg.connect(pgbouncer_server.address, statement_cache_size=0)
    try:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await connection.close()


class TestBouncedHistory(HistoryProviderContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(PostgresHistoryProvider(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(PostgresHistoryProvider(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store


class TestBouncedHistoryUncached(HistoryProviderContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(
            PostgresHistoryProvider(pgbouncer_server.address, schema=bouncer_schema, cache_sessions=0, **BOUNCED)
        ):
            yield store


class TestBouncedState(ShortTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PostgresMemoryStore]:
        async for store in closing(PostgresMemoryStore(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store


class TestBouncedVector(VectorStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PgVectorStore]:
        async for store in closing(PgVectorStore(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store


class TestBouncedLongTermMemory(LongTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PgLongTermMemory]:
        async for store in closing(PgLongTermMemory(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store


class TestBouncedTasks(TaskStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PgTaskStore]:
        async for store in closing(PgTaskStore(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store


class TestBouncedSummaries(SummaryStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PostgresSummaryStore]:
        async for store in closing(PostgresSummaryStore(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store


class TestBouncedHistorySummaries(SummaryStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, pgbouncer_server: Server, bouncer_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(PostgresHistoryProvider(pgbouncer_server.address, schema=bouncer_schema, **BOUNCED)):
            yield store


@pytest_asyncio.fixture
async def bounced_age(pgbouncer_server: Server) -> AsyncIterator[AGEGraphStore]:
    graph = f"g_{uuid.uuid4().hex[:16]}"
    async for store in age_graph(pgbouncer_server.address, graph, where="the PostgreSQL behind PgBouncer", **BOUNCED):
        yield store


class TestBouncedAGEGraph(GraphStoreContract):
    @pytest.fixture
    def backend(self, bounced_age: AGEGraphStore) -> AGEGraphStore:
        return bounced_age


class TestBouncedAGECypher(CypherCapableContract):
    @pytest.fixture
    def backend(self, bounced_age: AGEGraphStore) -> AGEGraphStore:
        return bounced_age
