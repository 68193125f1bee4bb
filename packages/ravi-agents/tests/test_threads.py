"""Every in-memory store of ravi-agents can be shared by threads that each run their own event loop.

Several threads, started together behind a barrier, each run ``asyncio.run`` over hundreds of calls on the same
scope of one store (some with tasks gathered inside the loop as well), while the interpreter switches threads as
often as it can. The tests prove that no exception escapes a public call, that no write is lost, and that what
the store gives back afterwards is exactly what was written: every id once, each thread's messages in the order
it appended them, windowed reads that hold exactly the newest messages that fit, searches that find what a
store written by one thread finds.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from ravi.agents.context import InMemoryHistoryProvider
from ravi.agents.storage import (
    InMemoryFileStore,
    InMemoryGraphStore,
    InMemoryLongTermMemory,
    InMemoryStateStore,
    InMemorySummaryStore,
    InMemoryVectorStore,
    TaskStore,
)
from ravi.conformance import threads
from ravi.conformance.threads import assert_holds_exactly, switching_often
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.search import UnitMatch
from ravi.kernel.storage import Document, Entity, HistoryWindow, Relationship, Task, TaskStatus, window_of
from ravi.kernel.tokens import stored_tokens

THREADS = 6
"""How many threads, each with its own event loop, share a store."""

AGENT = "agent"
WHEN = datetime(2025, 1, 1, tzinfo=UTC)
WORDS = ("invoice", "refund", "shipping", "password", "latency", "schema", "billing", "outage", "upgrade", "quota")


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    """Make the interpreter switch threads every microsecond, so races show up in every run."""
    with switching_often():
        yield


def run_threads(work: Callable[[int], Awaitable[object]]) -> None:
    """Run ``work(i)`` under ``asyncio.run`` in each of :data:`THREADS` threads at once (each its own loop); fail
    with what any of them raised, or when one never finishes."""
    threads.run_threads(lambda i: asyncio.run(work(i)), THREADS)


class WordEmbedder:
    """A deterministic ``EmbeddingClient``: each word hashed into one of a few buckets; ``embed`` yields once."""

    dimension = 16

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimension
            for word in text.lower().split():
                vector[zlib.crc32(word.encode()) % self.dimension] += 1.0
            vectors.append(vector)
        return vectors


# -- the history provider ---------------------------------------------------------------------------------------


def message(thread: int, k: int, kind: str = "m") -> ChatMessage:
    """Thread ``thread``'s ``k``-th message: mostly user and assistant turns, now and then a system message."""
    text = f"thread{thread} note {k} about {WORDS[(3 * thread + k) % len(WORDS)]}" + " detail" * (k % 7)
    make = ChatMessage.system if k % 17 == 5 else ChatMessage.user if k % 2 else ChatMessage.assistant
    return make(text, id=f"t{thread}-{kind}{k}", created_at=WHEN)


SEED = message(THREADS, 0)
"""What a session holds before the threads start (so that they do not race to create it): no thread writes as
its writer, ``run-<THREADS>``."""


def run_of(stored: ChatMessage) -> str:
    """The run id each thread writes with: ``run-<thread>``."""
    return "run-" + stored.id[1 : stored.id.index("-")]


async def check_session(
    history: InMemoryHistoryProvider, session_id: str, expected: Sequence[Sequence[ChatMessage]]
) -> list[ChatMessage]:
    """Every read of the session agrees with ``expected``; returns the transcript."""
    stored = await history.get_stored(AGENT, session_id=session_id)
    messages = [s.message for s in stored]
    assert_holds_exactly(messages, expected)
    assert [s.run_id for s in stored] == [run_of(m) for m in messages]
    assert await history.get_messages(AGENT, session_id=session_id) == messages
    assert await history.count_messages(AGENT, session_id=session_id) == len(messages)
    generation = await history.generation(AGENT, session_id=session_id)
    total = sum(map(stored_tokens, messages))
    for tokens in sorted({0, 1, 7, 40, 150, 600, total // 2, max(0, total - 1), total, total + 1}):
        window = await history.read_window(AGENT, session_id=session_id, tokens=tokens)
        assert window == window_of(messages, tokens, generation), f"the window of {tokens} tokens"
    return messages


def test_history_appends_from_every_thread_to_new_sessions_all_land() -> None:
    """Every thread appends to the same new sessions at once (``append``, then ``append_many``), the threads
    meeting before each session: creating a session twice must not drop one thread's messages."""
    history = InMemoryHistoryProvider()
    sessions, each = 100, 6
    together = threading.Barrier(THREADS)

    async def work(thread: int) -> None:
        try:
            for s in range(sessions):
                batch = [message(thread, s * each + k) for k in range(each)]
                together.wait()  # every thread finds session s missing
                await history.append(AGENT, batch[0], session_id=f"s{s}", run_id=f"run-{thread}")
                await history.append_many(AGENT, batch[1:], session_id=f"s{s}", run_id=f"run-{thread}")
        except BaseException:
            together.abort()  # the other threads stop waiting for this one
            raise

    run_threads(work)

    async def check() -> None:
        for s in range(sessions):
            expected = [[message(t, s * each + k) for k in range(each)] for t in range(THREADS)]
            await check_session(history, f"s{s}", expected)
        assert await history.list_sessions(AGENT, limit=1000) == sorted(f"s{s}" for s in range(sessions))

    asyncio.run(check())


def test_history_reads_and_searches_while_other_threads_append() -> None:
    """Each thread appends to one session and reads it between appends (pages, windows, searches by words and
    by meaning): no read raises, each is a consistent picture of the session as it stood, and afterwards the
    session's search index answers as one built by a single thread does."""
    history = InMemoryHistoryProvider()
    embedder = WordEmbedder()
    steps = 200
    windows: list[tuple[int, HistoryWindow]] = []
    matches: list[UnitMatch] = []
    asyncio.run(history.append(AGENT, SEED, session_id="s", run_id=run_of(SEED)))

    async def search(provider: InMemoryHistoryProvider, query: str, before: int, limit: int) -> list[UnitMatch]:
        """The units a search by words finds, then those a hybrid search finds by words and by meaning."""
        units = await provider.search_units(AGENT, session_id="s", query=query, before=before, limit=limit)
        found = await provider.search_hybrid(
            AGENT, session_id="s", query=query, before=before, limit=limit, spread=0.5, embedder=embedder, model="w"
        )
        return [*units, *found.lexical, *found.meaning]

    async def work(thread: int) -> None:
        run = f"run-{thread}"
        for k in range(steps):
            await history.append(AGENT, message(thread, k), session_id="s", run_id=run)
            match k % 4:
                case 0:
                    tokens = 20 + 37 * (k % 9)
                    windows.append((tokens, await history.read_window(AGENT, session_id="s", tokens=tokens)))
                case 1:
                    stored = await history.get_stored(AGENT, session_id="s")
                    assert all(s.run_id == run_of(s.message) for s in stored), "a message under another's run"
                    mine = [s.message for s in stored if s.run_id == run]
                    assert mine == [message(thread, i) for i in range(k + 1)], "own messages lost or reordered"
                case 2:
                    matches.extend(await search(history, f"{WORDS[k % len(WORDS)]} note", 2**40, 5))
                case _:
                    assert await history.count_messages(AGENT, session_id="s") >= k + 1

    run_threads(work)

    async def check() -> None:
        expected = [[message(t, k) for k in range(steps)] for t in range(THREADS)]
        messages = await check_session(history, "s", [*expected, [SEED]])
        generation = await history.generation(AGENT, session_id="s")
        position = {m.id: i for i, m in enumerate(messages)}
        for tokens, window in windows:  # each window: the one of the session as it stood when it was read
            end = position[window.messages[-1].id] + 1
            assert window == window_of(messages[:end], tokens, generation)
        offsets = [0]
        for m in messages:
            offsets.append(offsets[-1] + stored_tokens(m))
        for unit in matches:  # each unit as stored, at its offset, after its system message
            at = position[unit.messages[0].id]
            assert list(unit.messages) == messages[at : at + len(unit.messages)]
            assert unit.offset == offsets[at]
            systems = [m.id for m in messages[:at] if m.role == "system"]
            assert unit.after_system == (systems[-1] if systems else None)
        alone = InMemoryHistoryProvider()  # the same session written by one thread
        for m in messages:
            await alone.append(AGENT, m, session_id="s", run_id=run_of(m))
        for word in WORDS:
            for before in (offsets[len(offsets) // 3], 2**40):
                query = f"{word} thread3 detail"
                assert await search(history, query, before, 8) == await search(alone, query, before, 8)

    asyncio.run(check())


def test_history_clear_run_and_replace_last_while_other_threads_append() -> None:
    """Each thread appends under its own run, now and then replaces its newest message (``replace_last``) or
    removes its run (``clear_run``): nothing another thread appended meanwhile is lost, and ``clear_run`` counts
    exactly the thread's own messages."""
    history = InMemoryHistoryProvider()
    steps = 240
    kept: list[list[ChatMessage]] = [[] for _ in range(THREADS)]
    asyncio.run(history.append(AGENT, SEED, session_id="s", run_id=run_of(SEED)))

    async def work(thread: int) -> None:
        run, mine = f"run-{thread}", kept[thread]
        for k in range(steps):
            new = message(thread, k)
            await history.append(AGENT, new, session_id="s", run_id=run)
            mine.append(new)
            if k % 7 == 6:
                instead = message(thread, k, "r")
                if await history.replace_last(AGENT, session_id="s", message_id=new.id, messages=[instead], run_id=run):
                    mine[-1] = instead
            if k % 40 == 39:
                removed = await history.clear_run(AGENT, session_id="s", run_id=run)
                assert removed == len(mine), f"clear_run removed {removed} of the run's {len(mine)} messages"
                mine.clear()

    run_threads(work)
    asyncio.run(check_session(history, "s", [*kept, [SEED]]))


def test_history_clear_while_other_threads_append() -> None:
    """Threads append to one session and now and then clear it: every message appended is either counted by
    exactly one ``clear`` or still held, each thread's remaining messages in their order."""
    history = InMemoryHistoryProvider()
    steps = 400
    cleared: list[int] = []
    appended: list[list[ChatMessage]] = [[] for _ in range(THREADS)]
    asyncio.run(history.append(AGENT, SEED, session_id="s", run_id=run_of(SEED)))

    async def work(thread: int) -> None:
        for k in range(steps):
            new = message(thread, k)
            await history.append(AGENT, new, session_id="s", run_id=f"run-{thread}")
            appended[thread].append(new)
            if k % 10 == 9:
                cleared.append(await history.clear(AGENT, session_id="s"))

    run_threads(work)

    async def check() -> None:
        messages = await history.get_messages(AGENT, session_id="s")
        assert sum(cleared) + len(messages) == THREADS * steps + 1, "messages neither cleared nor held"
        held = {m.id for m in messages}
        await check_session(history, "s", [[m for m in own if m.id in held] for own in [*appended, [SEED]]])

    asyncio.run(check())


def test_history_searches_by_meaning_from_threads_with_clients_of_other_dimensions_under_one_model() -> None:
    """Two threads search by meaning under one model name with clients of different dimensions, embedding the
    session's messages at once, the second with one more message appended meanwhile; the first stores its rows
    first. The second search is refused with ``InvalidArgument``, never a NumPy error, and the first is not."""
    history = InMemoryHistoryProvider()
    asyncio.run(history.append_many(AGENT, [message(0, k) for k in range(20)], session_id="s"))
    first_inside, first_done = threading.Event(), threading.Event()
    both = threading.Barrier(2, timeout=30)
    outcomes: dict[int, str] = {}

    class Sized(WordEmbedder):
        def __init__(self, thread: int) -> None:
            self.thread, self.dimension, self.waited = thread, 8 * (thread + 1), False

        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if not self.waited:  # both threads embed the messages before either stores its rows
                self.waited = True
                if self.thread == 0:
                    first_inside.set()
                both.wait()
                if self.thread == 1:
                    assert first_done.wait(30)
            return await super().embed(texts)

    async def work(thread: int) -> None:
        if thread == 1:
            assert first_inside.wait(30)
            await history.append(AGENT, message(1, 0), session_id="s")
        try:
            await history.search_hybrid(
                AGENT, session_id="s", query="refund", before=2**40, limit=3, embedder=Sized(thread), model="w"
            )
            outcomes[thread] = "found"
        except InvalidArgument:
            outcomes[thread] = "refused"
        finally:
            if thread == 0:
                first_done.set()

    threads.run_threads(lambda i: asyncio.run(work(i)), 2)
    assert outcomes == {0: "found", 1: "refused"}


def test_history_summaries_and_listing_while_other_threads_write() -> None:
    """Threads keep summaries of one session under its generation, and of sessions of their own without one,
    which they clear again, while listing the agent's sessions: no call raises, every summary of the shared
    session is kept, and every other one is either counted by a ``clear_summaries`` or still there."""
    history = InMemoryHistoryProvider()
    steps = 200
    cleared: list[int] = []

    async def work(thread: int) -> None:
        await history.append(AGENT, message(thread, 0), session_id="shared", run_id=f"run-{thread}")
        generation = await history.generation(AGENT, session_id="shared")
        shared, own = Scope(AGENT, "shared", generation), Scope(AGENT, f"t{thread}-own")
        for k in range(steps):
            assert await history.put_summary(shared, f"t{thread}-span{k}", f"summary {thread}/{k}")
            assert await history.get_summary(shared, f"t{thread}-span{k}") == f"summary {thread}/{k}"
            assert await history.put_summary(own, f"span{k}", f"own {thread}/{k}")
            await history.append(AGENT, message(thread, k + 1), session_id=f"t{thread}-s{k}", run_id=f"run-{thread}")
            if k % 10 == 9:
                cleared.append(await history.clear_summaries(AGENT, session_id=f"t{thread}-own"))
            if k % 10 == 4:
                listed = await history.list_sessions(AGENT, limit=10_000)
                assert "shared" in listed and listed == sorted(set(listed))

    run_threads(work)

    async def check() -> None:
        generation = await history.generation(AGENT, session_id="shared")
        for thread in range(THREADS):
            for k in range(steps):
                text = await history.get_summary(Scope(AGENT, "shared", generation), f"t{thread}-span{k}")
                assert text == f"summary {thread}/{k}"
        left = 0
        for thread in range(THREADS):
            for k in range(steps):
                left += await history.get_summary(Scope(AGENT, f"t{thread}-own"), f"span{k}") is not None
        assert sum(cleared) + left == THREADS * steps, "summaries neither cleared nor kept"
        expected_sessions = {"shared"} | {f"t{t}-s{k}" for t in range(THREADS) for k in range(steps)}
        assert await history.list_sessions(AGENT, limit=10_000) == sorted(expected_sessions)

    asyncio.run(check())


# -- the task store -----------------------------------------------------------------------------------------------


def test_task_store_takes_every_threads_tasks_through_their_lifecycle() -> None:
    """Every thread adds tasks to one board and moves each through its lifecycle, many tasks at once within its
    loop, and starts, works and settles a board of its own: no move raises or is lost."""
    store = TaskStore()
    each = 40

    done, running = TaskStatus.SUCCEEDED, TaskStatus.IN_PROGRESS
    ends = [(done, 0), (done, 1), (done, 0), (running, 0)]
    """Where task ``k`` ends (``ends[k % 4]``), and its retry count: see ``lifecycle``."""

    async def move(task_id: str, status: TaskStatus) -> None:
        moved = await store.update_status("shared", AGENT, task_id, status)
        assert (moved.id, moved.status) == (task_id, status)
        await asyncio.sleep(0)  # let the loop's other tasks move theirs

    async def lifecycle(thread: int, k: int) -> None:
        task_id = f"t{thread}-task{k}"
        board = await store.add_tasks("shared", AGENT, [Task(id=task_id, title=f"step {k}", max_retries=1)])
        assert board.task(task_id) is not None
        await asyncio.sleep(0)
        await move(task_id, TaskStatus.IN_PROGRESS)
        if k % 4 == 1:  # fails once, is retried, succeeds
            await move(task_id, TaskStatus.FAILED)
            assert (await store.increment_retry("shared", AGENT, task_id)).retry_count == 1
        elif k % 4 == 2:  # is blocked, planned again, runs
            await move(task_id, TaskStatus.BLOCKED)
            await move(task_id, TaskStatus.PLANNED)
            await move(task_id, TaskStatus.IN_PROGRESS)
        elif k % 4 == 3:  # fails past its retries, is abandoned, is forced to run again
            await move(task_id, TaskStatus.FAILED)
            assert (await store.increment_retry("shared", AGENT, task_id)).retry_count == 1
            await move(task_id, TaskStatus.FAILED)
            assert (await store.increment_retry("shared", AGENT, task_id)).status is TaskStatus.ABANDONED
            assert (await store.force_retry("shared", AGENT, task_id)).status is TaskStatus.IN_PROGRESS
            return
        await move(task_id, TaskStatus.SUCCEEDED)

    async def own_board(thread: int) -> None:
        board = await store.create_task_list(f"own-{thread}", AGENT, [f"part {i}" for i in range(5)])
        for task in board.tasks:
            await store.update_status(f"own-{thread}", AGENT, task.id, TaskStatus.IN_PROGRESS)
            await asyncio.sleep(0)
        [settled] = await store.settle_conversation(f"own-{thread}")
        assert [t.status for t in settled.tasks] == [TaskStatus.SUCCEEDED] * 5

    async def work(thread: int) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(own_board(thread))
            for k in range(each):
                group.create_task(lifecycle(thread, k))

    run_threads(work)

    async def check() -> None:
        board = await store.get_task_list("shared", AGENT)
        assert board is not None
        ids = [t.id for t in board.tasks]
        assert len(set(ids)) == len(ids), "a task is on the board twice"
        assert sorted(ids) == sorted(f"t{t}-task{k}" for t in range(THREADS) for k in range(each)), "tasks lost"
        for task in board.tasks:
            k = int(task.id.rsplit("task", 1)[1])
            assert (task.status, task.retry_count) == ends[k % 4], f"a move of {task.id} was lost"
        for thread in range(THREADS):
            own = await store.get_task_list(f"own-{thread}", AGENT)
            assert own is not None and [t.status for t in own.tasks] == [TaskStatus.SUCCEEDED] * 5

    asyncio.run(check())


# -- the other stores ---------------------------------------------------------------------------------------------


def test_state_store_keeps_every_threads_keys() -> None:
    """Every thread merges keys of its own into one session's state: no key is lost."""
    store = InMemoryStateStore()
    steps = 150

    async def work(thread: int) -> None:
        for k in range(steps):
            merged = await store.update_state("s", {f"t{thread}-k{k}": [thread, k]})
            assert merged[f"t{thread}-k{k}"] == [thread, k]
            if k % 10 == 0:
                state = await store.get_state("s")
                assert all(state.get(f"t{thread}-k{i}") == [thread, i] for i in range(k + 1)), "own keys lost"

    run_threads(work)
    state = asyncio.run(store.get_state("s"))
    assert state == {f"t{t}-k{k}": [t, k] for t in range(THREADS) for k in range(steps)}


def test_summary_store_keeps_every_threads_summaries() -> None:
    """Every thread keeps summaries in one scope, and in a scope of its own that it clears again: every summary of
    the shared scope is kept, and every other one is either counted by a ``clear_summaries`` or still there."""
    store = InMemorySummaryStore()
    steps = 300
    shared = Scope(AGENT, "shared", "g1")
    cleared: list[int] = []

    async def work(thread: int) -> None:
        own = Scope(AGENT, f"own-{thread}", "g1")
        for k in range(steps):
            assert await store.put_summary(shared, f"t{thread}-span{k}", f"summary {thread}/{k}")
            assert await store.get_summary(shared, f"t{thread}-span{k}") == f"summary {thread}/{k}"
            assert await store.put_summary(own, f"span{k}", "own")
            if k % 10 == 9:
                cleared.append(await store.clear_summaries(AGENT, session_id=f"own-{thread}"))

    run_threads(work)

    async def check() -> None:
        for thread in range(THREADS):
            for k in range(steps):
                assert await store.get_summary(shared, f"t{thread}-span{k}") == f"summary {thread}/{k}"
        left = [
            await store.get_summary(Scope(AGENT, f"own-{t}", "g1"), f"span{k}")
            for t in range(THREADS)
            for k in range(steps)
        ]
        assert sum(cleared) + sum(text is not None for text in left) == THREADS * steps
        assert await store.clear_summaries(AGENT, session_id="shared") == THREADS * steps

    asyncio.run(check())


def test_file_store_keeps_every_threads_blobs() -> None:
    """Every thread uploads, reads and deletes blobs under one session's prefix, and forgets a session of its
    own now and then: every blob kept downloads as uploaded, every deleted one is gone."""
    store = InMemoryFileStore()
    steps = 300

    def kept(k: int) -> bool:
        return k % 5 != 3

    async def work(thread: int) -> None:
        for k in range(steps):
            key = f"{AGENT}/shared/t{thread}-k{k}"
            data = f"{thread}/{k}".encode()
            assert await store.upload(key, data, metadata={"thread": str(thread)}) == key
            assert (await store.download(key)).data == data
            await store.upload(f"{AGENT}/own-{thread}/k{k}", b"scratch")
            if not kept(k):
                assert await store.delete(key)
            if k % 10 == 9:
                assert await store.forget(AGENT, session_id=f"own-{thread}") == 10

    run_threads(work)

    async def check() -> None:
        for thread in range(THREADS):
            for k in range(steps):
                key = f"{AGENT}/shared/t{thread}-k{k}"
                if kept(k):
                    blob = await store.download(key)
                    assert (blob.data, blob.metadata) == (f"{thread}/{k}".encode(), {"thread": str(thread)})
                else:
                    with pytest.raises(NotFound):
                        await store.download(key)
        assert await store.forget(AGENT, session_id="shared") == THREADS * sum(map(kept, range(steps)))

    asyncio.run(check())


def test_graph_store_keeps_every_threads_entities_and_relationships() -> None:
    """Every thread adds entities joined to one shared hub, reads their neighbourhoods, and forgets a session of
    its own now and then: the hub ends with every entity and relationship added, each once."""
    store = InMemoryGraphStore()
    steps = 200
    asyncio.run(store.add_entities([Entity(id="hub")]))

    async def work(thread: int) -> None:
        for k in range(steps):
            entity, edge = f"t{thread}-e{k}", f"t{thread}-r{k}"
            await store.add_entities([Entity(id=entity, properties={"agent_id": AGENT, "session_id": "shared"})])
            await store.add_relationships([Relationship(id=edge, source_id=entity, target_id="hub", type="near")])
            near = await store.get_neighbors(entity)
            assert near.entity_ids() == {entity, "hub"} and [r.id for r in near.relationships] == [edge]
            scratch = Entity(id=f"t{thread}-x{k}", properties={"agent_id": AGENT, "session_id": f"own-{thread}"})
            await store.add_entities([scratch])
            if k % 10 == 9:
                assert await store.forget(AGENT, session_id=f"own-{thread}") == 10

    run_threads(work)

    async def check() -> None:
        hub = await store.get_neighbors("hub")
        entities = [e.id for e in hub.entities]
        edges = [r.id for r in hub.relationships]
        assert len(set(entities)) == len(entities) and len(set(edges)) == len(edges)
        assert set(entities) == {"hub"} | {f"t{t}-e{k}" for t in range(THREADS) for k in range(steps)}
        assert set(edges) == {f"t{t}-r{k}" for t in range(THREADS) for k in range(steps)}
        for thread in range(THREADS):
            assert await store.get_entity(f"t{thread}-x0") is None
        assert await store.forget(AGENT, session_id="shared") == 2 * THREADS * steps

    asyncio.run(check())


def vector(thread: int, k: int) -> tuple[float, ...]:
    """A vector of its own for document ``k`` of ``thread``: no other lies as close to it."""
    values = np.random.default_rng(1000 * thread + k).standard_normal(16).astype(np.float32)
    return tuple(values.tolist())


def test_vector_store_keeps_every_threads_documents() -> None:
    """Every thread adds, replaces, finds and deletes documents of one collection, and forgets a session of its
    own there now and then: every document kept comes back once with its own embedding and is the nearest to
    it."""
    store = InMemoryVectorStore()
    steps = 200

    def kept(k: int) -> bool:
        return k % 6 != 4

    def document(thread: int, k: int, session_id: str = "shared") -> Document:
        return Document(
            id=f"t{thread}-d{k}",
            content=f"document {thread}/{k}",
            embedding=vector(thread, k),
            metadata={"agent_id": AGENT, "session_id": session_id},
        )

    async def work(thread: int) -> None:
        for k in range(steps):
            doc = document(thread, k)
            await store.add([doc], collection="shared")
            await store.upsert([doc], collection="shared")
            hits = await store.search(doc.embedding or (), collection="shared", limit=1)
            assert [h.id for h in hits] == [doc.id]
            scratch = document(thread, k, f"own-{thread}").model_copy(update={"id": f"t{thread}-x{k}"})
            await store.add([scratch], collection="shared")
            if not kept(k):
                assert await store.delete([doc.id], collection="shared") == 1
            if k % 10 == 9:
                assert await store.forget(AGENT, session_id=f"own-{thread}") == 10

    run_threads(work)

    async def check() -> None:
        ids = [f"t{t}-{kind}{k}" for kind in "dx" for t in range(THREADS) for k in range(steps)]
        got = await store.get(ids, collection="shared")  # the documents, then the forgotten ones
        expected = [document(t, k) for t in range(THREADS) for k in range(steps) if kept(k)]
        assert [d.id for d in got] == [d.id for d in expected], "documents lost or kept after delete"
        for doc, want in zip(got, expected, strict=True):
            assert doc.embedding == want.embedding and doc.text == want.text, f"{doc.id} holds another's data"
            hits = await store.search(want.embedding or (), collection="shared", limit=1)
            assert [h.id for h in hits] == [want.id]
        assert await store.forget(AGENT, session_id="shared") == len(expected)

    asyncio.run(check())


def test_long_term_memory_keeps_every_threads_memories() -> None:
    """Every thread saves, finds and deletes memories of one agent's namespace, and searches it meanwhile: every
    memory kept is found once, under its id, with its content."""
    store = InMemoryLongTermMemory(embedding_client=WordEmbedder())
    steps = 200

    def kept(k: int) -> bool:
        return k % 5 != 2

    saved: list[dict[str, str]] = [{} for _ in range(THREADS)]

    async def work(thread: int) -> None:
        for k in range(steps):
            content = f"thread{thread} fact {k} about {WORDS[k % len(WORDS)]}"
            memory_id = await store.save(AGENT, content, namespace="shared", metadata={"session_id": f"t{thread}"})
            memory = await store.get(AGENT, memory_id, namespace="shared")
            assert memory is not None and memory.content == content
            found = await store.search(AGENT, content, namespace="shared", limit=3)
            scores = [m.score or 0.0 for m in found]
            assert found and scores == sorted(scores, reverse=True)
            if kept(k):
                saved[thread][memory_id] = content
            else:
                assert await store.delete(AGENT, memory_id, namespace="shared")

    run_threads(work)

    async def check() -> None:
        everything = {i: c for own in saved for i, c in own.items()}
        found = await store.search(AGENT, "fact", namespace="shared", limit=10_000)
        assert sorted(m.id for m in found) == sorted(everything), "memories lost, or found twice"
        assert all(m.content == everything[m.id] for m in found)
        for thread in range(THREADS):
            assert await store.forget(AGENT, session_id=f"t{thread}") == len(saved[thread])

    asyncio.run(check())
