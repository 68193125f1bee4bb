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
import sys
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime

import pytest

from ravi.agents.context import InMemoryHistoryProvider
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.search import UnitMatch
from ravi.kernel.storage import HistoryWindow, window_of
from ravi.kernel.tokens import stored_tokens

THREADS = 6
"""How many threads, each with its own event loop, share a store."""

FINISH = 30.0
"""Seconds after which a thread whose loop has not finished counts as hung (a guard, not a measure of speed: a
loop waiting on a future that another thread completes is never woken)."""

AGENT = "agent"
WHEN = datetime(2025, 1, 1, tzinfo=UTC)
WORDS = ("invoice", "refund", "shipping", "password", "latency", "schema", "billing", "outage", "upgrade", "quota")


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    """Make the interpreter switch threads every microsecond, so races show up in every run."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def run_threads(work: Callable[[int], Awaitable[object]], threads: int = THREADS) -> None:
    """Run ``work(i)`` for each ``i`` below ``threads`` under ``asyncio.run`` in a thread of its own, all started
    together; fail with what any of them raised, or when one never finishes."""
    barrier = threading.Barrier(threads)
    errors: list[tuple[int, BaseException]] = []

    async def started(i: int) -> None:
        barrier.wait()  # every loop is running before any of them starts
        await work(i)

    def run(i: int) -> None:
        try:
            asyncio.run(started(i))
        except BaseException as error:
            errors.append((i, error))

    pool = [threading.Thread(target=run, args=(i,), name=f"loop-{i}", daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    deadline = time.monotonic() + FINISH
    for thread in pool:
        thread.join(max(0.0, deadline - time.monotonic()))
    hung = [thread.name for thread in pool if thread.is_alive()]
    raised = list(errors)
    found = sorted({f"{type(e).__name__}: {e}" for _, error in raised for e in _leaves(error)})
    problems = [f"{len(raised)} of {threads} threads raised: {found}"] if raised else []
    if hung:
        problems.append(f"threads whose event loop never finished: {hung}")
    if problems:
        raise AssertionError("; ".join(problems)) from (raised[0][1] if raised else None)


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


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


def assert_holds_exactly(messages: Sequence[ChatMessage], expected: Sequence[Sequence[ChatMessage]]) -> None:
    """``messages`` are those of ``expected`` (one list per thread), every id once, each thread's in its order."""
    ids = [m.id for m in messages]
    assert len(set(ids)) == len(ids), "a message is stored twice"
    wanted = {m.id for own in expected for m in own}
    lost, extra = sorted(wanted - set(ids)), sorted(set(ids) - wanted)
    assert not lost and not extra, f"lost {len(lost)} {lost[:5]}, unexpected {len(extra)} {extra[:5]}"
    for own in expected:
        mine = {m.id for m in own}
        assert [m for m in messages if m.id in mine] == list(own), "a thread's messages out of its order"


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
