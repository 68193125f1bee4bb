"""One store on a real server shared by threads that each run their own event loop.

A sync web app calls ``asyncio.run`` per request from a thread pool and keeps one store object for the life of the
process; a worker thread may instead keep one loop of its own. Several threads, started together behind a barrier,
hammer the same scope of one Postgres, Redis, S3 or AGE store that way while the interpreter switches threads as
often as it can. The tests prove that no exception but Ravi's typed ones escapes a public call, that nothing
written is lost, that a read never returns what a removal took away, and that no thread hangs.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import zlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from ledger import Ledger
from servers import Server

from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider
from ravi.conformance import threads
from ravi.conformance.threads import assert_holds_exactly, switching_often
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import window_of
from ravi.kernel.tokens import stored_tokens

WHEN = datetime(2025, 1, 1, tzinfo=UTC)
THREADS = 6
"""How many threads, each with its own event loop (or loops), share a store."""

AGENT = "agent"
WORDS = ("invoice", "refund", "shipping", "password", "latency", "schema", "billing", "outage", "upgrade", "quota")


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    """Make the interpreter switch threads every microsecond, so races show up in every run."""
    with switching_often():
        yield


def run_threads(work: Callable[[int], None]) -> None:
    """Run ``work(i)`` in each of :data:`THREADS` threads at once; fail with what any of them raised, or when one
    never finishes."""
    threads.run_threads(work, THREADS)


def per_request(requests: int, call: Callable[[int, int], Awaitable[object]]) -> Callable[[int], None]:
    """A thread's work: ``asyncio.run(call(thread, k))`` for each ``k`` below ``requests``, a loop per request."""

    def work(thread: int) -> None:
        for k in range(requests):
            asyncio.run(call(thread, k))

    return work


def one_loop(call: Callable[[int], Awaitable[object]]) -> Callable[[int], None]:
    """A thread's work: ``call(thread)`` on one event loop of the thread's own."""

    def work(thread: int) -> None:
        asyncio.run(call(thread))

    return work


def message(thread: int, k: int) -> ChatMessage:
    """Thread ``thread``'s ``k``-th message."""
    text = f"thread{thread} note {k} about {WORDS[(3 * thread + k) % len(WORDS)]}" + " detail" * (k % 5)
    make = ChatMessage.user if k % 2 else ChatMessage.assistant
    return make(text, id=f"t{thread}-m{k}", created_at=WHEN)  # the same message each time it is made


class WordEmbedder:
    """A deterministic ``EmbeddingClient``: each word hashed into one of a few buckets; ``embed`` yields once."""

    dimension = 16
    model = "words"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimension
            for word in text.lower().split():
                vector[zlib.crc32(word.encode()) % self.dimension] += 1.0
            vector[0] += 0.001  # never the zero vector
            vectors.append(vector)
        return vectors


# -- history providers --------------------------------------------------------------------------------------------


@pytest.fixture(params=["postgres", "redis"])
def history(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Postgres or Redis history provider on a schema or prefix of its own, closed and removed afterwards."""
    if request.param == "postgres":
        server: Server = request.getfixturevalue("postgres_server")
        store: Any = PostgresHistoryProvider(server.address, schema=f"t_{uuid.uuid4().hex[:16]}")
    else:
        server = request.getfixturevalue("redis_server")
        store = RedisHistoryProvider(server.address, prefix=f"t{uuid.uuid4().hex[:16]}")
    yield store

    async def remove() -> None:
        await store.destroy()
        await store.close()

    asyncio.run(remove())


async def check_session(history: Any, session_id: str, expected: Sequence[Sequence[ChatMessage]]) -> None:
    """Every read of the session agrees with ``expected``."""
    messages = await history.get_messages(AGENT, session_id=session_id)
    assert_holds_exactly(messages, expected)
    assert await history.count_messages(AGENT, session_id=session_id) == len(messages)
    generation = await history.generation(AGENT, session_id=session_id)
    total = sum(map(stored_tokens, messages))
    for tokens in sorted({0, 7, 40, 150, total // 2, total, total + 1}):
        window = await history.read_window(AGENT, session_id=session_id, tokens=tokens)
        assert window == window_of(messages, tokens, generation), f"the window of {tokens} tokens"


def test_history_from_threads_each_calling_asyncio_run_per_request(history: Any) -> None:
    """Each thread serves requests the way a sync web app does, ``asyncio.run`` per request, all on one
    provider and one session: append, then read the window, the transcript and a search. Every loop opens its
    own pool or client and closes it as it ends, while the other threads' loops open and close theirs."""
    requests = 12

    async def request(thread: int, k: int) -> None:
        await history.append(AGENT, message(thread, k), session_id="s", run_id=f"run-{thread}")
        window = await history.read_window(AGENT, session_id="s", tokens=200)
        assert message(thread, k).id in {m.id for m in window.messages}
        assert message(thread, k).id in {m.id for m in await history.get_messages(AGENT, session_id="s")}
        if hasattr(history, "search_units"):
            await history.search_units(AGENT, session_id="s", query=WORDS[k % len(WORDS)], before=10**6, limit=3)

    run_threads(per_request(requests, request))
    asyncio.run(check_session(history, "s", [[message(t, k) for k in range(requests)] for t in range(THREADS)]))


def test_history_from_threads_each_calling_asyncio_run_for_every_call(history: Any) -> None:
    """Many short requests, one call each, from every thread at once: loops start and end all the time, and each
    new one finds the loops other threads just finished."""
    requests = 100

    async def request(thread: int, k: int) -> None:
        if k % 4 == 0:
            await history.append(AGENT, message(thread, k // 4), session_id="s", run_id=f"run-{thread}")
        else:
            await history.generation(AGENT, session_id="s")

    run_threads(per_request(requests, request))
    expected = [[message(t, k) for k in range(requests // 4)] for t in range(THREADS)]
    asyncio.run(check_session(history, "s", expected))


def test_history_from_threads_each_running_a_loop_appending_reading_and_removing(history: Any) -> None:
    """Threads, each on a loop of its own, append to one session, read its windows and transcript, search it, and
    now and then clear it or replace its newest message; the provider keeps two sessions parsed at most, so the
    threads also evict each other's copies. No call raises, no read returns a message a removal that returned
    before the read started took away, and no thread's messages come back out of order."""
    rounds = 40
    ledger = Ledger()
    searches = hasattr(history, "search_hybrid")
    history._cache_size = 2
    for name in ("_cache", "_windows", "_parsed"):
        cache = getattr(history, name, None)
        if cache is not None and hasattr(cache, "size"):
            cache.size = 2
    embedder = WordEmbedder()

    async def work(thread: int) -> None:
        last = ""
        for k in range(rounds):
            session = "s" if k % 3 else f"s{k % 4}"  # mostly one session; now and then others, to evict it
            batch = [message(thread, 2 * k), message(thread, 2 * k + 1)]
            await history.append_many(AGENT, batch, session_id=session, run_id=f"run-{thread}")
            ledger.append_returned([m.id for m in batch])
            last = batch[-1].id if session == "s" else last
            started = ledger.now()
            window = await history.read_window(AGENT, session_id="s", tokens=120)
            ledger.check_read(started, [m.id for m in window.messages], "a window")
            started = ledger.now()
            whole = await history.get_messages(AGENT, session_id="s")
            ledger.check_read(started, [m.id for m in whole], "the transcript")
            mine = [m.id for m in whole if m.id.startswith(f"t{thread}-")]
            assert mine == sorted(mine, key=lambda i: int(i.split("-m")[1].split("r")[0])), "out of order"
            if searches:
                started = ledger.now()
                found = await history.search_hybrid(
                    AGENT, session_id="s", query=WORDS[k % len(WORDS)], before=10**6, limit=4, spread=0.5,
                    embedder=embedder, model="words",
                )  # fmt: skip
                ids = [m.id for unit in (*found.lexical, *found.meaning) for m in unit.messages]
                ledger.check_read(started, ids, "a search")
            if k % 9 == 4:
                started = ledger.now()
                await history.clear(AGENT, session_id="s")
                ledger.cleared(started)
            elif k % 5 == 2 and last:
                replacement = ChatMessage.assistant(f"thread{thread} revised {k}", id=f"t{thread}-m{2 * k + 1}r")
                if await history.replace_last(
                    AGENT, session_id="s", message_id=last, messages=[replacement], run_id=f"run-{thread}"
                ):
                    ledger.replaced(last)
                    ledger.append_returned([replacement.id])
                    last = replacement.id

    run_threads(one_loop(work))


# -- the other stores ---------------------------------------------------------------------------------------------


def _pg(request: pytest.FixtureRequest) -> str:
    server: Server = request.getfixturevalue("postgres_server")
    return server.address


def _redis(request: pytest.FixtureRequest) -> str:
    server: Server = request.getfixturevalue("redis_server")
    return server.address


def _schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:16]}"


def test_state_stores_from_threads_each_calling_asyncio_run_per_request(request: pytest.FixtureRequest) -> None:
    """Every thread merges keys of its own into one session's state, a loop per request, on Postgres and Redis:
    every key lands."""
    from ravi.capabilities.postgres import PostgresMemoryStore
    from ravi.capabilities.redis import RedisSessionStore

    requests = 10
    for store in (
        PostgresMemoryStore(_pg(request), schema=_schema()),
        RedisSessionStore(_redis(request), prefix=_prefix()),
    ):

        async def update(thread: int, k: int, store: Any = store) -> None:
            state = await store.update_state("s", {f"t{thread}-{k}": k})
            assert state[f"t{thread}-{k}"] == k

        try:
            run_threads(per_request(requests, update))
            state = asyncio.run(store.get_state("s"))
            assert state == {f"t{t}-{k}": k for t in range(THREADS) for k in range(requests)}
        finally:
            asyncio.run(_removed(store))


async def _removed(store: Any) -> None:
    await store.destroy()
    await store.close()


def test_longterm_and_vector_stores_from_threads_each_calling_asyncio_run_per_request(
    request: pytest.FixtureRequest,
) -> None:
    """Every thread saves memories and documents and searches them, a loop per request, on one Postgres
    long-term memory, one Redis long-term memory and one pgvector store: everything saved is found by id."""
    from ravi.capabilities.postgres import PgLongTermMemory, PgVectorStore
    from ravi.capabilities.redis import RedisLongTermMemory
    from ravi.kernel.storage import Document

    requests = 8
    embedder = WordEmbedder()
    memories = [
        PgLongTermMemory(_pg(request), schema=_schema(), embedding_client=embedder),
        RedisLongTermMemory(_redis(request), prefix=_prefix(), embedding_client=embedder),
    ]
    vectors = PgVectorStore(_pg(request), schema=_schema(), embedding_client=embedder)
    saved: dict[int, list[tuple[int, str]]] = {i: [] for i in range(len(memories))}
    lock = threading.Lock()

    async def work(thread: int, k: int) -> None:
        text = f"thread{thread} fact {k} {WORDS[k % len(WORDS)]}"
        for i, memory in enumerate(memories):
            memory_id = await memory.save("a", text)
            with lock:
                saved[i].append((thread, memory_id))
            await memory.search("a", WORDS[(k + thread) % len(WORDS)], limit=3)
        await vectors.add([Document(id=f"t{thread}-d{k}", content=text)], collection="c")
        (query,) = await embedder.embed([WORDS[(k + thread) % len(WORDS)]])
        await vectors.search(query, collection="c", limit=3)

    try:
        run_threads(per_request(requests, work))

        async def check() -> None:
            for i, memory in enumerate(memories):
                assert len(saved[i]) == THREADS * requests
                for _, memory_id in saved[i]:
                    assert await memory.get("a", memory_id) is not None
            ids = [f"t{t}-d{k}" for t in range(THREADS) for k in range(requests)]
            assert sorted(d.id for d in await vectors.get(ids, collection="c")) == sorted(ids)

        asyncio.run(check())
    finally:
        for store in (*memories, vectors):
            asyncio.run(_removed(store))


def test_task_store_from_threads_each_calling_asyncio_run_per_request(request: pytest.FixtureRequest) -> None:
    """Every thread adds tasks to one board and moves its own along, a loop per request: every task lands, in its
    status."""
    from ravi.capabilities.postgres import PgTaskStore
    from ravi.kernel.storage import TaskStatus

    requests = 8
    store = PgTaskStore(_pg(request), schema=_schema())

    async def start() -> None:
        await store.create_task_list("c", "a", [])

    async def work(thread: int, k: int) -> None:
        board = await store.add_tasks("c", "a", [f"thread{thread} task {k}"])
        mine = next(t for t in board.tasks if t.title == f"thread{thread} task {k}")
        await store.update_status("c", "a", mine.id, TaskStatus.IN_PROGRESS)
        await store.update_status("c", "a", mine.id, TaskStatus.SUCCEEDED, result=f"{thread}/{k}")

    try:
        asyncio.run(start())
        run_threads(per_request(requests, work))
        board = asyncio.run(store.get_task_list("c", "a"))
        assert board is not None
        assert sorted(t.title for t in board.tasks) == sorted(
            f"thread{t} task {k}" for t in range(THREADS) for k in range(requests)
        )
        assert {t.status for t in board.tasks} == {TaskStatus.SUCCEEDED}
    finally:
        asyncio.run(_removed(store))


def test_blob_store_from_threads_each_calling_asyncio_run_per_request(request: pytest.FixtureRequest) -> None:
    """Every thread uploads, downloads and deletes blobs through one S3 store, a loop per request (the first
    requests of every thread connect at once): every blob kept is there, exactly."""
    from ravi.capabilities.s3 import S3FileStore

    server: Server = request.getfixturevalue("s3_server")
    assert server.credentials is not None
    access, secret = server.credentials
    store = S3FileStore(
        f"t-{uuid.uuid4().hex[:20]}", endpoint_url=server.address, access_key=access, secret_key=secret,
        addressing_style="path", create_bucket=True,
    )  # fmt: skip
    requests = 6

    async def work(thread: int, k: int) -> None:
        data = f"thread{thread} blob {k}".encode() * (k + 1)
        await store.upload(f"t{thread}/b{k}", data)
        assert (await store.download(f"t{thread}/b{k}")).data == data
        await store.upload(f"t{thread}/gone{k}", b"x")
        assert await store.delete(f"t{thread}/gone{k}")

    try:
        run_threads(per_request(requests, work))

        async def check() -> None:
            for t in range(THREADS):
                for k in range(requests):
                    assert (await store.download(f"t{t}/b{k}")).data == f"thread{t} blob {k}".encode() * (k + 1)

        asyncio.run(check())
    finally:

        async def remove() -> None:
            await store.destroy()
            await store.disconnect()

        asyncio.run(remove())


def test_graph_store_from_threads_each_calling_asyncio_run_per_request(request: pytest.FixtureRequest) -> None:
    """Every thread adds entities and edges to one AGE graph and reads them back, a loop per request: every one
    lands once."""
    from ravi.capabilities.age import AGEGraphStore
    from ravi.kernel.errors import ConfigurationError
    from ravi.kernel.storage import Entity, Relationship

    dsn: str = request.getfixturevalue("age_dsn")
    store = AGEGraphStore(dsn, graph=f"g_{uuid.uuid4().hex[:16]}")
    try:
        asyncio.run(store.get_entity("probe"))
    except ConfigurationError as error:
        asyncio.run(store.close())
        pytest.skip(f"the test server has no Apache AGE ({error})")
    requests = 5

    async def work(thread: int, k: int) -> None:
        here, there = Entity(id=f"t{thread}-e{k}", label="Note"), Entity(id=f"hub{k}", label="Hub")
        await store.add_entities([here, there])
        await store.add_relationships(
            [Relationship(id=f"t{thread}-r{k}", source_id=here.id, target_id=there.id, type="ABOUT")]
        )
        assert await store.get_entity(here.id) is not None
        await store.get_neighbors(there.id)

    try:
        run_threads(per_request(requests, work))

        async def check() -> None:
            for t in range(THREADS):
                for k in range(requests):
                    assert await store.get_entity(f"t{t}-e{k}") is not None
            rows = await store.query_cypher("MATCH (n:Hub) RETURN count(n) AS n")
            assert rows and next(iter(rows[0].values())) == requests

        asyncio.run(check())
    finally:
        asyncio.run(_removed(store))


def test_hybrid_history_over_redis_and_postgres_from_threads_each_running_a_loop(
    request: pytest.FixtureRequest,
) -> None:
    """Threads, each on a loop of its own, append to one session of a hybrid provider (Redis in front of
    Postgres) and read it back through it, by windows, whole and by search, and one of them clears another
    session meanwhile: no call raises, each tier holds every message once, each thread's in its order, and the
    hot tier holds exactly the cold tier's messages in its order, with its run ids (before, 26 to 66 of the
    180 positions differed)."""
    from ravi.agents.context.hybrid import HybridHistoryProvider

    hot = RedisHistoryProvider(_redis(request), prefix=_prefix())
    cold = PostgresHistoryProvider(_pg(request), schema=_schema())
    history = HybridHistoryProvider(hot, cold)
    rounds = 15

    async def work(thread: int) -> None:
        for k in range(rounds):
            batch = [message(thread, 2 * k), message(thread, 2 * k + 1)]
            await history.append_many(AGENT, batch, session_id="s", run_id=f"run-{thread}")
            window = await history.read_window(AGENT, session_id="s", tokens=150)
            ids = [m.id for m in window.messages]
            assert len(set(ids)) == len(ids), "a message twice in a window"
            whole = await history.get_messages(AGENT, session_id="s")
            assert {m.id for m in batch} <= {m.id for m in whole}
            await history.search_units(AGENT, session_id="s", query=WORDS[k % len(WORDS)], before=10**6, limit=3)
            if thread == 0 and k % 4 == 3:
                await history.append(AGENT, message(thread, 1000 + k), session_id="other")
                await history.clear(AGENT, session_id="other")

    try:
        run_threads(one_loop(work))

        async def check() -> None:
            expected = [[message(t, k) for k in range(2 * rounds)] for t in range(THREADS)]
            assert_holds_exactly(await cold.get_messages(AGENT, session_id="s"), expected)
            assert_holds_exactly(await hot.get_messages(AGENT, session_id="s"), expected)
            hot_stored, cold_stored = (
                await hot.get_stored(AGENT, session_id="s"),
                await cold.get_stored(AGENT, session_id="s"),
            )
            differ = [i for i, (a, b) in enumerate(zip(hot_stored, cold_stored, strict=True)) if a != b]
            assert not differ, f"{len(differ)} of {len(cold_stored)} positions differ between the tiers"
            assert await history.get_messages(AGENT, session_id="s") == [s.message for s in cold_stored]
            assert await history.get_messages(AGENT, session_id="other") == []

        asyncio.run(check())
    finally:

        async def remove() -> None:
            for store in (hot, cold):
                await store.destroy()
            await history.aclose()

        asyncio.run(remove())


def test_langchain_chat_history_over_postgres_from_many_threads(request: pytest.FixtureRequest) -> None:
    """LangChain's synchronous methods of one chat history over Postgres, called from many threads at once
    (they all run on the integration's one background loop): every add lands once, each thread's in its order,
    and every read is whole."""
    from langchain_core.messages import AIMessage, HumanMessage

    from ravi.integrations.langchain import RaviChatMessageHistory
    from ravi.integrations.langchain._loop import run as loop_run

    provider = PostgresHistoryProvider(_pg(request), schema=_schema())
    chat = RaviChatMessageHistory(provider, session_id="s")
    rounds = 10

    def work(thread: int) -> None:
        for k in range(rounds):
            chat.add_messages([HumanMessage(f"t{thread} q{k}"), AIMessage(f"t{thread} a{k}")])
            texts = [str(m.content) for m in chat.messages]
            assert f"t{thread} a{k}" in texts

    try:
        run_threads(work)
        texts = [str(m.content) for m in chat.messages]
        assert len(texts) == 2 * THREADS * rounds
        for thread in range(THREADS):
            mine = [t for t in texts if t.startswith(f"t{thread} ")]
            assert mine == [f"t{thread} {kind}{k}" for k in range(rounds) for kind in ("q", "a")]
        chat.clear()
        assert chat.messages == []
    finally:

        async def remove() -> None:
            await provider.destroy()
            await provider.aclose()

        loop_run(remove())  # the pool is the background loop's: close it there


def test_postgres_history_caches_kept_and_dropped_from_threads_at_once() -> None:
    """The parsed copies a Postgres history provider keeps (its sessions, last windows and searched messages,
    each an ``Lru`` by session) are kept by reads and dropped by removals of every thread at once, as the
    provider's calls on several loops do between their round trips: none of those steps raises, and the cache
    never holds more than its size."""
    from ravi.capabilities.postgres._cache import Lru

    cache: Lru[int] = Lru(3)
    rounds = 20_000

    async def work(thread: int) -> None:
        for k in range(rounds):
            key = (AGENT, f"s{(thread + k) % 5}")
            cache.keep(key, k)
            if k % 3 == 0:
                cache.pop((AGENT, f"s{(thread + k + 1) % 5}"))
            if k % 7 == 0:
                cache.drop(AGENT, f"s{k % 5}")
            cache.get(key)
            cache.values()

    run_threads(one_loop(work))
    assert len(cache) <= cache.size


def test_history_caches_from_threads_reading_and_clearing_one_session(history: Any) -> None:
    """Threads, each on a loop of its own, read one session (whole and by windows), append to it and clear it
    in a tight loop, with room for one session in the provider's caches: every read keeps a copy while other
    threads drop it, and no step raises."""
    rounds = 150
    history._cache_size = 1
    for name in ("_cache", "_windows", "_parsed"):
        cache = getattr(history, name, None)
        if cache is not None and hasattr(cache, "size"):
            cache.size = 1

    async def work(thread: int) -> None:
        for k in range(rounds):
            session = "s" if k % 4 else f"s{thread}"
            await history.append(AGENT, message(thread, k), session_id=session, run_id=f"run-{thread}")
            await history.get_messages(AGENT, session_id=session)
            await history.read_window(AGENT, session_id=session, tokens=60)
            if k % 5 == thread % 5:
                await history.clear(AGENT, session_id="s")
            if k % 11 == 0:
                await history.forget(AGENT, session_id=f"s{thread}")

    run_threads(one_loop(work))


def test_postgres_search_by_meaning_first_used_from_threads_at_once(request: pytest.FixtureRequest) -> None:
    """The first searches by meaning of a new Postgres history provider come from every thread at once (each
    sets up the embeddings tables on first use): every one finds by meaning, and so does the next one; recall by
    meaning is never turned off because another thread was setting it up."""
    history = PostgresHistoryProvider(_pg(request), schema=_schema())
    embedder = WordEmbedder()

    async def seed() -> None:
        await history.append_many(AGENT, [message(t, k) for t in range(THREADS) for k in range(4)], session_id="s")

    async def work(thread: int) -> None:
        found = await history.search_hybrid(
            AGENT, session_id="s", query=f"thread{thread} note", before=10**6, limit=3, embedder=embedder,
            model="words",
        )  # fmt: skip
        assert found.meaning, "no match by meaning"

    try:
        asyncio.run(seed())
        run_threads(one_loop(work))
        run_threads(one_loop(work))
    finally:
        asyncio.run(_removed(history))


def test_postgres_stores_first_used_from_threads_at_once(request: pytest.FixtureRequest) -> None:
    """New Postgres stores (history, state, tasks, long-term memory, vectors, and an AGE graph when the server
    has Apache AGE), each first used by every thread at once, each thread on its own loop: each migrates and
    prepares once, and every first call succeeds."""
    from ravi.capabilities.age import AGEGraphStore
    from ravi.capabilities.postgres import PgLongTermMemory, PgTaskStore, PgVectorStore, PostgresMemoryStore
    from ravi.kernel.storage import Document, Entity

    dsn, schema = _pg(request), _schema()
    embedder = WordEmbedder()
    history = PostgresHistoryProvider(dsn, schema=schema)
    state = PostgresMemoryStore(dsn, schema=schema)
    tasks = PgTaskStore(dsn, schema=schema)
    memory = PgLongTermMemory(dsn, schema=schema, embedding_client=embedder)
    vectors = PgVectorStore(dsn, schema=schema, embedding_client=embedder)
    graph = AGEGraphStore(request.getfixturevalue("age_dsn"), graph=f"g_{uuid.uuid4().hex[:16]}")
    age = [True]

    async def work(thread: int) -> None:
        await history.append(AGENT, message(thread, 0), session_id="s")
        await state.update_state("s", {f"t{thread}": thread})
        await tasks.add_tasks("c", "a", [f"thread{thread}"])
        await memory.save("a", f"thread{thread} {WORDS[thread]}")
        await vectors.add([Document(id=f"t{thread}", content=WORDS[thread])], collection="c")
        if age[0]:
            await graph.add_entities([Entity(id=f"t{thread}")])

    async def has_age() -> bool:
        from ravi.kernel.errors import ConfigurationError

        probe = AGEGraphStore(request.getfixturevalue("age_dsn"), graph=f"g_{uuid.uuid4().hex[:16]}")
        try:
            await probe.get_entity("probe")
        except ConfigurationError:
            return False
        finally:
            await probe.close()
        return True

    try:
        age[0] = asyncio.run(has_age())
        run_threads(one_loop(work))

        async def check() -> None:
            assert len(await history.get_messages(AGENT, session_id="s")) == THREADS
            assert await state.get_state("s") == {f"t{t}": t for t in range(THREADS)}
            board = await tasks.get_task_list("c", "a")
            assert board is not None and len(board.tasks) == THREADS
            assert len(await vectors.get([f"t{t}" for t in range(THREADS)], collection="c")) == THREADS
            if age[0]:
                assert all([await graph.get_entity(f"t{t}") for t in range(THREADS)])

        asyncio.run(check())
    finally:

        async def remove() -> None:
            if age[0]:
                await graph.destroy()
            await graph.close()
            await history.destroy()
            for store in (history, state, tasks, memory, vectors):
                await store.close()

        asyncio.run(remove())


def test_postgres_hybrid_search_with_the_offline_embedder_from_threads(request: pytest.FixtureRequest) -> None:
    """Threads, each on its own loop, meet before each of several new sessions, append a message to it and search
    it at once by words and by meaning with the offline embedder (one model shared by every thread), so every
    first embedding of a session races the others': each search finds its own message by meaning, and every
    message stays embedded."""
    from ravi.agents.embeddings import offline_embedding_client

    embedder = offline_embedding_client()
    if embedder is None:
        pytest.skip("the offline embedder is not installed (the ravi-agents 'embeddings' extra)")
    history = PostgresHistoryProvider(_pg(request), schema=_schema())
    sessions = 12
    together = threading.Barrier(THREADS)

    async def work(thread: int) -> None:
        try:
            for k in range(sessions):
                together.wait()  # every thread finds session k new
                mine = message(thread, k)
                await history.append(AGENT, mine, session_id=f"s{k}", run_id=f"run-{thread}")
                found = await history.search_hybrid(
                    AGENT, session_id=f"s{k}", query=mine.text or "", before=10**6, limit=THREADS,
                    embedder=embedder, model="static",
                )  # fmt: skip
                ids = {m.id for unit in found.meaning for m in unit.messages}
                assert mine.id in ids, f"a message just appended is not found by its own text: {sorted(ids)}"
        except BaseException:
            together.abort()
            raise

    try:
        run_threads(one_loop(work))

        async def check() -> None:
            for k in range(sessions):
                rows = await history.db.fetch(
                    f"SELECT message_id FROM {history.db.table('embeddings')} WHERE agent_id = $1 AND session_id = $2",
                    AGENT,
                    f"s{k}",
                )
                assert sorted(r["message_id"] for r in rows) == sorted(message(t, k).id for t in range(THREADS))

        asyncio.run(check())
    finally:
        asyncio.run(_removed(history))


def test_vector_collections_created_from_threads_at_once(request: pytest.FixtureRequest) -> None:
    """Threads, each on its own loop, meet before each of several new collections of one pgvector store and add a
    document to it at once (each creating the collection): every add succeeds and every document is there."""
    from ravi.capabilities.postgres import PgVectorStore
    from ravi.kernel.storage import Document

    embedder = WordEmbedder()
    vectors = PgVectorStore(_pg(request), schema=_schema(), embedding_client=embedder)
    collections = 30
    together = threading.Barrier(THREADS)

    async def work(thread: int) -> None:
        try:
            for k in range(collections):
                together.wait()  # every thread finds collection k missing
                await vectors.add([Document(id=f"t{thread}", content=WORDS[thread])], collection=f"c{k}")
        except BaseException:
            together.abort()
            raise

    try:
        asyncio.run(vectors.list_collections())  # migrated before the threads start: the race is the collection's
        run_threads(one_loop(work))

        async def check() -> None:
            for k in range(collections):
                found = await vectors.get([f"t{t}" for t in range(THREADS)], collection=f"c{k}")
                assert len(found) == THREADS

        asyncio.run(check())
    finally:
        asyncio.run(_removed(vectors))


def test_stores_of_several_schemas_first_used_from_threads_on_a_new_database(request: pytest.FixtureRequest) -> None:
    """On a database without pgvector yet, stores of different schemas that each create the extension (vectors,
    long-term memory, the history's search by meaning) are first used by threads at once: each creates it or
    finds it, and every first call succeeds."""
    import asyncpg

    from ravi.capabilities.postgres import PgLongTermMemory, PgVectorStore
    from ravi.kernel.storage import Document

    server: Server = request.getfixturevalue("postgres_server")
    name = f"d_{uuid.uuid4().hex[:16]}"

    async def database(sql: str) -> None:
        connection = await asyncpg.connect(server.address, timeout=10)
        try:
            await connection.execute(sql)
        finally:
            await connection.close()

    asyncio.run(database(f'CREATE DATABASE "{name}"'))
    dsn = server.address.rsplit("/", 1)[0] + "/" + name
    embedder = WordEmbedder()
    stores: list[Any] = []
    for i in range(2):
        stores += [
            PgVectorStore(dsn, schema=f"v{i}", embedding_client=embedder),
            PgLongTermMemory(dsn, schema=f"m{i}", embedding_client=embedder),
            PostgresHistoryProvider(dsn, schema=f"h{i}"),
        ]

    async def work(thread: int) -> None:
        store = stores[thread % len(stores)]
        if isinstance(store, PgVectorStore):
            await store.add([Document(id=f"t{thread}", content=WORDS[thread])], collection="c")
        elif isinstance(store, PgLongTermMemory):
            await store.save("a", WORDS[thread])
        else:
            await store.append(AGENT, message(thread, 0), session_id="s")
            found = await store.search_hybrid(
                AGENT, session_id="s", query=WORDS[thread], before=10, limit=2, embedder=embedder, model="words"
            )
            assert found.meaning, "recall by meaning is off"

    try:
        run_threads(one_loop(work))
    finally:

        async def remove() -> None:
            for store in stores:
                await store.close()
            await database(f'DROP DATABASE "{name}" WITH (FORCE)')

        asyncio.run(remove())
