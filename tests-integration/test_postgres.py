"""The Postgres backends against a real PostgreSQL server with pgvector: every contract, plus what only a
server can show (restarts, concurrent migrations, hostile strings, one-round-trip appends)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio
from servers import Server, closing

from ravi.agents.context import WindowRequest
from ravi.capabilities.postgres import (
    PgLongTermMemory,
    PgTaskStore,
    PgVectorStore,
    PostgresHistoryProvider,
    PostgresMemoryStore,
    PostgresSummaryStore,
)
from ravi.conformance import (
    HistoryProviderContract,
    HistorySearcherContract,
    HybridSearcherContract,
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    TaskStoreContract,
    VectorStoreContract,
    WindowReaderContract,
)
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, PermissionDenied
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.registry import load_backend
from ravi.kernel.search import UnitMatch
from ravi.kernel.tokens import stored_tokens


class _Provider:
    """A history provider on the test schema as the backend, and a second one on the same schema as its peer."""

    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            yield store


class TestPostgresHistory(_Provider, HistoryProviderContract):
    pass


class TestPostgresHistoryUncached(HistoryProviderContract):
    """The same contract with the read cache off: every read goes to the server."""

    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(
            PostgresHistoryProvider(postgres_server.address, schema=pg_schema, cache_sessions=0)
        ):
            yield store


class TestPostgresWindowReader(_Provider, WindowReaderContract):
    pass


class TestPostgresHistorySearcher(_Provider, HistorySearcherContract):
    pass


class TestPostgresHybridSearcher(_Provider, HybridSearcherContract):
    pass


class TestPostgresHistorySummaries(SummaryStoreContract):
    """The history provider keeps its sessions' summaries beside them, under their generations."""

    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            yield store


class TestPostgresWindowReaderUncached(WindowReaderContract):
    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(
            PostgresHistoryProvider(postgres_server.address, schema=pg_schema, cache_sessions=0)
        ):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresHistoryProvider]:
        async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            yield store


class TestPostgresState(ShortTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresMemoryStore]:
        async for store in closing(PostgresMemoryStore(postgres_server.address, schema=pg_schema)):
            yield store


class TestPgVector(VectorStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PgVectorStore]:
        async for store in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
            yield store


class TestPgVectorThroughTheIndex(VectorStoreContract):
    """The contract with every collection searched through its HNSW index, as a large one is."""

    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PgVectorStore]:
        async for store in closing(PgVectorStore(postgres_server.address, schema=pg_schema, exact_search_kb=0)):
            yield store


class TestPgLongTermMemory(LongTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PgLongTermMemory]:
        async for store in closing(PgLongTermMemory(postgres_server.address, schema=pg_schema)):
            yield store


class TestPgTasks(TaskStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PgTaskStore]:
        async for store in closing(PgTaskStore(postgres_server.address, schema=pg_schema)):
            yield store


async def test_two_providers_share_one_session(postgres_server: Server, pg_schema: str) -> None:
    """Two processes' worth of providers on one session: each sees the other's appends and clears."""
    a = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    b = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    try:
        await a.append("agent", ChatMessage.user("from a"), session_id="s")
        assert [m.text for m in await b.get_messages("agent", session_id="s")] == ["from a"]
        await b.append("agent", ChatMessage.user("from b"), session_id="s", run_id="r")
        assert [m.text for m in await a.get_messages("agent", session_id="s")] == ["from a", "from b"]
        await b.clear_run("agent", session_id="s", run_id="r")
        assert [m.text for m in await a.get_messages("agent", session_id="s")] == ["from a"]
        await b.clear("agent", session_id="s")
        assert await a.get_messages("agent", session_id="s") == []
    finally:
        await a.close()
        await b.close()


async def test_a_retried_batch_keeps_the_numbering_gap_free(postgres_server: Server, pg_schema: str) -> None:
    """A batch whose ids are partly stored (or repeated in it) is numbered on from the session's end, without
    gaps, with running totals that match the counts."""
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    try:
        first = [ChatMessage.user(f"m{i}") for i in range(6)]
        more = [ChatMessage.user(f"n{i}" * (i + 1)) for i in range(4)]
        await history.append_many("agent", first[:4], session_id="s")
        await history.append_many("agent", [first[2], first[4], more[0], first[4], first[3], first[5]], session_id="s")
        await history.append_many("agent", more, session_id="s")
        rows = await history.db.fetch(
            f"SELECT seq, tokens, cum_tokens FROM {history._messages} WHERE session_id = 's' ORDER BY seq"
        )
        assert [r["seq"] for r in rows] == list(range(10)), "sequence numbers must have no gaps or duplicates"
        running = [sum(r["tokens"] for r in rows[: i + 1]) for i in range(10)]
        assert [r["cum_tokens"] for r in rows] == running
        total = await history.db.fetchval(f"SELECT total_tokens FROM {history._sessions} WHERE session_id = 's'")
        assert total == running[-1]
        assert await history.get_messages("agent", session_id="s") == [*first[:5], more[0], first[5], *more[1:]]
    finally:
        await history.close()


async def test_concurrent_writers_from_separate_pools(postgres_server: Server, pg_schema: str) -> None:
    providers = [PostgresHistoryProvider(postgres_server.address, schema=pg_schema, max_size=2) for _ in range(5)]
    try:

        async def writer(i: int) -> None:
            p = providers[i % 5]
            for j in range(10):
                await p.append_many("agent", [ChatMessage.user(f"{i}:{j}")], session_id="s")

        await asyncio.gather(*(writer(i) for i in range(50)))
        rows = await providers[0].db.fetch(
            f"SELECT seq FROM {providers[0]._messages} WHERE session_id = 's' ORDER BY seq"
        )
        assert [r["seq"] for r in rows] == list(range(500)), "sequence numbers must have no gaps or duplicates"
        texts = [m.text for m in await providers[1].get_messages("agent", session_id="s")]
        for i in range(50):
            assert [t for t in texts if t.startswith(f"{i}:")] == [f"{i}:{j}" for j in range(10)]
    finally:
        for p in providers:
            await p.close()


async def test_migrations_are_safe_when_processes_start_together(postgres_server: Server, pg_schema: str) -> None:
    stores = [PostgresHistoryProvider(postgres_server.address, schema=pg_schema) for _ in range(6)]
    try:
        await asyncio.gather(*(s.count_messages("agent", session_id="s") for s in stores))
        applied = await stores[0].db.fetchval(f'SELECT count(*) FROM "{pg_schema}"."migrations"')
        assert applied == len(stores[0].migrations)  # each version once
    finally:
        for s in stores:
            await s.close()


async def test_a_schema_whose_migrations_table_alone_was_dropped_is_a_configuration_error_that_says_so(
    postgres_server: Server, pg_schema: str
) -> None:
    """With the ``migrations`` table dropped and the stores' tables left, every new store ran the first migration
    again and failed on the table it found (a generic error naming neither the cause nor a repair). The tables
    may be at any version, so none is guessed: the error names the record that is gone and how to repair."""
    async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await store.append("agent", ChatMessage.user("kept"), session_id="s")
        await store.db.execute(f'DROP TABLE "{pg_schema}"."migrations"')
    for _ in range(2):  # every new store, not only the first
        async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            with pytest.raises(ConfigurationError, match="no record of its migrations") as info:
                await store.count_messages("agent", session_id="s")
            message = str(info.value)
            assert f'"{pg_schema}"."migrations"' in message and "history" in message, message
            assert "drop" in (info.value.hint or "") and "restore" in (info.value.hint or "")
    connection = await asyncpg.connect(postgres_server.address)
    try:  # nothing was changed by the failed setups
        assert await connection.fetchval("SELECT to_regclass($1)", f'"{pg_schema}"."migrations"') is None
        assert await connection.fetchval(f'SELECT count(*) FROM "{pg_schema}"."messages"') == 1
    finally:
        await connection.close()


async def test_destroy_never_drops_a_schema_that_holds_more_than_ravis_tables(postgres_server: Server) -> None:
    """``destroy()`` drops the store's whole schema: with ``schema="public"`` it ran ``DROP SCHEMA public
    CASCADE``, taking every other table of the database with it. A schema that is public, Postgres's own or an
    extension's is refused, and nothing is dropped."""
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    connection = await asyncpg.connect(postgres_server.address)
    try:
        await connection.execute(f'CREATE TABLE public."{prefix}not_ravis" (x int)')
        async for store in closing(
            PostgresHistoryProvider(postgres_server.address, schema="public", table_prefix=prefix)
        ):
            await store.append("agent", ChatMessage.user("kept"), session_id="s")
            with pytest.raises(ConfigurationError, match="holds more than Ravi's tables") as info:
                await store.destroy()
            assert prefix in (info.value.hint or "")
            assert await store.count_messages("agent", session_id="s") == 1
        assert await connection.fetchval("SELECT to_regclass($1)", f'public."{prefix}not_ravis"') is not None
    finally:
        tables = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1", f"{prefix}%"
        )
        for row in tables:
            await connection.execute(f'DROP TABLE IF EXISTS public."{row["tablename"]}" CASCADE')
        await connection.close()


@pytest.mark.parametrize("cached", [True, False])
async def test_a_schema_another_process_dropped_is_made_again_by_the_next_call(
    postgres_server: Server, pg_schema: str, cached: bool
) -> None:
    """Another process drops the store's schema (``destroy()``, ``DROP SCHEMA``) while the store runs: every later
    call failed with a generic ``RaviError`` (UndefinedTable) until the process restarted. The call that meets the
    missing table is ``BackendUnavailable``, and the next one sets the store up again."""
    options = {} if cached else {"cache_sessions": 0}
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema, **options)
    other = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    try:
        await history.append("agent", ChatMessage.user("before"), session_id="s")
        await other.destroy()
        with pytest.raises(BackendUnavailable, match="dropped"):
            await history.append("agent", ChatMessage.user("lost with the schema"), session_id="s")
        await history.append("agent", ChatMessage.user("after"), session_id="s")
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["after"]
        await history.destroy()  # its own: the next call sets it up again, without an error first
        await history.append("agent", ChatMessage.user("again"), session_id="s")
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["again"]
    finally:
        await history.close()
        await other.close()


async def test_a_store_set_up_while_another_session_creates_its_extension_retries(
    postgres_server: Server, pg_schema: str
) -> None:
    """The race a schema's advisory lock cannot cover, made to happen every time: another session creates
    ``vector`` in a transaction left open, the store's setup runs its ``CREATE EXTENSION IF NOT EXISTS`` and waits
    on that session's catalog row, and the other session commits. The server then refuses the store's creation with
    a unique violation; the store sets up again and finds the extension made."""
    import asyncpg

    database = f"raced_{uuid.uuid4().hex[:12]}"
    parts = urlsplit(postgres_server.address)
    dsn = urlunsplit(parts._replace(path=f"/{database}"))
    admin = await asyncpg.connect(postgres_server.address, timeout=10)
    await admin.execute(f'CREATE DATABASE "{database}"')
    other = await asyncpg.connect(dsn, timeout=10)
    store = PgVectorStore(dsn, schema=pg_schema)
    try:
        creating = other.transaction()
        await creating.start()
        await other.execute("CREATE EXTENSION IF NOT EXISTS vector")
        setting_up = asyncio.create_task(store.list_collections())
        waits = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'"
        # until the store's setup waits on the uncommitted extension (or finished): each look is a round trip,
        # during which the setup task goes on
        for _ in range(100_000):
            if setting_up.done() or await admin.fetchval(waits, database):
                break
        assert not setting_up.done(), "the setup did not wait on the other session's uncommitted extension"
        assert await admin.fetchval(waits, database) == 1
        await creating.commit()
        assert await setting_up == []  # set up again after the refusal, not failed
        assert await store.db.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == 1
    finally:
        await store.close()
        await other.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()


async def test_a_restart_surfaces_backend_unavailable_then_recovers(postgres_server: Server, pg_schema: str) -> None:
    if postgres_server.process is None:
        pytest.skip(f"the server comes from {postgres_server.origin}; only a harness-started one can be restarted")
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema, cache_sessions=0)
    try:
        await history.append("agent", ChatMessage.user("before"), session_id="s")
        postgres_server.stop()
        try:
            with pytest.raises(BackendUnavailable):
                await history.append("agent", ChatMessage.user("during"), session_id="s")
            with pytest.raises(BackendUnavailable):
                await history.get_messages("agent", session_id="s")
        finally:
            postgres_server.start()
        await history.append("agent", ChatMessage.user("after"), session_id="s")
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["before", "after"]
    finally:
        await history.close()


async def test_unreachable_server_is_backend_unavailable() -> None:
    history = PostgresHistoryProvider("postgresql://postgres@127.0.0.1:1/postgres")
    with pytest.raises(BackendUnavailable):
        await history.count_messages("agent", session_id="s")


async def test_a_role_the_server_refuses_says_what_to_check(postgres_server: Server) -> None:
    """A DSN whose user the server refuses gave ``PermissionDenied`` naming only the server's words ("role
    \"nobody\" does not exist"); its hint names the DSN's user and password."""
    parts = urlsplit(postgres_server.address)
    dsn = urlunsplit(parts._replace(netloc=f"nobody@{parts.hostname}:{parts.port}"))
    history = PostgresHistoryProvider(dsn)
    try:
        with pytest.raises(PermissionDenied) as raised:
            await history.count_messages("agent", session_id="s")
        assert raised.value.hint is not None and "user and password" in raised.value.hint
    finally:
        await history.close()


async def test_sslmode_require_on_a_server_without_ssl_is_a_configuration_error(postgres_server: Server) -> None:
    """``sslmode=require`` against a server that does not speak SSL was ``BackendUnavailable`` ("unreachable")
    with the hint to check the host and port, which are right; it is a ``ConfigurationError`` naming sslmode."""
    separator = "&" if "?" in postgres_server.address else "?"
    history = PostgresHistoryProvider(f"{postgres_server.address}{separator}sslmode=require")
    try:
        with pytest.raises(ConfigurationError, match="SSL") as raised:
            await history.count_messages("agent", session_id="s")
        assert raised.value.hint is not None and "sslmode" in raised.value.hint
    finally:
        await history.close()


async def test_a_read_only_server_says_to_name_the_primary(postgres_server: Server, pg_schema: str) -> None:
    """A DSN naming a server that takes no writes (a hot standby, or ``default_transaction_read_only``) failed
    with a bare ``RaviError`` naming asyncpg's ``ReadOnlySQLTransactionError``; it is ``BackendUnavailable`` whose
    hint says to point the DSN at the primary."""
    writer = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    separator = "&" if "?" in postgres_server.address else "?"
    reader = PostgresHistoryProvider(
        f"{postgres_server.address}{separator}default_transaction_read_only=on", schema=pg_schema
    )
    try:
        await writer.append("agent", ChatMessage.user("kept"), session_id="s")  # the schema is set up
        with pytest.raises(BackendUnavailable, match="read-only") as raised:
            await reader.append("agent", ChatMessage.user("refused"), session_id="s")
        assert raised.value.hint is not None and "primary" in raised.value.hint
        assert [m.text for m in await writer.get_messages("agent", session_id="s")] == ["kept"]
    finally:
        await writer.close()
        await reader.close()


async def test_an_address_that_never_answers_is_a_connect_timeout_not_a_slow_statement() -> None:
    """A DSN naming a port where another service listens and never answers Postgres (a Redis port, say) waited
    ``connect_timeout`` and then said "the statement ran past command_timeout" with the hint to look for locks or
    slow queries; it is ``BackendUnavailable`` naming ``connect_timeout`` and the host and port in the DSN."""
    import socket

    silent = socket.create_server(("127.0.0.1", 0))  # the kernel completes connections; nothing ever answers
    port = silent.getsockname()[1]
    history = PostgresHistoryProvider(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=0.5)
    try:
        with pytest.raises(BackendUnavailable, match="connect_timeout") as raised:
            await history.count_messages("agent", session_id="s")
        assert "command_timeout" not in str(raised.value)
        assert raised.value.hint is not None and "host and port" in raised.value.hint
    finally:
        await history.close()
        silent.close()


@pytest.mark.parametrize("value", ["nul\x00inside", "x" * 300_000])
async def test_hostile_ids_are_stored_exactly_or_refused(postgres_server: Server, pg_schema: str, value: str) -> None:
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    state = PostgresMemoryStore(postgres_server.address, schema=pg_schema)
    try:
        await history.append("agent", ChatMessage.user("kept"), session_id="s")
        for call in (
            lambda: history.append(value, ChatMessage.user("x"), session_id="s"),
            lambda: history.append("agent", ChatMessage.user("x"), session_id=value),
            lambda: history.append("agent", ChatMessage.user("x"), session_id="s", run_id=value),
        ):
            try:
                await call()
            except InvalidArgument:
                continue
        got = [m.text for m in await history.get_messages("agent", session_id="s")]
        assert got[0] == "kept"
        try:
            await state.set_state("s", {"text": value})
        except InvalidArgument:
            assert await state.get_state("s") == {}
        else:
            assert await state.get_state("s") == {"text": value}
    finally:
        await history.close()
        await state.close()


def test_identifiers_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="schema"):
        PostgresHistoryProvider("postgresql://localhost/db", schema='x"; DROP TABLE y; --')
    with pytest.raises(ConfigurationError, match="table_prefix"):
        PgTaskStore("postgresql://localhost/db", table_prefix="Bad-Prefix")
    with pytest.raises(ConfigurationError, match="DSN"):
        PostgresMemoryStore("mysql://localhost/db")


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u@127.0.0.1:99999/db",
        "postgresql://u@127.0.0.1:port/db",
        "postgresql://u@[::1/db",
        "postgresql://u@127.0.0.1:1/db?sslmode=sometimes",
    ],
)
async def test_a_dsn_asyncpg_cannot_read_is_a_configuration_error(dsn: str) -> None:
    """A DSN asyncpg cannot read fails the first call as a ``ConfigurationError``: a port past 65535 or not a
    number, or a broken IPv6 address, raised a bare ``OverflowError`` or ``ValueError``, and an unknown
    ``sslmode`` was taken for a busy server (``BackendUnavailable``)."""
    state = PostgresMemoryStore(dsn, connect_timeout=2)
    try:
        with pytest.raises(ConfigurationError, match="DSN"):
            await state.get_state("s")
    finally:
        await state.close()


async def test_registered_under_postgres(postgres_server: Server, pg_schema: str) -> None:
    for kind, cls in [
        ("history", PostgresHistoryProvider),
        ("state", PostgresMemoryStore),
        ("vector", PgVectorStore),
        ("longterm", PgLongTermMemory),
        ("tasks", PgTaskStore),
    ]:
        store = load_backend(kind, "postgres", dsn=postgres_server.address, schema=pg_schema)
        assert isinstance(store, cls)
        await store.close()


async def test_table_prefixes_let_apps_share_a_schema(postgres_server: Server, pg_schema: str) -> None:
    one = PostgresHistoryProvider(postgres_server.address, schema=pg_schema, table_prefix="app1_")
    two = PostgresHistoryProvider(postgres_server.address, schema=pg_schema, table_prefix="app2_")
    try:
        await one.append("agent", ChatMessage.user("one"), session_id="s")
        assert await two.count_messages("agent", session_id="s") == 0
    finally:
        await one.close()
        await two.close()


async def test_no_table_prefix_names_another_apps_tables(postgres_server: Server, pg_schema: str) -> None:
    """Apps share a schema by table prefix, so no prefix may make one of Ravi's names another app's: with the
    prefix "session_", the summaries table was "session_summaries", the unprefixed app's table of the history's
    summaries. Every name the stores create is read from the server, and each prefix that would give one of them
    to another app is refused."""
    import asyncpg

    stores = [
        PostgresHistoryProvider(postgres_server.address, schema=pg_schema),
        PostgresSummaryStore(postgres_server.address, schema=pg_schema),
        PostgresMemoryStore(postgres_server.address, schema=pg_schema),
        PgVectorStore(postgres_server.address, schema=pg_schema),
        PgLongTermMemory(postgres_server.address, schema=pg_schema),
        PgTaskStore(postgres_server.address, schema=pg_schema),
    ]
    for store in stores:
        async with store:  # entering opens the pool and migrates the store's tables
            pass
    connection = await asyncpg.connect(postgres_server.address)
    try:
        relations = {
            r["relname"]
            for r in await connection.fetch(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
                pg_schema,
            )
        }
        functions = {
            r["proname"]
            for r in await connection.fetch(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1",
                pg_schema,
            )
        }
    finally:
        await connection.close()
    assert "session_summaries" in relations and "summaries" in relations
    overlaps = {
        longer[: -len(shorter)]
        for names in (relations, functions)
        for longer in names
        for shorter in names
        if longer != shorter and longer.endswith(shorter)
    }
    assert "session_" in overlaps, overlaps
    for prefix in sorted(overlaps):
        for extra in ("", "app_"):  # another app's prefix ending with it takes the same names
            with pytest.raises(ConfigurationError, match="table_prefix"):
                PostgresHistoryProvider(postgres_server.address, schema=pg_schema, table_prefix=extra + prefix)


class TestPostgresSummaries(SummaryStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, postgres_server: Server, pg_schema: str) -> AsyncIterator[PostgresSummaryStore]:
        async for store in closing(PostgresSummaryStore(postgres_server.address, schema=pg_schema)):
            yield store


@pytest.mark.parametrize("beside", [False, True], ids=["summary store", "history provider"])
async def test_a_span_is_summarised_once_across_processes(
    postgres_server: Server, pg_schema: str, beside: bool
) -> None:
    """Two processes' summarisers sharing the Postgres summaries (a summary store of their own, or the history
    provider's): the second reads, it does not call."""

    from ravi.agents.context import SummarizationCompaction
    from ravi.kernel.agent.context import SessionContext

    calls: list[int] = []

    class CountingLLM:
        async def complete(self, messages: Sequence[ChatMessage], **kwargs: object) -> str:
            calls.append(1)
            return "the user asked about invoices"

    history = [ChatMessage.user(f"question {i} " + "q" * 300) for i in range(12)]
    kind = PostgresHistoryProvider if beside else PostgresSummaryStore
    stores = [kind(postgres_server.address, schema=pg_schema) for _ in range(2)]
    try:
        generation = None
        if isinstance(stores[0], PostgresHistoryProvider):
            await stores[0].append_many("a", history, session_id="s")
            generation = await stores[0].generation("a", session_id="s")
        first, second = (
            SummarizationCompaction(CountingLLM(), recent_token_budget=200, min_old_tokens=10, store=s) for s in stores
        )
        one = await first.compact(history, SessionContext("a", "s", generation=generation))
        two = await second.compact(history, SessionContext("a", "s", generation=generation))
        assert one == two
        assert len(calls) == 1
        assert history == [
            ChatMessage.user(f"question {i} " + "q" * 300, id=m.id, created_at=m.created_at)
            for i, m in enumerate(history)
        ]  # the transcript is untouched
    finally:
        for s in stores:
            await s.close()


async def test_relevant_recall_with_the_sessions_pgvector_store(postgres_server: Server, pg_schema: str) -> None:
    from ravi.agents.context import RelevantRecallStrategy
    from ravi.agents.context.recall_index import EmbeddingIndex
    from ravi.agents.storage import HashingEmbeddingClient

    store = PgVectorStore(postgres_server.address, schema=pg_schema)
    try:
        strategy = RelevantRecallStrategy(600, index=EmbeddingIndex(HashingEmbeddingClient(), store))
        history = [ChatMessage.user("My locker code is QUARTZ-4411.")]
        history += [ChatMessage.user(f"filler turn {i} " + "w" * 300) for i in range(20)]
        history.append(ChatMessage.user("What is my locker code?"))
        window = await strategy.compact(history)
        assert history[0] in window and history[1] not in window
        assert len(await store.list_collections()) == 1  # the session's vectors live in Postgres
    finally:
        await store.close()


async def test_a_bad_statement_is_the_callers_error(postgres_server: Server, pg_schema: str) -> None:
    """A statement Postgres cannot take (a NUL in its text) is InvalidArgument, and the other connections of
    the pool, busy or idle, carry on."""
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema, min_size=2, max_size=4)
    try:
        await history.append("agent", ChatMessage.user("kept"), session_id="s")
        async with history.db.connection() as held:
            with pytest.raises(InvalidArgument):
                await history.db.fetchval("SELECT 'a\x00b'")
            assert await held.fetchval("SELECT 'still here'") == "still here"
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["kept"]
    finally:
        await history.close()


async def test_a_timeout_fails_that_call_only(postgres_server: Server, pg_schema: str) -> None:
    """A statement past ``command_timeout`` fails alone: the pool and its other connections carry on."""
    history = PostgresHistoryProvider(
        postgres_server.address, schema=pg_schema, min_size=2, max_size=4, command_timeout=0.5
    )
    try:
        await history.append("agent", ChatMessage.user("kept"), session_id="s")
        async with history.db.connection() as held:
            with pytest.raises(BackendUnavailable, match="timed out"):
                await history.db.fetchval("SELECT pg_sleep(5)")
            assert await held.fetchval("SELECT 'still here'") == "still here"
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["kept"]
    finally:
        await history.close()


async def test_local_postgres_offers_a_durable_mode() -> None:
    """The throwaway server trades durability for speed by default; ``durable=True`` keeps crash safety."""
    import asyncpg

    from ravi.capabilities.postgres.local import LocalPostgres

    try:
        server = LocalPostgres(durable=True)
        server.start()
    except (ConfigurationError, RuntimeError, OSError) as error:
        pytest.skip(f"no local PostgreSQL could be started: {error}")
    try:
        connection = await asyncpg.connect(server.dsn)
        try:
            settings = [await connection.fetchval(f"SHOW {name}") for name in ("fsync", "synchronous_commit")]
        finally:
            await connection.close()
        assert settings == ["on", "on"]
    finally:
        server.stop()


async def test_stores_on_one_server_share_one_pool_which_closes_with_the_last(
    postgres_server: Server, pg_schema: str
) -> None:
    """Stores built with the same DSN and options use one pool, not one each; it closes once, with the last."""
    dsn = postgres_server.address
    history = PostgresHistoryProvider(dsn, schema=pg_schema)
    state = PostgresMemoryStore(dsn, schema=pg_schema)
    tasks = PgTaskStore(dsn, schema=pg_schema)
    async with history, state, tasks:
        await history.append("agent", ChatMessage.user("hi"), session_id="s")
        await state.set_state("s", {"k": 1})
        await tasks.create_task_list("c", "agent", ["one"])
        pools = {await store.db.pool() for store in (history, state, tasks)}
        assert len(pools) == 1
        [pool] = pools
        await history.aclose()
        assert not pool.is_closing()
        assert await state.get_state("s") == {"k": 1}  # the others keep working
        await history.aclose()  # closing twice is harmless
    assert pool.is_closing()


async def test_closing_the_reserved_place_leaves_its_store_connected(postgres_server: Server, pg_schema: str) -> None:
    """``reserved()`` is a view over the store's pool: closing the view (``async with``, ``aclose``) lets go of
    nothing, so calls of the store under way are not cut off; closing the store still closes the pool. Closing
    the view closed the store's pool, and the store's calls waiting for a connection failed with "pool is
    closing"."""
    state = PostgresMemoryStore(postgres_server.address, schema=pg_schema)
    async with state:
        await state.set_state("s", {"k": 1})
        pool = await state.db.pool()
        async with state.reserved() as reserved:
            await reserved.set_state("r", {"own": 1})
        await reserved.aclose()
        assert not pool.is_closing()
        assert await state.db.pool() is pool
        assert await state.get_state("s") == {"k": 1}
        assert await reserved.get_state("r") == {"own": 1}  # the view keeps working while its store is open
    assert pool.is_closing()


def test_a_store_works_from_a_second_event_loop(postgres_server: Server, pg_schema: str) -> None:
    """An asyncpg pool belongs to one event loop; a store used from another loop gets a pool of its own there
    (it used to fail with a misleading BackendUnavailable)."""
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

    async def append_and_count(text: str) -> int:
        await history.append("agent", ChatMessage.user(text), session_id="s")
        return await history.count_messages("agent", session_id="s")

    try:
        assert asyncio.run(append_and_count("first loop")) == 1
        assert asyncio.run(append_and_count("second loop")) == 2
    finally:
        asyncio.run(history.aclose())


async def test_sessions_written_before_counts_were_kept_are_counted_on_their_first_windowed_read(
    postgres_server: Server, pg_schema: str
) -> None:
    """A schema at version 1 (no counts) with a session in it: the next provider migrates it, and the first
    windowed read of the session stores its counts, so the reads after it are windowed."""
    from ravi.capabilities.postgres import history as module
    from ravi.kernel.storage import window_of

    class Version1(PostgresHistoryProvider):
        migrations = module.MIGRATIONS[:1]

        async def append_many(self, agent_id, messages, *, session_id, run_id=""):  # type: ignore[no-untyped-def]
            await self.db.fetchval(
                f"SELECT {self._append}($1, $2, $3, $4, $5)",
                agent_id,
                session_id,
                run_id,
                [m.id for m in messages],
                [m.model_dump_json() for m in messages],
            )

    messages = [ChatMessage.system("rules")] + [ChatMessage.user(f"turn {i} " + "x" * 80) for i in range(40)]
    async for old in closing(Version1(postgres_server.address, schema=pg_schema)):
        await old.append_many("a", messages, session_id="s")
    async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        assert await store.get_messages("a", session_id="s") == messages
        first = await store.read_window("a", session_id="s", tokens=100)
        generation = await store.generation("a", session_id="s")
        assert first == window_of(messages, 100, generation)
        total = await store.db.fetchval(
            f"SELECT total_tokens FROM {store.db.table('sessions')} WHERE agent_id = 'a' AND session_id = 's'"
        )
        assert total == sum(stored_tokens(m) for m in messages)
        more = ChatMessage.user("new")
        await store.append("a", more, session_id="s")
        assert await store.read_window("a", session_id="s", tokens=100) == window_of([*messages, more], 100, generation)


async def test_a_session_written_at_version_8_keeps_its_ids_and_runs_once_the_indexes_are_keyed_by_arrays(
    postgres_server: Server, pg_schema: str
) -> None:
    """Version 9 rebuilds the run index and the unique message ids over the rows already stored: a retried
    message is still skipped, a different message under a held id still refused with nothing stored, the same id
    in another session still accepted, clear_run still removes exactly its run's messages, and a session searched
    before is still found."""
    from ravi.capabilities.postgres import history as module
    from ravi.kernel.errors import MessageConflict

    class Version8(PostgresHistoryProvider):
        migrations = module.MIGRATIONS[:8]

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # the statements as version 8 had them, without the terms' count (version 11)
            self._index_query = self._index_query.replace(", term_count = length(u.terms::tsvector)", "")
            self._search_query = self._search_query.replace(
                "coalesce(x.term_count, length(x.terms))", "length(x.terms)"
            ).replace("m.term_count, ", "")

    early = [ChatMessage.user(f"early {i}") for i in range(5)]
    run = [ChatMessage.assistant(f"run {i} about the harbour") for i in range(3)]
    async for old in closing(Version8(postgres_server.address, schema=pg_schema)):
        await old.append_many("a", early, session_id="s")
        await old.append_many("a", run, session_id="s", run_id="r1")
        assert [u.messages for u in await old.search_units("a", session_id="s", query="harbour", before=10**9, limit=5)]
    async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        assert await store.count_messages("a", session_id="s") == len(early) + len(run)  # migrated
        keyed = await store.db.fetch("SELECT indexdef FROM pg_indexes WHERE schemaname = $1", pg_schema)
        assert sum("ARRAY[agent_id, session_id, message_id]" in r["indexdef"] for r in keyed) == 1
        assert sum("ARRAY[agent_id, session_id, run_id]" in r["indexdef"] for r in keyed) == 1
        late = ChatMessage.user("late")
        await store.append_many("a", [early[-1], run[0], late], session_id="s")
        assert await store.get_messages("a", session_id="s") == [*early, *run, late]
        found = await store.search_units("a", session_id="s", query="harbour", before=10**9, limit=5)
        assert sorted(u.messages[0].id for u in found) == sorted(m.id for m in run)
        with pytest.raises(MessageConflict):
            await store.append_many("a", [ChatMessage.user("other", id=early[0].id)], session_id="s")
        await store.append_many("a", [early[0]], session_id="t")
        assert await store.get_messages("a", session_id="t") == [early[0]]
        assert await store.clear_run("a", session_id="s", run_id="r1") == 3
        assert await store.get_messages("a", session_id="s") == [*early, late]
        window = await store.read_window("a", session_id="s", tokens=10**6)
        assert window.messages == [*early, late] and window.complete


async def test_rows_indexed_before_version_11_rank_the_same_as_those_with_their_terms_counted(
    postgres_server: Server, pg_schema: str
) -> None:
    """Version 11 keeps each indexed message's number of terms beside its terms, and the search reads it instead
    of the terms. Rows indexed before it have none (a schema of version 10 migrated; made here by emptying the
    column): the search counts their terms, so the ranking is the same, and rows indexed after it have their
    count."""
    from ravi.capabilities.postgres import history as module

    class Version10(PostgresHistoryProvider):
        migrations = module.MIGRATIONS[:10]

    def ranked(units: list[UnitMatch]) -> list[tuple[float, list[str]]]:
        return [(u.score, [m.id for m in u.messages]) for u in units]

    early = [ChatMessage.user(f"harbour crane {i} " + "tide " * (i % 7) + f"word{i} " * (i % 5)) for i in range(30)]
    async for old in closing(Version10(postgres_server.address, schema=pg_schema)):
        await old.append_many("a", early, session_id="s")
    async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        query = "harbour tide crane"
        counted = await store.search_units("a", session_id="s", query=query, before=10**9, limit=10)
        m = store.db.table("messages")
        counts = await store.db.fetch(f"SELECT term_count, length(terms) AS n FROM {m} WHERE terms IS NOT NULL")
        assert len(counts) == len(early) and all(r["term_count"] == r["n"] for r in counts)
        await store.db.execute(f"UPDATE {m} SET term_count = NULL")  # as rows indexed before version 11
        assert ranked(await store.search_units("a", session_id="s", query=query, before=10**9, limit=10)) == ranked(
            counted
        )
        late = [ChatMessage.user(f"harbour crane late {i} " + "tide " * i) for i in range(5)]
        await store.append_many("a", late, session_id="s")
        mixed = await store.search_units("a", session_id="s", query=query, before=10**9, limit=40)
        assert {m.id for u in mixed for m in u.messages} == {m.id for m in [*early, *late]}
        counts = await store.db.fetch(f"SELECT term_count, length(terms) AS n FROM {m} WHERE term_count IS NOT NULL")
        assert len(counts) == len(late) and all(r["term_count"] == r["n"] for r in counts)


_OLD_SCORING = """hits AS MATERIALIZED (SELECT x.seq, x.role, x.cum_tokens - x.tokens AS at,
                             x.terms || ''::tsvector AS terms FROM (
             SELECT m.agent_id, m.session_id, m.seq, m.role, m.terms, m.cum_tokens, m.tokens FROM {m} m
             WHERE m.terms @@ (SELECT string_agg(t.query, ' | ')::tsquery FROM unnest($3::text[]) AS t(query))
             OFFSET 0) x
         WHERE x.agent_id = $1 AND x.session_id = $2 AND x.role <> 'system' AND x.cum_tokens - x.tokens < $5),
average AS MATERIALIZED (SELECT greatest(avg(length(terms)), 1) AS len FROM hits),
top AS MATERIALIZED (SELECT h.seq, h.role, h.at, (SELECT sum(q.idf) FROM q WHERE h.terms @@ q.query) * 2.2
                            / (1 + 1.2 * (0.25 + 0.75 * length(h.terms) / a.len)) AS score
         FROM hits h, average a ORDER BY score DESC, h.seq DESC LIMIT $6::integer * 2),"""


async def test_a_unit_that_before_cuts_is_not_found(postgres_server: Server, pg_schema: str) -> None:
    """``search_units`` finds the units wholly before offset ``before``, as the in-memory store does: a tool call
    before it whose result lies after it was returned whole, result included."""
    from ravi.agents.context import InMemoryHistoryProvider

    call = ToolCallBlock(id="c1", name="lookup_harbour", arguments={"q": "harbour"})
    messages = [
        ChatMessage.user("where is the harbour crane"),
        ChatMessage.assistant(tool_calls=[call]),
        ChatMessage.tool("c1", "the harbour crane stands on pier nine"),
        ChatMessage.user("thanks"),
    ]
    inside = stored_tokens(messages[0]) + stored_tokens(messages[1])  # the result's offset: the cut splits the unit
    memory = InMemoryHistoryProvider()
    await memory.append_many("a", messages, session_id="s")
    async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await store.append_many("a", messages, session_id="s")
        for before in (inside, inside + 1, 10**9):
            found = await store.search_units("a", session_id="s", query="harbour crane", before=before, limit=10)
            alone = await memory.search_units("a", session_id="s", query="harbour crane", before=before, limit=10)
            assert [(u.offset, [m.id for m in u.messages]) for u in found] == [
                (u.offset, [m.id for m in u.messages]) for u in alone
            ], before
        cut = await store.search_units("a", session_id="s", query="harbour crane", before=inside, limit=10)
        assert [u.messages[0].id for u in cut] == [messages[0].id]


def test_the_search_ranks_as_it_did_before_version_11_whatever_the_session(
    postgres_server: Server, pg_schema: str
) -> None:
    """The search of version 11 (one index scan per term, each message's length from term_count) against the
    statement it replaced (each matched message's terms read), on generated sessions of repeated terms, tool calls
    and results, system messages, empty and unicode texts, a term most messages hold, ``before`` cutting units and
    limits down to 1, rows with and without term_count mixed, and a second agent with the same session id and
    words: the same units, scores and order every time. The units found are those the in-memory store finds (its
    scores differ: it counts a term as often as a message holds it)."""
    import re

    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    from ravi.agents.context import InMemoryHistoryProvider

    class Before11(PostgresHistoryProvider):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            m = self._messages
            self._search_query = re.sub(
                r"hits AS MATERIALIZED .*?LIMIT \$6::integer \* 2\),",
                lambda _: _OLD_SCORING.format(m=m),
                self._search_query,
                flags=re.S,
            )
            assert "string_agg" in self._search_query

    vocabulary = ["fern", "moss", "walrus", "Straße", "東京", "lunch", "fern fern fern", "common", "ÉCOLE", ""]
    words = st.lists(st.sampled_from(vocabulary), min_size=0, max_size=5)
    kinds = st.sampled_from(["user", "user", "assistant", "call", "tool", "system", "empty"])
    queries = st.lists(st.sampled_from(["fern", "moss", "walrus", "straße", "東京", "lunch", "common", "école"]),
                       min_size=1, max_size=5)  # fmt: skip

    def made(kind: str, text: str, i: int) -> ChatMessage:
        text = f"{text} common"
        if kind == "call":
            return ChatMessage(
                role="assistant", content=[ToolCallBlock(id=f"c{i}", name="look", arguments={"q": text})]
            )
        if kind == "tool":
            return ChatMessage.tool(f"c{i - 1}", text)
        if kind == "empty":
            return ChatMessage.user("")
        return {"user": ChatMessage.user, "assistant": ChatMessage.assistant, "system": ChatMessage.system}[kind](text)

    def ranked(units: list[UnitMatch]) -> list[tuple[float, int, list[str], str | None]]:
        return [(u.score, u.offset, [m.id for m in u.messages], u.after_system) for u in units]

    async def check(
        new: PostgresHistoryProvider,
        old: PostgresHistoryProvider,
        turns: list[tuple[str, list[str]]],
        searches: list[tuple[list[str], int, int]],
        uncounted: list[bool],
    ) -> None:
        session = uuid.uuid4().hex
        messages = [made(kind, " ".join(text), i) for i, (kind, text) in enumerate(turns)]
        memory = InMemoryHistoryProvider()
        await memory.append_many("a", messages, session_id=session)
        await new.append_many("a", messages, session_id=session)
        total = sum(map(stored_tokens, messages))
        for terms, cut, limit in searches:
            query, before = " ".join(terms), total * cut // 4
            got = await new.search_units("a", session_id=session, query=query, before=before, limit=limit)
            assert ranked(got) == ranked(
                await old.search_units("a", session_id=session, query=query, before=before, limit=limit)
            )
            everything = await new.search_units("a", session_id=session, query=query, before=before, limit=10**6)
            assert [u.messages for u in everything[: len(got)]] == [u.messages for u in got]
            alone = await memory.search_units("a", session_id=session, query=query, before=before, limit=10**6)
            assert sorted(u.offset for u in everything) == sorted(u.offset for u in alone)  # a unit ``before`` cuts:
            # in neither (Postgres returned it)
        m = new.db.table("messages")
        seqs = await new.db.fetch(f"SELECT seq FROM {m} WHERE agent_id = 'a' AND session_id = $1", session)
        forgotten = [r["seq"] for r, drop in zip(seqs, uncounted * len(seqs), strict=False) if drop]
        await new.db.execute(  # as rows indexed before version 11
            f"UPDATE {m} SET term_count = NULL WHERE agent_id = 'a' AND session_id = $1 AND seq = ANY($2)",
            session,
            forgotten,
        )
        await new.append_many("b", messages, session_id=session)  # another tenant, the same session and words
        for terms, cut, limit in searches:
            query, before = " ".join(terms), total * cut // 4
            assert ranked(
                await new.search_units("a", session_id=session, query=query, before=before, limit=limit)
            ) == ranked(await old.search_units("a", session_id=session, query=query, before=before, limit=limit))

    with asyncio.Runner() as runner:
        new = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
        old = Before11(postgres_server.address, schema=pg_schema)

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @example(  # two messages holding the same terms: their idfs were added in the order the plan met them
            turns=[("user", [])] * 8
            + [("user", ["fern"]), ("user", ["fern", "moss", "walrus"]), ("user", ["moss"])]
            + [("user", ["fern", "moss"])] * 2,
            searches=[(["fern", "moss", "walrus"], 4, 1)],
            uncounted=[False],
        )
        @given(
            turns=st.lists(st.tuples(kinds, words), min_size=1, max_size=40),
            searches=st.lists(st.tuples(queries, st.integers(0, 5), st.integers(1, 6)), min_size=1, max_size=3),
            uncounted=st.lists(st.booleans(), min_size=1, max_size=5),
        )
        def sessions(
            turns: list[tuple[str, list[str]]], searches: list[tuple[list[str], int, int]], uncounted: list[bool]
        ) -> None:
            runner.run(check(new, old, turns, searches, uncounted))

        try:
            sessions()
        finally:
            runner.run(new.close())
            runner.run(old.close())


def test_pgvector_finds_what_the_in_memory_store_finds_when_scores_tie_exactly_or_lie_apart(
    postgres_server: Server, pg_schema: str
) -> None:
    """Searches of generated collections, with copies of a few embeddings and limits that cut through the copies:
    pgvector (searching exactly, as a small collection is) returns the documents, in the order, that the
    in-memory store returns. Equal embeddings score alike on both, and come in id order; a ``LIMIT`` cutting
    through them kept any of them on Postgres. Scores within float32's rounding of each other are left out:
    pgvector sums in float32 and the in-memory store scores in float64, so each may order such near-ties its own
    way (decision 106)."""
    import itertools
    import math

    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st

    from ravi.agents.storage import InMemoryVectorStore
    from ravi.kernel.storage import Document

    vectors = st.lists(st.integers(-3, 3), min_size=4, max_size=4).filter(any)

    def cosine(v: list[int], q: list[int]) -> float:
        return sum(a * b for a, b in zip(v, q, strict=True)) / math.sqrt(sum(a * a for a in v) * sum(b * b for b in q))

    async def check(pool: list[list[int]], picks: list[int], query: list[int], limit: int) -> None:
        scores = sorted(cosine(v, query) for v in pool)
        assume(all(b - a > 1e-6 for a, b in itertools.pairwise(scores)))
        documents = [Document(id=f"d{i:02d}", embedding=pool[p % len(pool)]) for i, p in enumerate(picks)]
        collection = f"c{uuid.uuid4().hex[:12]}"
        await server.add(documents, collection=collection)
        memory = InMemoryVectorStore()
        await memory.add(documents, collection=collection)
        found = await server.search(query, collection=collection, limit=limit)
        expected = await memory.search(query, collection=collection, limit=limit)
        assert [r.id for r in found] == [r.id for r in expected]

    with asyncio.Runner() as runner:
        server = PgVectorStore(postgres_server.address, schema=pg_schema)

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            pool=st.lists(vectors, min_size=1, max_size=5, unique_by=tuple),
            picks=st.lists(st.integers(0, 4), min_size=1, max_size=24),
            query=vectors,
            limit=st.integers(1, 25),
        )
        def collections(pool: list[list[int]], picks: list[int], query: list[int], limit: int) -> None:
            runner.run(check(pool, picks, query, limit))

        try:
            collections()
        finally:
            runner.run(server.close())


async def test_the_engine_reads_only_the_window_from_postgres(postgres_server: Server, pg_schema: str) -> None:
    """Through ``AgentContext``: the window of a long session equals the window of its whole transcript, and
    the rows read are about the window, not the session."""
    from ravi.agents.context import AgentContext, ContextConfig, TokenBudgetComposedStrategy

    async for store in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        messages = [ChatMessage.system("rules")] + [ChatMessage.user(f"turn {i} " + "x" * 40) for i in range(3_000)]
        for i in range(0, len(messages), 500):
            await store.append_many("a", messages[i : i + 500], session_id="s")
        pipeline = [TokenBudgetComposedStrategy([], token_budget=600)]
        context = AgentContext(ContextConfig(history=store, pipeline=pipeline), agent_id="a")
        window = await context.get_prompt_window("s")
        from ravi.agents.context import CompactionPipeline

        assert window == await CompactionPipeline(pipeline).compact(messages)
        cached = store._windows[("a", "s")]  # what the provider kept: the window it read, not the session
        assert len(window) <= len(cached.messages) < 3 * len(window)


async def test_collections_made_before_content_blocks_are_migrated(postgres_server: Server, pg_schema: str) -> None:
    """A collection table from schema version 1 (text content only): the next store adds the ``blocks`` column,
    reads the old documents as one text block each, and stores blocks in the same table."""
    from ravi.capabilities.postgres import vector as module
    from ravi.kernel.messages import ImageBlock, TextBlock
    from ravi.kernel.storage import Document

    class Version1(PgVectorStore):
        migrations = module.MIGRATIONS[:1]

    async for old in closing(Version1(postgres_server.address, schema=pg_schema)):
        await old.add([Document(id="old", content="written long ago", embedding=(1.0, 0.0))], collection="c")
        table, _ = old._tables["c"]
        await old.db.execute(f"ALTER TABLE {table} DROP COLUMN blocks")  # as version 1 made it
    async for store in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
        [got] = await store.get(["old"], collection="c")
        assert got.content == (TextBlock(text="written long ago"),)
        image = (TextBlock(text="a chart"), ImageBlock(url="https://example.org/c.png"))
        await store.add([Document(id="new", content=image, embedding=(0.0, 1.0))], collection="c")
        assert [d.content for d in await store.get(["old", "new"], collection="c")] == [got.content, image]


async def test_a_fresh_worker_finds_the_summary_by_key_and_reads_only_the_window(
    postgres_server: Server, pg_schema: str
) -> None:
    """A summarising pipeline on Postgres: once a session has its summary, a new worker (new providers, empty
    caches) reads the newest rows and the summary by key; it neither reads the session nor calls the model."""

    from ravi.agents.context import CompactionPipeline, SummarizationCompaction, TokenBudgetComposedStrategy

    calls: list[int] = []

    class CountingLLM:
        async def complete(self, messages: Sequence[ChatMessage], **kwargs: object) -> str:
            calls.append(1)
            return f"summary {len(calls)}"

    def worker(summaries: PostgresSummaryStore) -> CompactionPipeline:
        summarizer = SummarizationCompaction(
            CountingLLM(), recent_token_budget=500, min_old_tokens=100, store=summaries
        )
        return CompactionPipeline([TokenBudgetComposedStrategy([summarizer], token_budget=1_000)])

    messages = [ChatMessage.system("rules")] + [ChatMessage.user(f"turn {i} " + "x" * 40) for i in range(3_000)]
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        for i in range(0, len(messages), 500):
            await history.append_many("a", messages[i : i + 500], session_id="s")
        async for summaries in closing(PostgresSummaryStore(postgres_server.address, schema=pg_schema)):
            first = worker(summaries)
            window = (await first.window(WindowRequest("a", "s", history=history))).messages
            assert len(calls) == 1
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for summaries in closing(PostgresSummaryStore(postgres_server.address, schema=pg_schema)):
            second = worker(summaries)
            assert (await second.window(WindowRequest("a", "s", history=history))).messages == window
            assert len(calls) == 1, "the summary was found by key"
            assert ("a", "s") not in history._cache, "the session was not read whole"
            assert len(history._windows[("a", "s")].messages) < 3 * len(window)


async def test_a_small_collection_is_searched_exactly(postgres_server: Server, pg_schema: str) -> None:
    """Near-duplicate texts (one session's turns) are where an HNSW graph loses neighbours: on these 3,000
    vectors pgvector's index finds about 80% of the true ten nearest. A collection this small is searched
    exactly, with a filter or without: the scores returned are the ten best there are."""
    import numpy as np

    from ravi.kernel.embeddings import HashingEmbeddingClient
    from ravi.kernel.storage import Document

    client = HashingEmbeddingClient(dimension=64)
    texts = [f"turn {i} " + "x" * 40 if i % 2 else f"fine {i}" for i in range(3_000)]
    vectors = np.asarray(await client.embed(texts))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    documents = [
        Document(id=str(i), content=t, metadata={"even": i % 2 == 0}, embedding=tuple(v.tolist()))
        for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
    ]
    async for store in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
        await store.add(documents, collection="turns")
        for q in [f"turn {i}" for i in range(1, 3_000, 97)] + [f"fine {i}" for i in range(0, 3_000, 101)]:
            query = np.asarray((await client.embed([q]))[0])
            similarity = vectors @ (query / np.linalg.norm(query))
            for where, among in ((None, similarity), ({"even": True}, similarity[::2])):
                found = await store.search(tuple(query.tolist()), collection="turns", limit=10, filter=where)
                best = np.sort(among)[::-1][:10]
                assert [r.score for r in found] == pytest.approx(best.tolist(), abs=1e-5), (q, where)


async def test_a_collection_another_process_deleted_or_made_again_is_read_as_it_now_is(
    postgres_server: Server, pg_schema: str
) -> None:
    """Each store remembers the table and dimension of the collections it used. Another process (another store
    on the schema) that deletes a collection, or makes it again with another dimension, left that memory stale:
    every later call on the collection failed ("relation ... does not exist"), or refused vectors of the new
    dimension and sent the old one to the server. A call answers from the collection as it now is."""
    from ravi.kernel.storage import Document

    def doc(i: str, *vector: float) -> Document:
        return Document(id=i, content=i, embedding=vector)

    async for mine in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
        async for other in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
            await mine.upsert([doc("a", 1.0, 0.0, 0.0)], collection="c")
            assert [d.id for d in await mine.get(["a"], collection="c")] == ["a"]
            assert await other.delete_collection("c") is True
            assert await mine.get(["a"], collection="c") == []
            assert await mine.search([1.0, 0.0, 0.0], collection="c") == []
            assert await mine.delete(["a"], collection="c") == 0
            assert await mine.upsert([doc("b", 1.0, 0.0, 0.0)], collection="c") == ["b"]
            assert [d.id for d in await other.get(["b"], collection="c")] == ["b"]

            assert await other.delete_collection("c") is True
            await other.upsert([doc("d4", 1.0, 0.0, 0.0, 0.0)], collection="c")
            assert await mine.upsert([doc("e4", 0.0, 1.0, 0.0, 0.0)], collection="c") == ["e4"]
            found = await mine.search([1.0, 0.0, 0.0, 0.0], collection="c", limit=5)
            assert [r.id for r in found] == ["d4", "e4"]
            with pytest.raises(InvalidArgument, match="dimension 4"):
                await mine.upsert([doc("f3", 1.0, 0.0, 0.0)], collection="c")
            with pytest.raises(InvalidArgument, match="dimension 4"):
                await mine.search([1.0, 0.0, 0.0], collection="c")

            assert await other.delete_collection("c") is True
            await other.upsert([doc("g3", 0.0, 0.0, 1.0)], collection="c")  # the old dimension again, a new table
            assert await mine.delete(["g3"], collection="c") == 1
            assert await other.get(["g3"], collection="c") == []


async def test_a_collection_another_process_deleted_refreshes_that_collection_not_the_store(
    postgres_server: Server, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collection table another process deleted made the store run its whole setup again (migrations, prepare,
    every pooled connection replaced), as if the schema were gone: any missing table did. Only the collection is
    read again; a dropped schema still sets the store up again."""
    from ravi.capabilities.postgres._db import Database
    from ravi.kernel.storage import Document

    runs: list[Database] = []
    set_up = Database._set_up

    async def counted(database: Database) -> None:
        runs.append(database)
        await set_up(database)

    monkeypatch.setattr(Database, "_set_up", counted)
    async for mine in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
        async for other in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
            await mine.upsert([Document(id="a", content="a", embedding=(1.0, 0.0))], collection="c")
            await mine.upsert([Document(id="k", content="k", embedding=(0.0, 1.0))], collection="kept")
            assert await other.delete_collection("c") is True
            before = runs.count(mine.db)
            assert await mine.get(["a"], collection="c") == []
            assert await mine.search([1.0, 0.0], collection="c") == []
            assert await mine.upsert([Document(id="b", content="b", embedding=(1.0, 0.0))], collection="c") == ["b"]
            assert [d.id for d in await mine.get(["k"], collection="kept")] == ["k"]
            assert runs.count(mine.db) == before
            await other.destroy()
            assert await mine.get(["k"], collection="kept") == []  # the schema is gone: set up again
            assert await mine.list_collections() == []
            assert runs.count(mine.db) == before + 1


async def test_a_collection_whose_table_was_dropped_by_hand_is_a_missing_collection(
    postgres_server: Server, pg_schema: str
) -> None:
    """A collection's table dropped outside Ravi (its catalogue row left behind) failed every call on it with
    ``BackendUnavailable`` for good, though ``list_collections`` listed it: its data is gone, so it is now a
    collection that does not exist, which an upsert makes again, in this store and in another that knew it."""
    from ravi.kernel.storage import Document

    async for mine in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
        async for other in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
            await mine.upsert([Document(id="a", content="a", embedding=(1.0, 0.0))], collection="c")
            await mine.upsert([Document(id="k", content="k", embedding=(0.0, 1.0))], collection="kept")
            assert [d.id for d in await other.get(["a"], collection="c")] == ["a"]  # the other store knows it too
            table = await mine.db.fetchval(f"SELECT table_name FROM {mine._catalogue} WHERE name = 'c'")
            await mine.db.execute(f'DROP TABLE "{pg_schema}"."{table}"')
            assert await mine.get(["a"], collection="c") == []
            assert await mine.search([1.0, 0.0], collection="c") == []
            assert "c" not in await mine.list_collections()
            assert await other.upsert([Document(id="b", content="b", embedding=(1.0, 0.0))], collection="c") == ["b"]
            assert [d.id for d in await mine.get(["b"], collection="c")] == ["b"]
            assert [d.id for d in await mine.get(["k"], collection="kept")] == ["k"]


@pytest.mark.parametrize("size", [-1, 1.5, True, "10"])
def test_exact_search_kb_must_be_a_size(size: object) -> None:
    """Refused when the store is built, before any connection."""
    with pytest.raises(ConfigurationError, match="exact_search_kb"):
        PgVectorStore("postgresql://localhost:1/none", exact_search_kb=size)  # type: ignore[arg-type]


def _recall_session(n: int) -> list[ChatMessage]:
    messages = [ChatMessage.system("rules")]
    for i in range(n):
        if i == 30:
            call = ToolCallBlock(id="where", name="lookup", arguments={"host": "staging"})
            messages += [
                ChatMessage.assistant(None, tool_calls=[call]),
                ChatMessage.system("a note among the results"),
                ChatMessage.tool("where", "the staging host is zanzibar-7, port 6543"),
            ]
        messages += [ChatMessage.user(f"turn {i} " + "x" * 40), ChatMessage.assistant(f"fine {i}")]
    return [*messages, ChatMessage.user("which port does zanzibar-7 use?")]


async def test_a_fresh_worker_recalls_from_the_terms_index_reading_only_the_window(
    postgres_server: Server, pg_schema: str
) -> None:
    """Relevant recall on Postgres: a new worker (empty caches) reads the newest rows and asks the terms index
    for the old tool unit that answers the request; the session is never read whole, and the window is the one
    the in-memory store gives for the same transcript (ranked by words alone: the two stores weigh the
    neighbours of a match and the meaning of the request each their own way)."""
    from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, RelevantRecallStrategy

    messages = _recall_session(3_000)
    expected_unit = messages[61:64]
    memory = InMemoryHistoryProvider()
    await memory.append_many("a", messages, session_id="s")
    reference = CompactionPipeline([RelevantRecallStrategy(1_000, meaning=None, spread=0.0)])
    want = (await reference.window(WindowRequest("a", "s", history=memory))).messages
    assert want[1:4] == expected_unit
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        for i in range(0, len(messages), 500):
            await history.append_many("a", messages[i : i + 500], session_id="s")
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        pipeline = CompactionPipeline([RelevantRecallStrategy(1_000, meaning=None, spread=0.0)])
        window = (await pipeline.window(WindowRequest("a", "s", history=history))).messages
        assert window == want
        assert ("a", "s") not in history._cache, "the session was not read whole"
        assert len(history._windows[("a", "s")].messages) < 200  # of 6,004


async def test_a_fresh_worker_recalls_by_meaning_from_pgvector_reading_only_the_window(
    postgres_server: Server, pg_schema: str
) -> None:
    """Recall with an ``EmbeddingIndex`` on pgvector: the first window indexes the session into the vector store;
    a new worker (new providers, empty caches) then reads only the newest rows, embeds only the new message
    (and the request), and recalls what an index over the whole transcript, built in the process on pgvector
    too, recalls (a session's collection is small, so pgvector searches it exactly)."""
    from ravi.agents.context import CompactionPipeline, RelevantRecallStrategy
    from ravi.agents.context.recall_index import EmbeddingIndex
    from ravi.kernel.embeddings import HashingEmbeddingClient

    embedded: list[str] = []

    class Counting(HashingEmbeddingClient):
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            embedded.extend(texts)
            return await super().embed(texts)

    messages = _recall_session(1_500)
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for vectors in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
            await history.append_many("a", messages[:-1], session_id="s")
            index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors)
            first = CompactionPipeline([RelevantRecallStrategy(1_000, index=index)])
            await first.window(WindowRequest("a", "s", history=history))
            await history.append_many("a", messages[-1:], session_id="s")
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for vectors in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
            worker = CompactionPipeline(
                [RelevantRecallStrategy(1_000, index=EmbeddingIndex(Counting(dimension=64), vectors))]
            )
            window = (await worker.window(WindowRequest("a", "s", history=history))).messages
            assert ("a", "s") not in history._cache, "the session was not read whole"
            assert embedded == [messages[-1].text, messages[-1].text]
            assert window[0] == messages[0] and window[-1] == messages[-1]
            assert len(window) < len(messages) // 10
    # the reference ranks the whole transcript in the process, over pgvector too (collections of its own): the
    # in-memory store scores in float64 and pgvector sums in float32, so they order scores within float32's
    # rounding of each other apart, and this session's "fine N" turns hold many such near-ties at the index's
    # limit (decision 106); which of them a window kept then followed the messages' random ids
    async for vectors in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
        whole = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors, collection_prefix="whole")
        in_process = CompactionPipeline([RelevantRecallStrategy(1_000, index=whole)])
        assert window == await in_process.compact(messages)


async def test_a_session_stored_before_the_terms_index_is_indexed_on_its_first_search(
    postgres_server: Server, pg_schema: str
) -> None:
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        messages = _recall_session(50)
        await history.append_many("a", messages, session_id="s")
        # as an older version of the schema left it: no terms, no counts
        await history.db.execute(f"UPDATE {history._messages} SET terms = NULL, tokens = NULL, cum_tokens = NULL")
        await history.db.execute(f"UPDATE {history._sessions} SET indexed_seq = 0, total_tokens = NULL")
        before = sum(map(stored_tokens, messages[:-1]))  # the question itself is not searched
        matches = await history.search_units("a", session_id="s", query="zanzibar-7", before=before, limit=3)
        assert [list(m.messages) for m in matches] == [messages[61:64]]
        assert matches[0].after_system == messages[0].id
        assert await history.db.fetchval(f"SELECT count(*) FROM {history._messages} WHERE terms IS NULL") == 0


async def test_rows_a_search_indexes_count_as_the_index_counts_them(postgres_server: Server, pg_schema: str) -> None:
    """A search indexes the rows appended since the last one and counts them into each term's document
    frequency itself: its ranking is the one a later search over the finished index gives."""
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        old = [ChatMessage.user(f"quokka sighting {i} near the walrus pier") for i in range(3)]
        await history.append_many("a", [*old, *(ChatMessage.user(f"lunch {i}") for i in range(20))], session_id="s")
        query = "quokka walrus pier"
        assert await history.search_units("a", session_id="s", query=query, before=10**9, limit=50)
        new = [ChatMessage.user(f"quokka {i}") for i in range(6)] + [ChatMessage.user("walrus pier at noon")]
        await history.append_many("a", new, session_id="s")
        first = await history.search_units("a", session_id="s", query=query, before=10**9, limit=50)
        again = await history.search_units("a", session_id="s", query=query, before=10**9, limit=50)
        assert first == again
        assert len(first) == 10


async def test_indexing_a_chunk_reads_the_chunks_rows_not_the_session(postgres_server: Server, pg_schema: str) -> None:
    """The statement that stores a chunk's terms touches the chunk's rows only. Joined on seq alone, the planner
    hashed the whole session for every chunk, and a 100,000-message session took 69 s to index instead of 15."""
    import json

    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", [ChatMessage.user(f"turn {i}") for i in range(6_000)], session_id="s")
        _, relation = history._messages.replace('"', "").split(".")
        chunk = list(range(3_000, 3_100))
        generation = await history.generation("a", session_id="s")
        async with history.db.connection() as connection:
            transaction = connection.transaction()
            await transaction.start()
            try:
                [plan] = json.loads(
                    await connection.fetchval(
                        f"EXPLAIN (ANALYZE, FORMAT JSON) {history._index_query}",
                        *("a", "s", chunk, ["'turn':1"] * len(chunk), 3_100, generation, False),
                    )
                )
            finally:
                await transaction.rollback()

        read = [int(scan["Actual Rows"]) for scan in _scans(plan["Plan"], relation)]
        assert read and sum(read) <= len(chunk), read


_STATES = (
    "never analysed",
    "analysed mid-burst",
    "analysed early in the burst",
    "analysed with other tenants' skew",
    "after VACUUM ANALYZE",
)


async def _write_in_state(history: PostgresHistoryProvider, state: str, messages: list[ChatMessage]) -> None:
    """Write ``messages`` to session ("a", "s") and search it once (which indexes it), leaving the messages
    table's planner statistics in ``state``. Autovacuum is off for the tables, so the state holds."""
    from ravi.capabilities.postgres.history import _rows

    await history.count_messages("a", session_id="s")  # the tables exist
    for name in (history._messages, history._sessions):
        await history.db.execute(f"ALTER TABLE {name} SET (autovacuum_enabled = false)")
    append = f"SELECT {history._append}($1, $2, '', $3, $4, $5, $6)"
    if state == "analysed with other tenants' skew":  # 1,000 small sessions of 100 agents beside the long one
        async with history.db.connection() as connection:
            await connection.executemany(
                append,
                [
                    (f"tenant{k % 100}", f"t{k}", *_rows([ChatMessage.user(f"hello {k}.{j}") for j in range(10)]))
                    for k in range(1_000)
                ],
            )
    if state == "analysed mid-burst":  # imported in one transaction, analysed before it commits
        async with history.db.connection() as importer, importer.transaction():
            for i in range(0, len(messages), 1_000):
                await importer.fetchval(append, "a", "s", *_rows(messages[i : i + 1_000]))
            await history.db.execute(f"ANALYZE {history._messages}")
            await history.db.execute(f"ANALYZE {history._sessions}")
    else:
        for i in range(0, len(messages), 1_000):
            await history.append_many("a", messages[i : i + 1_000], session_id="s")
            if i == 0 and state == "analysed early in the burst":  # autovacuum's ANALYZE after the first batch
                await history.db.execute(f"ANALYZE {history._messages}")
                await history.db.execute(f"ANALYZE {history._sessions}")
    await history.search_units("a", session_id="s", query="index", before=0, limit=1)
    if state in ("analysed with other tenants' skew", "after VACUUM ANALYZE"):
        async with history.db.connection() as connection:
            await connection.execute(f"VACUUM ANALYZE {history._messages}")
            await connection.execute(f"VACUUM ANALYZE {history._sessions}")
    believed = await history.db.fetchval(f"SELECT reltuples FROM pg_class WHERE oid = '{history._messages}'::regclass")
    if state == "never analysed":
        assert believed == -1
    elif state == "analysed mid-burst":
        assert believed == 0  # the rows of the import were not yet anyone's to count
    elif state == "analysed early in the burst":
        assert believed == 1_000
    else:
        assert believed >= len(messages)


_READS = """
SELECT c.relname, pg_stat_get_xact_numscans(c.oid) AS scans, pg_stat_get_xact_tuples_returned(c.oid) AS rows
FROM pg_class c
WHERE c.oid = $1::regclass OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = $1::regclass)"""


async def _reads(
    connection: Any, table: str, statement: str, args: Sequence[Any], mode: str, setup: Sequence[str] = ()
) -> dict[str, int]:
    """What ``statement`` read of ``table``, run once (after ``setup``) in a transaction rolled back after it, its
    plan chosen as ``mode`` says (``plan_cache_mode``): ``"scans"`` (sequential scans of the table), ``"scanned"``
    (the rows they read) and, for each index of the table, how many entries it returned."""
    transaction = connection.transaction()
    await transaction.start()
    try:
        await connection.execute(f"SET LOCAL plan_cache_mode = {mode}")
        for step in setup:
            await connection.execute(step)
        prepared = await connection.prepare(statement)
        before = {r["relname"]: r for r in await connection.fetch(_READS, table)}
        await prepared.fetch(*args)
        after = {r["relname"]: r for r in await connection.fetch(_READS, table)}
    finally:
        await transaction.rollback()
    name = table.split(".")[-1].strip('"')
    reads = {index: after[index]["rows"] - before[index]["rows"] for index in after if index != name}
    return {
        **reads,
        "scans": after[name]["scans"] - before[name]["scans"],
        "scanned": after[name]["rows"] - before[name]["rows"],
    }


async def _sent(db: Any, call: Awaitable[Any]) -> tuple[Any, list[tuple[str, tuple[Any, ...]]]]:
    """What ``call`` returns, and the statements it sends through ``db.fetch`` with their arguments, in order."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    fetch = db.fetch

    async def recording(statement: str, *args: Any) -> Any:
        sent.append((statement, args))
        return await fetch(statement, *args)

    db.fetch = recording
    try:
        return await call, sent
    finally:
        db.fetch = fetch


@pytest.mark.parametrize("state", _STATES)
async def test_reads_keep_to_the_session_whatever_the_statistics(
    postgres_server: Server, pg_schema: str, state: str
) -> None:
    """A window, a search's bookkeeping and its ranking, hybrid recall's neighbours of the matches, the indexing
    of a stretch, a cached whole read, an append (a retried one too), replace_last and clear_run read the
    session's own rows, about as many as they need, whatever the messages table's statistics say and whether
    the plan is custom or generic: never analysed, so a long session looks a few rows long; analysed while an
    import was uncommitted, so the table looks empty (every index then costs the planner the same, and
    PostgreSQL 18 can walk the run or the id index by their later columns); analysed after the first batch of a
    burst; analysed with one long session among many small ones; and settled by VACUUM ANALYZE. A walk bounded
    on one side only ("the newest row below", with a LIMIT) was read whole, as a bitmap, when the session looked
    short: a window of about 500 rows read all 12,000, a retried append renumbered through the whole session.
    No statement scans the table or returns through the primary key (and the system messages and the ids) half
    the session's rows, and only clear_run reads the run index."""
    from ravi.agents.demo import agentic_transcript
    from ravi.capabilities.postgres.history import _INDEX_CHUNK, _RANKED, _quoted, _rows, session_digest

    messages = agentic_transcript(12_000)
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await _write_in_state(history, state, messages)
        last_run = [ChatMessage.user(f"late {i}") for i in range(10)]
        await history.append_many("a", last_run, session_id="s", run_id="late")
        await history.read_window("a", session_id="s", tokens=150_000)
        held = history._windows[("a", "s")]
        newest = held.messages[-1]
        generation, end = held.generation, held.seqs[-1] + 1
        common, in_tools = (_quoted(session_digest("a", "s") + w) for w in ("src", "total_amount"))
        fresh = [ChatMessage.user("one"), ChatMessage.user("two")]
        append = f"SELECT {history._append}($1, $2, '', $3, $4, $5, $6)"
        replace = f"SELECT {history._replace_last}($1, $2, $3, '', $4, $5, $6, $7)"
        statements: dict[str, tuple[str, tuple[Any, ...], tuple[str, ...]]] = {
            "first window": (history._window_query, ("a", "s", 150_000, "", 0, -1), ()),
            "window beside a cached one": (
                history._window_query,
                ("a", "s", 150_000, generation, held.low, held.high),
                (),
            ),
            "term counts and unindexed rows": (
                history._df_query,
                ("a", "s", [common, in_tools], _RANKED + 1, _INDEX_CHUNK, generation, held.low, held.high),
                (),
            ),
            "term counts of a session never searched": (
                history._df_query,
                ("a", "s", [in_tools], _RANKED + 1, _INDEX_CHUNK, "", 0, -1),
                (f"UPDATE {history._sessions} SET indexed_seq = 0",),
            ),
            "a range of a stretch never searched": (history._unindexed_query, ("a", "s", 4_000, 6_000), ()),
            "storing a range's terms": (
                history._index_query,
                ("a", "s", [end - 2, end - 1], ["'x':1", "'y':1"], end, generation, False),
                (),
            ),
            "a search for a common term": (
                history._search_query,
                ("a", "s", [common], [1.0], 10**9, 5, 0.0, "", []),
                (),
            ),
            "a search holding rows parsed": (
                history._search_query,
                ("a", "s", [common], [1.0], 10**9, 5, 0.0, generation, list(range(0, end, 3))),
                (),
            ),
            "a search for a term of tool results": (
                history._search_query,
                ("a", "s", [in_tools], [1.0], 10**9, 20, 0.0, "", []),
                (),
            ),
            # hybrid recall's neighbours (spread 1: a neighbour scores as its match, so the borders of every match
            # found are walked), their units and rows, in the same statement
            "a search with the units bordering its matches": (
                history._search_query,
                ("a", "s", [common, in_tools], [1.0, 2.0], 10**9, 20, 1.0, "", []),
                (),
            ),
            "a search with bordering units, holding rows parsed": (
                history._search_query,
                ("a", "s", [common, in_tools], [1.0, 2.0], 10**9, 20, 1.0, generation, list(range(0, end, 3))),
                (),
            ),
            "a whole read after a cached one": (history._refresh_query, ("a", "s", generation, end - 10), ()),
            "an append": (append, ("a", "s", *_rows(fresh)), ()),
            "a retried append": (append, ("a", "s", *_rows([newest, *fresh])), ()),
            "replace_last of another id": (replace, ("a", "s", "no such id", *_rows(fresh)), ()),
            "replace_last": (replace, ("a", "s", newest.id, *_rows(fresh)), ()),
            "clear_run of the newest run": (f"SELECT {history._clear_run}($1, $2, $3)", ("a", "s", "late"), ()),
        }
        # hybrid recall by words sends no statement of its own: the units bordering each match, and their rows,
        # come with the search's
        search = history.search_hybrid("a", session_id="s", query="src total_amount", before=10**9, limit=5, spread=1.0)
        found, sent = await _sent(history.db, search)
        assert found.lexical
        own = [(text, args) for text, args in sent if text not in (history._df_query, history._search_query)]
        assert own == [], [text[:80] for text, _ in own]
        statements["hybrid recall by words, as sent"] = next(
            (text, args, ()) for text, args in sent if text == history._search_query
        )
        limit = len(messages) // 2
        prefix = history.db.prefix
        bounded = {f"{prefix}messages_pkey", f"{prefix}messages_systems", f"{prefix}messages_ids"}
        problems = []
        async with history.db.connection() as connection:
            for mode in ("force_custom_plan", "force_generic_plan"):
                for name, (statement, args, setup) in statements.items():
                    reads = await _reads(connection, history._messages, statement, args, mode, setup)
                    walked = sum(reads[index] for index in bounded)
                    runs = reads[f"{prefix}messages_by_run"]  # clear_run's own index, and no other statement's
                    wrong_index = runs == 0 if name.startswith("clear_run") else runs > 0
                    if reads["scans"] or wrong_index or walked >= limit:
                        problems.append((mode, name, {k: v for k, v in reads.items() if v}))
        assert not problems, problems


def test_bounded_walks_find_the_nearest_row_whatever_the_gaps(postgres_server: Server, pg_schema: str) -> None:
    """The walks the statements find a unit's ends and a window's cut with (ranges below or above a seq, each
    twice the last) give what a plain walk gives: the newest matching row below a seq, the oldest above one and
    below a stop, and the newest row whose running total before it is below a number, over sessions with the
    gaps clear_run leaves, from every starting range size."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ravi.capabilities.postgres._history_sql import newest, oldest

    roles = st.sampled_from(["user", "assistant", "tool", "system"])
    opens = "x.role NOT IN ('tool', 'system')"

    async def check(history: PostgresHistoryProvider, rows: list[tuple[str, bool]], points: list[int]) -> None:
        session = uuid.uuid4().hex
        made = {
            "user": lambda: ChatMessage.user("u"),
            "assistant": lambda: ChatMessage.assistant("a " * 3),
            "tool": lambda: ChatMessage.tool("c", "t " * 5),
            "system": lambda: ChatMessage.system("s"),
        }
        messages = [made[role]() for role, _ in rows]
        for message, (_, dropped) in zip(messages, rows, strict=True):
            await history.append("a", message, session_id=session, run_id="drop" if dropped else "keep")
        await history.clear_run("a", session_id=session, run_id="drop")
        kept = [
            (seq, message.role, stored_tokens(message))
            for seq, (message, (_, dropped)) in enumerate(zip(messages, rows, strict=True))
            if not dropped
        ]
        before = {seq: sum(t for _, _, t in kept[:i]) for i, (seq, _, _) in enumerate(kept)}
        m = history._messages
        for first in (1, 3, 16):
            below = f"SELECT {newest(m, '$3', opens, first)}"
            above = f"SELECT {oldest(m, '$3', '$4', opens, first)}"
            under = f"SELECT {newest(m, '$3', 'x.cum_tokens - x.tokens < $4', first)}"
            for p in points:
                openers = [seq for seq, role, _ in kept if role not in ("tool", "system")]
                want = max((seq for seq in openers if seq < p), default=None)
                assert await history.db.fetchval(below, "a", session, p) == want
                stop = p + 7
                want = min((seq for seq in openers if p < seq < stop), default=None)
                assert await history.db.fetchval(above, "a", session, p, stop) == want
                total = p * 3
                want = max((seq for seq, _, _ in kept if seq < len(rows) and before[seq] < total), default=None)
                assert await history.db.fetchval(under, "a", session, len(rows), total) == want

    with asyncio.Runner() as runner:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

        @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            rows=st.integers(0, 60).flatmap(
                lambda n: st.lists(st.tuples(roles, st.booleans()), min_size=n, max_size=n)
            ),
            points=st.lists(st.integers(-2, 70), min_size=1, max_size=6),
        )
        def walks(rows: list[tuple[str, bool]], points: list[int]) -> None:
            runner.run(check(history, rows, points))

        try:
            walks()
        finally:
            runner.run(history.close())


async def test_appends_leave_the_terms_index_alone_and_searches_use_it(postgres_server: Server, pg_schema: str) -> None:
    """Appended rows have no terms until a search indexes them: the terms index does not grow with appends (a GIN
    index over every row kept an entry for each NULL), and the search's statements can still use it."""
    import json

    from ravi.capabilities.postgres.history import _INDEX_CHUNK, _RANKED, _quoted, session_digest

    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", [ChatMessage.user(f"kestrel {i}") for i in range(100)], session_id="s")
        await history.search_units("a", session_id="s", query="kestrel", before=10**9, limit=1)
        index = f'"{history.db.schema}"."{history.db.prefix}messages_terms"'
        size = await history.db.fetchval("SELECT pg_relation_size($1::regclass)", index)
        for i in range(0, 6_000, 1_000):
            await history.append_many("a", [ChatMessage.user(f"note {i + j}") for j in range(1_000)], session_id="t")
        assert await history.db.fetchval("SELECT pg_relation_size($1::regclass)", index) == size

        words = [_quoted(session_digest("a", "s") + "kestrel")]
        statements = {
            "term counts": (history._df_query, ("a", "s", words, _RANKED + 1, _INDEX_CHUNK, "", 0, -1)),
            "search": (history._search_query, ("a", "s", words, [1.0], 10**9, 5, 0.5, "", [])),
        }
        async with history.db.connection() as connection, connection.transaction():
            await connection.execute("SET LOCAL enable_seqscan = off")
            for name, (statement, args) in statements.items():
                plan = await connection.fetchval(f"EXPLAIN (FORMAT JSON) {statement}", *args)
                assert f"{history.db.prefix}messages_terms" in json.dumps(json.loads(plan)), name


async def test_a_retried_batch_renumbers_only_its_own_rows(postgres_server: Server, pg_schema: str) -> None:
    """A batch with ids the session already holds is renumbered after its insert. With statistics, and once the
    append function's plans are generic (as a long-lived connection's become), ``seq >= base`` was planned as a
    third of the table and the renumbering scanned it whole; it reads the batch's rows through the index."""
    from ravi.agents.demo import agentic_transcript

    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        messages = agentic_transcript(20_000)
        for i in range(0, len(messages), 2_000):
            await history.append_many("a", messages[i : i + 2_000], session_id="s")
        retried = [*messages[-3:], ChatMessage.user("one"), ChatMessage.user("two")]
        async with history.db.connection() as connection:
            await connection.execute(f"VACUUM ANALYZE {history._messages}")
            async with connection.transaction():
                await connection.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                batch = (
                    [m.id for m in retried],
                    [m.model_dump_json() for m in retried],
                    [m.role for m in retried],
                    [stored_tokens(m) for m in retried],
                )
                added = await connection.fetchval(
                    f"SELECT {history._append}($1, $2, $3, $4, $5, $6, $7)", "a", "s", "", *batch
                )
                scans = await connection.fetchval(
                    "SELECT pg_stat_get_xact_numscans($1::regclass)", history._messages.replace('"', "")
                )
        assert added == 2
        assert scans == 0, "the renumbering scanned the messages table"
        assert [m.text for m in (await history.get_messages("a", session_id="s"))[-3:]] == [
            messages[-1].text,
            "one",
            "two",
        ]


def _scans(node: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    """The scans of ``relation`` in an EXPLAIN (FORMAT JSON) plan."""
    below = [scan for child in node.get("Plans", []) for scan in _scans(child, relation)]
    return [node, *below] if node.get("Relation Name") == relation and "Scan" in node["Node Type"] else below


@pytest.mark.parametrize("n", [1_999, 2_000, 2_001, 4_000])
async def test_a_long_stretch_never_searched_is_indexed_in_chunks(
    postgres_server: Server, pg_schema: str, n: int
) -> None:
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        messages = [ChatMessage.user(f"note {i}" + (" kestrel" if i % 500 == 7 else "")) for i in range(n)]
        await history.append_many("a", messages, session_id="s")
        matches = await history.search_units("a", session_id="s", query="kestrel", before=10**9, limit=20)
        assert sorted(m.messages[0].id for m in matches) == sorted(m.id for m in messages if "kestrel" in m.text)
        assert await history.db.fetchval(f"SELECT count(*) FROM {history._messages} WHERE terms IS NULL") == 0
        assert await history.db.fetchval(f"SELECT indexed_seq FROM {history._sessions}") == n


async def test_long_words_and_huge_messages_are_searchable(postgres_server: Server, pg_schema: str) -> None:
    """A base64 blob (one 3,000-letter word) and a 600,000-character message index without error, and the
    message's ordinary words are still found."""
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        blob = ChatMessage.tool("c1", "payload " + "QUJD" * 750)
        call = ChatMessage.assistant(None, tool_calls=[ToolCallBlock(id="c1", name="fetch", arguments={})])
        huge = ChatMessage.user("pelican " + " ".join(f"word{i}" for i in range(100_000)))  # indexed: its start
        await history.append_many("a", [call, blob, huge, ChatMessage.user("x")], session_id="s")
        matches = await history.search_units("a", session_id="s", query="payload pelican", before=10**9, limit=5)
        assert {m.messages[0].id for m in matches} == {call.id, huge.id}


def test_a_store_used_through_one_asyncio_run_after_another_keeps_no_connection_open(
    postgres_server: Server,
) -> None:
    """Code that calls ``asyncio.run`` per request (a sync web app): each call's pool closes as its loop ends, so
    twenty calls leave no connection behind, and the store keeps working on each new loop. Each loop's pool stayed
    open for the life of the process: twenty calls held twenty or more server connections."""
    import asyncpg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    store = PostgresHistoryProvider(postgres_server.address, schema=schema)

    async def connections() -> int:
        connection = await asyncpg.connect(postgres_server.address, timeout=10)
        try:
            return int(
                await connection.fetchval(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                )
            )
        finally:
            await connection.close()

    async def request(i: int) -> None:  # three sessions at once, so the pool opens more than one connection
        await asyncio.gather(*(store.append("a", ChatMessage.user(f"{i}"), session_id=f"s{k}") for k in range(3)))

    async def drop() -> None:
        await store.close()
        connection = await asyncpg.connect(postgres_server.address, timeout=10)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await connection.close()

    before = asyncio.run(connections())
    try:
        for i in range(20):
            asyncio.run(request(i))
        # a closed connection's server process may take a moment to leave the list: allow one call's worth
        assert asyncio.run(connections()) - before <= 3
        for k in range(3):
            stored = asyncio.run(store.get_messages("a", session_id=f"s{k}"))
            assert [m.text for m in stored] == [f"{i}" for i in range(20)]
    finally:
        asyncio.run(drop())


async def test_a_dropped_schema_ends_no_call_of_a_store_sharing_the_pool(
    postgres_server: Server, pg_schema: str
) -> None:
    """A store that met its dropped schema ended every connection of the pool it shares with the stores of other
    schemas on the same server: a call of theirs under way failed as though Postgres were unreachable."""
    import asyncpg

    dropped = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    bystander = PostgresHistoryProvider(postgres_server.address, schema=f"{pg_schema}_other")
    admin = await asyncpg.connect(postgres_server.address, timeout=10)
    key = uuid.uuid4().int % 2**62
    try:
        await dropped.append("agent", ChatMessage.user("x"), session_id="s")
        await bystander.append("agent", ChatMessage.user("x"), session_id="s")
        await admin.execute("SELECT pg_advisory_lock($1)", key)
        under_way = asyncio.create_task(bystander.db.fetchval("SELECT pg_advisory_xact_lock($1)", key))
        waits = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        for _ in range(100_000):  # until the bystander's call waits on the lock: each look is a round trip
            if under_way.done() or await admin.fetchval(waits):
                break
        assert not under_way.done()
        await PostgresHistoryProvider(postgres_server.address, schema=pg_schema).destroy()
        with pytest.raises(BackendUnavailable, match="dropped"):
            await dropped.append("agent", ChatMessage.user("lost with the schema"), session_id="s")
        await dropped.append("agent", ChatMessage.user("after"), session_id="s")  # set up again
        await admin.execute("SELECT pg_advisory_unlock($1)", key)
        await under_way  # not ended
        assert [m.text for m in await dropped.get_messages("agent", session_id="s")] == ["after"]
        assert [m.text for m in await bystander.get_messages("agent", session_id="s")] == ["x"]
    finally:
        await admin.close()
        await bystander.destroy()
        await dropped.close()
        await bystander.close()


async def test_long_term_memory_takes_an_embedding_model_of_more_than_2000_dimensions(
    postgres_server: Server, pg_schema: str
) -> None:
    """pgvector's HNSW index takes at most 2,000 dimensions: the memories table of a 3,072-dimension model
    (OpenAI's text-embedding-3-large) could not be made, and every call was refused, while the in-memory and
    Redis stores kept such memories. It is made without the index (a search reads one agent's scope anyway)."""
    from ravi.agents.storage import HashingEmbeddingClient

    memory = PgLongTermMemory(postgres_server.address, schema=pg_schema, embedding_client=HashingEmbeddingClient(3072))
    try:
        kept = await memory.save("agent", "invoices are due monthly")
        await memory.save("agent", "the cat sleeps on the sofa")
        assert [m.id for m in await memory.search("agent", "monthly invoices", limit=1)] == [kept]
    finally:
        await memory.close()


async def test_tasks_added_while_the_agent_is_forgotten_are_kept_whole_or_forgotten(
    postgres_server: Server, pg_schema: str
) -> None:
    """``forget`` deleted a board while ``add_tasks`` (another store, or process) held it: ``add_tasks`` then
    wrote its tasks under no board and failed with a bare ``AssertionError``, and the tasks stayed in the table,
    invisible to ``get_task_list`` and out of any later forget's count. Each race now either adds the tasks
    before the forget (which erases them) or after it (a board of its own); no task is left without its board."""
    writer = PgTaskStore(postgres_server.address, schema=pg_schema)
    forgetter = PgTaskStore(postgres_server.address, schema=pg_schema)
    try:
        for i in range(30):
            await writer.create_task_list("conv", "agent", ["first"])
            await asyncio.gather(writer.add_tasks("conv", "agent", [f"t{i}"]), forgetter.forget("agent"))
            board = await writer.get_task_list("conv", "agent")
            rows = await writer.db.fetchval(f"SELECT count(*) FROM {writer._tasks} WHERE agent_id = 'agent'")
            assert rows == (0 if board is None else len(board.tasks)), (i, board, rows)
    finally:
        await writer.close()
        await forgetter.close()
