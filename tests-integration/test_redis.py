"""The Redis backends against a real Redis server: every contract, restarts, TTL, concurrency, and the
Redis-hot / Postgres-cold hybrid end to end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from servers import Server, closing

from ravi.agents.context import AgentContext, HybridContext, HybridHistoryProvider
from ravi.agents.storage.embeddings import HashingEmbeddingClient
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider, RedisLongTermMemory, RedisSessionStore, RedisSummaryStore
from ravi.conformance import (
    HistoryProviderContract,
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    WindowReaderContract,
)
from ravi.conformance._base import eventually
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, PermissionDenied
from ravi.kernel.messages import ChatMessage
from ravi.kernel.registry import load_backend


class TestRedisHistory(HistoryProviderContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(RedisHistoryProvider(redis_server.address, prefix=redis_prefix)):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(RedisHistoryProvider(redis_server.address, prefix=redis_prefix)):
            yield store


class TestRedisHistoryUncachedWithTtl(HistoryProviderContract):
    """The same contract with the read cache off and a (long) session TTL set."""

    @pytest_asyncio.fixture
    async def backend(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(redis_server.address, prefix=redis_prefix, ttl=600, cache_sessions=0)
        ):
            yield store


class TestRedisWindowReader(WindowReaderContract):
    """The windowed read, with a TTL and a small clear_run chunk (counts carried across rewrite chunks)."""

    @pytest_asyncio.fixture
    async def backend(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(redis_server.address, prefix=redis_prefix, ttl=600, clear_run_chunk=4)
        ):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(RedisHistoryProvider(redis_server.address, prefix=redis_prefix, clear_run_chunk=3)):
            yield store


class TestRedisState(ShortTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisSessionStore]:
        async for store in closing(RedisSessionStore(redis_server.address, prefix=redis_prefix)):
            yield store


class TestRedisLongTermMemory(LongTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisLongTermMemory]:
        async for store in closing(RedisLongTermMemory(redis_server.address, prefix=redis_prefix)):
            yield store


async def test_session_ttl_expires_idle_sessions_and_writes_refresh_it(redis_server: Server, redis_prefix: str) -> None:
    history = RedisHistoryProvider(redis_server.address, prefix=redis_prefix, ttl=0.5)
    try:
        await history.append("agent", ChatMessage.user("one"), session_id="s")
        start = time.monotonic()
        while time.monotonic() - start < 0.8:  # keep writing past the TTL: each write refreshes it
            await history.append("agent", ChatMessage.user("again"), session_id="s")
            await asyncio.sleep(0.1)
        assert await history.count_messages("agent", session_id="s") > 1

        async def expired() -> bool:
            return await history.count_messages("agent", session_id="s") == 0

        await eventually(expired, within=5, what="session expiry")
        assert await history.get_messages("agent", session_id="s") == []
    finally:
        await history.close()


async def test_a_cached_reader_does_not_keep_a_session_that_expired_between_reads(
    redis_server: Server, redis_prefix: str
) -> None:
    """An expired session is gone for a reader that cached it: a new session under its id is read whole."""
    history = RedisHistoryProvider(redis_server.address, prefix=redis_prefix, ttl=0.3)
    try:
        await history.append_many("agent", [ChatMessage.user("old-1"), ChatMessage.user("old-2")], session_id="s")
        await history.get_messages("agent", session_id="s")  # cached, then the session expires unseen

        async def expired() -> bool:
            return await history.count_messages("agent", session_id="s") == 0

        await eventually(expired, within=5, what="session expiry")
        fresh = [ChatMessage.user("new-1"), ChatMessage.user("new-2"), ChatMessage.user("new-3")]
        await history.append_many("agent", fresh, session_id="s")
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["new-1", "new-2", "new-3"]
    finally:
        await history.close()


async def test_a_restart_surfaces_backend_unavailable_then_recovers_without_duplicates(
    redis_server: Server, redis_prefix: str
) -> None:
    if redis_server.process is None:
        pytest.skip(f"the server comes from {redis_server.origin}; only a harness-started one can be restarted")
    history = RedisHistoryProvider(redis_server.address, prefix=redis_prefix, socket_timeout=2)
    try:
        first, second = ChatMessage.user("before"), ChatMessage.user("during")
        await history.append("agent", first, session_id="s")
        redis_server.stop()
        try:
            with pytest.raises(BackendUnavailable):
                await history.append("agent", second, session_id="s")
        finally:
            redis_server.start()
        # the agent retries both: nothing is stored twice
        await history.append_many("agent", [first, second], session_id="s")
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["before", "during"]
    finally:
        await history.close()


async def test_fifty_writers_on_one_session(redis_server: Server, redis_prefix: str) -> None:
    providers = [RedisHistoryProvider(redis_server.address, prefix=redis_prefix) for _ in range(5)]
    try:

        async def writer(i: int) -> None:
            for j in range(10):
                await providers[i % 5].append("agent", ChatMessage.user(f"{i}:{j}"), session_id="s")

        await asyncio.gather(*(writer(i) for i in range(50)))
        texts = [m.text for m in await providers[0].get_messages("agent", session_id="s")]
        assert len(texts) == len(set(texts)) == 500
        for i in range(50):
            assert [t for t in texts if t.startswith(f"{i}:")] == [f"{i}:{j}" for j in range(10)]
    finally:
        for p in providers:
            await p.close()


async def test_prefixes_keep_apps_apart(redis_server: Server, redis_prefix: str) -> None:
    one = RedisHistoryProvider(redis_server.address, prefix=redis_prefix + "a")
    two = RedisHistoryProvider(redis_server.address, prefix=redis_prefix + "b")
    try:
        await one.append("agent", ChatMessage.user("one"), session_id="s")
        assert await two.count_messages("agent", session_id="s") == 0
    finally:
        await one.close()
        await two.close()


async def test_unreachable_server_and_bad_configuration() -> None:
    history = RedisHistoryProvider("redis://127.0.0.1:1/0", socket_timeout=1)
    with pytest.raises(BackendUnavailable):
        await history.count_messages("agent", session_id="s")
    await history.close()
    with pytest.raises(ConfigurationError):
        RedisHistoryProvider("http://localhost:6379")
    with pytest.raises(ConfigurationError):
        RedisSessionStore("redis://localhost:6379", prefix="bad prefix with spaces")


async def test_a_url_naming_another_service_is_backend_unavailable() -> None:
    """A Redis URL whose port another service answers on (an HTTP server here) raised a generic RaviError naming
    redis-py's protocol error; it is BackendUnavailable, as an address where nothing answers is."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stores = [RedisHistoryProvider(f"redis://127.0.0.1:{port}/0"), RedisSessionStore(f"redis://127.0.0.1:{port}/0")]
    try:
        with pytest.raises(BackendUnavailable, match="does not answer as Redis"):
            await stores[0].count_messages("agent", session_id="s")
        with pytest.raises(BackendUnavailable, match="does not answer as Redis"):
            await stores[1].get_state("s")
    finally:
        for store in stores:
            await store.close()
        server.close()
        await server.wait_closed()


async def test_a_tls_url_to_a_server_without_tls_says_so_at_once(redis_server: Server, redis_prefix: str) -> None:
    """``rediss://`` to a Redis server that speaks no TLS waited out the whole socket timeout (the server takes the
    TLS handshake's first bytes for the start of a command and waits for its end), then said the server was
    unreachable and to check the host and port. It is a ``ConfigurationError`` saying the server speaks no TLS,
    well before the timeout (a minute here, so a failure that waited it out cannot pass for a quick one)."""
    url = redis_server.address.replace("redis://", "rediss://", 1)
    stores = [
        RedisSessionStore(url, prefix=redis_prefix, socket_timeout=60),
        RedisHistoryProvider(url, prefix=redis_prefix, socket_timeout=60),
    ]
    try:
        with pytest.raises(ConfigurationError, match="speaks no TLS") as raised:
            await asyncio.wait_for(stores[0].get_state("s"), timeout=30)
        assert raised.value.hint is not None and "redis://" in raised.value.hint
        with pytest.raises(ConfigurationError, match="speaks no TLS"):
            await asyncio.wait_for(stores[1].count_messages("agent", session_id="s"), timeout=30)
    finally:
        for store in stores:
            await store.close()


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:99999/0",
        "redis://127.0.0.1:port/0",
        "redis://[::1/0",
        "redis://127.0.0.1:6379/0?socket_timeout=soon",
        "redis://127.0.0.1:6379/sessions",
        "rediss://127.0.0.1:6379/0?ssl_cert_reqs=bogus",
    ],
)
def test_a_url_redis_py_cannot_read_is_a_configuration_error_when_built(url: str) -> None:
    """redis-py reads the URL when the first call makes its client: a port past 65535 or not a number, a broken
    IPv6 address or a bad parameter raised a bare ``ValueError`` there, and a database that is not a number was
    ignored (database 0 was used). Each is a ``ConfigurationError`` when the store is built."""
    with pytest.raises(ConfigurationError, match="Redis URL"):
        RedisSessionStore(url)


async def test_a_database_the_server_does_not_have_is_a_configuration_error_naming_the_url(
    redis_server: Server, redis_prefix: str
) -> None:
    """A URL's database past the server's count (``/99`` on a server of 16) raised a bare ``RaviError`` naming
    redis-py's ``ResponseError`` ("DB index is out of range") with nothing to do about it; it is a
    ``ConfigurationError`` whose hint names the database number in the URL."""
    base = redis_server.address.rsplit("/", 1)[0]
    store = RedisSessionStore(f"{base}/99", prefix=redis_prefix)
    try:
        with pytest.raises(ConfigurationError, match="no database of the number") as raised:
            await store.get_state("s")
        assert raised.value.hint is not None and "URL" in raised.value.hint
    finally:
        await store.close()


async def test_refused_credentials_say_what_to_check(redis_server: Server, redis_prefix: str) -> None:
    """A user and password the server refuses gave ``PermissionDenied`` with no hint; it names the URL's user and
    password."""
    if "@" in redis_server.address:
        pytest.skip("the test server's URL already carries credentials")
    address = redis_server.address.replace("redis://", "redis://nobody:wrong@", 1)
    store = RedisSessionStore(address, prefix=redis_prefix)
    try:
        with pytest.raises(PermissionDenied) as raised:
            await store.get_state("s")
        assert raised.value.hint is not None and "password" in raised.value.hint
    finally:
        await store.close()


async def test_a_url_naming_a_read_only_replica_says_to_name_the_primary(redis_prefix: str) -> None:
    """A URL naming a replica (as after a failover) failed every write with a bare ``RaviError`` naming redis-py's
    ``ReadOnlyError``; it is ``BackendUnavailable`` whose hint says to point the URL at the primary."""
    from ravi.capabilities.redis.local import LocalRedis

    try:
        replica = LocalRedis(extra_args=["--replicaof", "127.0.0.1", "1"])  # a replica, read-only, of nothing
        replica.start()
    except Exception as error:
        pytest.skip(f"no local Redis server to start: {error}")
    store = RedisSessionStore(replica.url, prefix=redis_prefix)
    try:
        with pytest.raises(BackendUnavailable, match="read-only replica") as raised:
            await store.set_state("s", {"k": 1})
        assert raised.value.hint is not None and "primary" in raised.value.hint
    finally:
        await store.close()
        replica.stop()


async def test_registered_under_redis(redis_server: Server, redis_prefix: str) -> None:
    for kind, cls in [
        ("history", RedisHistoryProvider),
        ("state", RedisSessionStore),
        ("longterm", RedisLongTermMemory),
    ]:
        store = load_backend(kind, "redis", url=redis_server.address, prefix=redis_prefix)
        assert isinstance(store, cls)
        await store.close()


async def test_hybrid_context_redis_hot_postgres_cold(
    redis_server: Server, redis_prefix: str, postgres_server: Server, pg_schema: str
) -> None:
    """Writes go to both tiers; the window takes recent turns from Redis and older ones from Postgres."""
    hot = RedisHistoryProvider(redis_server.address, prefix=redis_prefix, ttl=3600)
    cold = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    try:
        context = AgentContext(HybridContext(hot, cold, recent_n=4, max_total=10))
        turns = [ChatMessage.user(f"turn {i}") for i in range(30)]
        await context.add_messages("s", turns)
        assert await hot.count_messages("agent", session_id="s") == 30
        assert await cold.count_messages("agent", session_id="s") == 30
        await hot.clear("agent", session_id="s")  # the hot tier expired or was flushed
        await context.add_messages("s", [ChatMessage.user("turn 30"), ChatMessage.user("turn 31")])
        window = await context.get_prompt_window("s")
        assert [m.text for m in window] == [f"turn {i}" for i in range(22, 32)]
    finally:
        await hot.close()
        await cold.close()


async def test_hybrid_tiers_keep_one_order_under_concurrent_writers_and_clears(
    redis_server: Server, redis_prefix: str, postgres_server: Server, pg_schema: str
) -> None:
    """Thirty tasks append to one session of a Redis-hot, Postgres-cold hybrid while others clear runs and replace
    the last message: both tiers end with the same messages in the same order, and every read served by the hot
    tier is the cold tier's transcript. Each write went to the cold tier, then the hot one, with no order between
    writers: the tiers interleaved differently (142 of 300 positions differed), and reads, served by the hot tier
    while the counts matched, gave another order than the cold tier, which reads gave once the hot tier expired."""
    hot = RedisHistoryProvider(redis_server.address, prefix=redis_prefix)
    cold = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    history = HybridHistoryProvider(hot, cold)
    try:

        async def writer(i: int) -> None:
            for j in range(10):
                await history.append("a", ChatMessage.user(f"{i}:{j}", id=f"{i}-{j}"), session_id="s", run_id=f"w{i}")

        async def editor() -> None:
            for k in range(10):
                junk = ChatMessage.user(f"junk {k}")
                await history.append("a", junk, session_id="s", run_id="junk")
                await history.replace_last(
                    "a", session_id="s", message_id=junk.id, messages=[ChatMessage.user(f"edited {k}")], run_id="junk"
                )
                await history.clear_run("a", session_id="s", run_id="junk")

        await asyncio.gather(*(writer(i) for i in range(30)), editor(), editor())
        on_cold = await cold.get_messages("a", session_id="s")
        assert len(on_cold) == 300 and not [m for m in on_cold if m.id.count("-") != 1]
        assert [m.id for m in await hot.get_messages("a", session_id="s")] == [m.id for m in on_cold]
        assert await history.get_messages("a", session_id="s") == on_cold
        assert (await history.read_window("a", session_id="s", tokens=10**6)).messages == on_cold
    finally:
        await hot.close()
        await cold.close()


class TestRedisSummaries(SummaryStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisSummaryStore]:
        async for store in closing(RedisSummaryStore(redis_server.address, prefix=redis_prefix)):
            yield store


class TestRedisHistorySummaries(SummaryStoreContract):
    """The history provider keeps its sessions' summaries beside them, under their generations (with a TTL)."""

    @pytest_asyncio.fixture
    async def backend(self, redis_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(RedisHistoryProvider(redis_server.address, prefix=redis_prefix, ttl=600)):
            yield store


async def test_one_store_serves_many_more_concurrent_calls_than_it_has_connections(
    redis_server: Server, redis_prefix: str
) -> None:
    """Calls past max_connections wait for a connection; they used to fail with MaxConnectionsError."""
    history = RedisHistoryProvider(redis_server.address, prefix=redis_prefix)
    try:
        await asyncio.gather(
            *(history.append("agent", ChatMessage.user(f"m{i}"), session_id=f"s{i % 7}") for i in range(300))
        )
        counts = await asyncio.gather(*(history.count_messages("agent", session_id=f"s{i}") for i in range(7)))
        assert sum(counts) == 300
    finally:
        await history.close()


async def test_a_memory_id_can_never_name_the_namespace_index(redis_server: Server, redis_prefix: str) -> None:
    """``get(agent, "index")`` used to read the namespace's index (WRONGTYPE), and ``delete`` to wipe it."""
    memory = RedisLongTermMemory(redis_server.address, prefix=redis_prefix)
    try:
        kept = await memory.save("agent", "the deploy window is Tuesday")
        for reserved in ("index", "dim", "m/index"):
            assert await memory.get("agent", reserved) is None
            assert await memory.delete("agent", reserved) is False
        assert [m.id for m in await memory.search("agent", "deploy window")] == [kept]
    finally:
        await memory.close()


async def test_a_namespace_keeps_one_embedding_dimension(redis_server: Server, redis_prefix: str) -> None:
    """A second embedding size in one namespace is refused up front, so the namespace stays searchable."""
    small = RedisLongTermMemory(redis_server.address, prefix=redis_prefix, embedding_client=HashingEmbeddingClient(8))
    large = RedisLongTermMemory(redis_server.address, prefix=redis_prefix, embedding_client=HashingEmbeddingClient(16))
    try:
        kept = await small.save("agent", "invoices are due monthly")
        with pytest.raises(InvalidArgument, match="dimension"):
            await large.save("agent", "a second model")
        with pytest.raises(InvalidArgument, match="dimension"):
            await large.search("agent", "invoices")
        assert [m.id for m in await small.search("agent", "invoices")] == [kept]
        await small.clear("agent")
        await large.save("agent", "after a clear, any model")
    finally:
        await small.close()
        await large.close()


async def test_clear_run_rewrites_in_chunks_and_keeps_appends_made_meanwhile(
    redis_server: Server, redis_prefix: str
) -> None:
    """clear_run works a chunk at a time (it used to block Redis for 3.4 s on a 200,000-message session); the
    messages appended while it runs are kept, and readers never see a half-rewritten session."""
    history = RedisHistoryProvider(redis_server.address, prefix=redis_prefix, ttl=600, clear_run_chunk=7)
    try:
        await history.append_many("agent", [ChatMessage.user(f"{i}") for i in range(200)], session_id="s", run_id="old")
        await history.append_many(
            "agent", [ChatMessage.user(f"gone{i}") for i in range(100)], session_id="s", run_id="bad"
        )
        await history.append_many(
            "agent", [ChatMessage.user(f"{i}") for i in range(200, 300)], session_id="s", run_id="old"
        )
        seen: list[list[str]] = []

        async def meanwhile() -> None:
            for i in range(20):
                await history.append("agent", ChatMessage.user(f"new{i}"), session_id="s", run_id="new")
                seen.append([m.text for m in await history.get_messages("agent", session_id="s")])

        removed, _ = await asyncio.gather(history.clear_run("agent", session_id="s", run_id="bad"), meanwhile())
        assert removed == 100
        texts = [m.text for m in await history.get_messages("agent", session_id="s")]
        assert texts == [f"{i}" for i in range(300)] + [f"new{i}" for i in range(20)]
        for snapshot in seen:  # before the swap every "gone" message, after it none
            gone = [t for t in snapshot if t.startswith("gone")]
            assert len(gone) in (0, 100)
        again = ChatMessage.user("again")
        await history.append("agent", again, session_id="s")
        await history.append("agent", again, session_id="s")
        assert await history.count_messages("agent", session_id="s") == 321
        assert await history.redis.client.ttl(history._keys("agent", "s")[0]) > 0
        leftovers = [k async for k in history.redis.client.scan_iter(match=f"{redis_prefix}:*rewrite*")]
        assert leftovers == []
    finally:
        await history.close()


async def test_stores_on_one_server_share_one_client_which_closes_with_the_last(
    redis_server: Server, redis_prefix: str
) -> None:
    history = RedisHistoryProvider(redis_server.address, prefix=redis_prefix)
    state = RedisSessionStore(redis_server.address, prefix=redis_prefix)
    async with history, state:
        await history.append("agent", ChatMessage.user("hi"), session_id="s")
        await state.set_state("s", {"k": 1})
        assert history.redis.client is state.redis.client
        await history.aclose()
        await history.aclose()  # closing twice is harmless
        assert await state.get_state("s") == {"k": 1}  # the other store keeps working


async def test_closing_the_reserved_place_leaves_its_store_connected(redis_server: Server, redis_prefix: str) -> None:
    """``reserved()`` is a view over the store's client: closing the view (``async with``, ``aclose``) lets go of
    nothing, so commands of the store under way are not cut off; closing the store still closes the client.
    Closing the view closed the store's client, and the store's commands in flight failed with "Connection
    closed"."""
    from ravi.capabilities.redis._client import _SHARED

    state = RedisSessionStore(redis_server.address, prefix=redis_prefix)
    async with state:
        await state.set_state("s", {"k": 1})
        shared = state.redis._shared()
        async with state.reserved() as reserved:
            await reserved.set_state("r", {"own": 1})
        await reserved.aclose()
        assert _SHARED.get(shared.key) is shared and shared.users >= 1
        assert state.redis._shared() is shared
        assert await state.get_state("s") == {"k": 1}
        assert await reserved.get_state("r") == {"own": 1}  # the view keeps working while its store is open
    assert _SHARED.get(shared.key) is not shared


def test_a_redis_store_works_from_a_second_event_loop(redis_server: Server, redis_prefix: str) -> None:
    history = RedisHistoryProvider(redis_server.address, prefix=redis_prefix)

    async def append_and_count(text: str) -> int:
        await history.append("agent", ChatMessage.user(text), session_id="s")
        return len(await history.get_messages("agent", session_id="s"))

    try:
        assert asyncio.run(append_and_count("first loop")) == 1
        assert asyncio.run(append_and_count("second loop")) == 2
    finally:
        asyncio.run(history.aclose())


async def test_sessions_written_before_counts_were_kept_are_counted_on_their_first_windowed_read(
    redis_server: Server, redis_prefix: str
) -> None:
    """A session without its counts (as written before they were kept): the first windowed read returns the
    right window and stores the counts; appends then keep them, so later reads are windowed."""
    from ravi.kernel.storage import window_of

    async for store in closing(RedisHistoryProvider(redis_server.address, prefix=redis_prefix)):
        messages = [ChatMessage.system("rules")] + [ChatMessage.user(f"turn {i} " + "x" * 80) for i in range(40)]
        await store.append_many("a", messages, session_id="s")
        keys = store._keys("a", "s")
        await store.redis.client.delete(keys[4], keys[5])
        more = ChatMessage.user("not counted either")
        await store.append("a", more, session_id="s")  # a session without counts stays so until read
        assert await store.redis.client.llen(keys[4]) == 0
        messages.append(more)
        generation = await store.generation("a", session_id="s")
        assert await store.read_window("a", session_id="s", tokens=100) == window_of(messages, 100, generation)
        assert await store.redis.client.llen(keys[4]) == len(messages)
        last = ChatMessage.user("counted")
        await store.append("a", last, session_id="s")
        messages.append(last)
        assert await store.redis.client.llen(keys[4]) == len(messages)
        for tokens in (0, 50, 300, 10_000):
            assert await store.read_window("a", session_id="s", tokens=tokens) == window_of(
                messages, tokens, generation
            )


def test_a_store_used_through_one_asyncio_run_after_another_keeps_no_connection_open(
    redis_server: Server, redis_prefix: str
) -> None:
    """Code that calls ``asyncio.run`` per request (a sync web app): each call's client closes as its loop ends,
    so twenty calls leave no connection behind, and the store keeps working on each new loop. Each loop's client
    stayed open for the life of the process: twenty calls held twenty or more connections."""
    import redis.asyncio as aioredis

    store = RedisHistoryProvider(redis_server.address, prefix=redis_prefix)

    async def connections() -> int:
        client = aioredis.Redis.from_url(redis_server.address)
        try:
            return int((await client.info("clients"))["connected_clients"]) - 1  # less this client
        finally:
            await client.aclose()

    async def request(i: int) -> None:  # three sessions at once, so the pool opens more than one connection
        await asyncio.gather(*(store.append("a", ChatMessage.user(f"{i}"), session_id=f"s{k}") for k in range(3)))

    before = asyncio.run(connections())
    try:
        for i in range(20):
            asyncio.run(request(i))
        # the server counts a closed connection out as it reads its end: allow one call's worth
        assert asyncio.run(connections()) - before <= 3
        for k in range(3):
            stored = asyncio.run(store.get_messages("a", session_id=f"s{k}"))
            assert [m.text for m in stored] == [f"{i}" for i in range(20)]
    finally:
        asyncio.run(store.close())
