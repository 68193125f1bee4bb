"""The hybrid history provider's hot tier holds the cold tier's order, whoever writes the session.

Writers of one session that share no lock (threads that each run their own loop, processes, or two providers
over the same tiers) interleave their tier writes. The hot tier is a copy of the cold tier made in the cold
tier's order, so a read served by the hot tier is the durable transcript, and a hot tier that lost the session
gets it back at the next write.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import cycle
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ravi.agents.context import HybridHistoryProvider, InMemoryHistoryProvider
from ravi.agents.context.hybrid import COPY_OF
from ravi.conformance import threads
from ravi.conformance.threads import switching_often
from ravi.kernel.errors import BackendUnavailable, MessageConflict
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.storage import (
    HistoryProvider,
    HistorySearcher,
    HistoryWindow,
    SessionReplacer,
    StoredMessage,
    TailEditor,
    WindowReader,
)

THREADS = 6
AGENT = "agent"
T = TypeVar("T")
WHEN = datetime(2025, 1, 1, tzinfo=UTC)


class YieldingHistory(InMemoryHistoryProvider):
    """The in-memory provider, giving its loop turns before each call (as a server round trip does): the timing
    of a store on a network, with the in-memory store's behaviour. ``turns`` says how many before each call, in
    turn (one each by default)."""

    def __init__(self, turns: Sequence[int] = (1,)) -> None:
        super().__init__()
        self.turns = cycle(turns or (0,))

    async def _turn(self) -> None:
        for _ in range(next(self.turns)):
            await asyncio.sleep(0)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        await self._turn()
        await super().append_many(agent_id, messages, session_id=session_id, run_id=run_id)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        await self._turn()
        return await super().get_messages(agent_id, session_id=session_id, limit=limit, offset=offset)

    async def get_stored(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        await self._turn()
        return await super().get_stored(agent_id, session_id=session_id, limit=limit, offset=offset)

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        await self._turn()
        return await super().count_messages(agent_id, session_id=session_id)

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        await self._turn()
        return await super().generation(agent_id, session_id=session_id)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        await self._turn()
        return await super().clear(agent_id, session_id=session_id)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        await self._turn()
        return await super().clear_run(agent_id, session_id=session_id, run_id=run_id)

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        await self._turn()
        return await super().replace_last(
            agent_id, session_id=session_id, message_id=message_id, messages=messages, run_id=run_id
        )

    async def replace_session(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        await self._turn()
        return await super().replace_session(agent_id, messages, session_id=session_id, run_id=run_id)


def message(writer: int, k: int) -> ChatMessage:
    """Writer ``writer``'s ``k``-th message."""
    make = ChatMessage.user if k % 2 else ChatMessage.assistant
    return make(f"writer{writer} says {k}" + " more" * (k % 5), id=f"w{writer}-m{k}", created_at=WHEN)


async def assert_tiers_equal(hot: InMemoryHistoryProvider, cold: InMemoryHistoryProvider, session: str = "s") -> None:
    """Both tiers hold the same messages, in the same order, under the same run ids."""
    hot_stored = await hot.get_stored(AGENT, session_id=session)
    cold_stored = await cold.get_stored(AGENT, session_id=session)
    differ = sum(a != b for a, b in zip(hot_stored, cold_stored, strict=False))
    assert len(hot_stored) == len(cold_stored), f"hot holds {len(hot_stored)}, cold {len(cold_stored)}"
    assert hot_stored == cold_stored, f"{differ} of {len(cold_stored)} positions differ"


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Make the interpreter switch threads every microsecond, so races show up in every run."""
    with switching_often():
        yield


@pytest.mark.usefixtures("switch_often")
def test_writers_on_loops_of_their_own_leave_both_tiers_in_one_order() -> None:
    """Six threads, each running its own loop, append batches to one session of one hybrid provider: afterwards
    the hot tier holds exactly what the cold one holds, in its order, with its run ids (before, the tiers
    differed in many positions every run)."""
    hot, cold = YieldingHistory(), YieldingHistory()
    history = HybridHistoryProvider(hot, cold)
    rounds = 60

    async def work(writer: int) -> None:
        for k in range(rounds):
            batch = [message(writer, 2 * k), message(writer, 2 * k + 1)]
            await history.append_many(AGENT, batch, session_id="s", run_id=f"run-{writer}")

    threads.run_threads(lambda writer: asyncio.run(work(writer)), THREADS)

    async def check() -> None:
        await assert_tiers_equal(hot, cold)
        stored = await cold.get_stored(AGENT, session_id="s")
        assert len(stored) == THREADS * rounds * 2
        for writer in range(THREADS):
            mine = [s.message for s in stored if s.run_id == f"run-{writer}"]
            assert mine == [message(writer, k) for k in range(2 * rounds)]
        assert await history.get_messages(AGENT, session_id="s") == [s.message for s in stored]

    asyncio.run(check())


def test_a_hot_tier_that_lost_the_session_gets_it_back_at_the_next_write() -> None:
    """The hot tier forgets the session behind the provider's back (it expired): the next append copies the
    whole session into it, in the cold tier's order, so reads are served by the hot tier again."""

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        messages = [ChatMessage.system("rules")] + [message(0, k) for k in range(30)]
        await history.append_many(AGENT, messages[:20], session_id="s", run_id="first")
        await history.append_many(AGENT, messages[20:], session_id="s", run_id="second")
        await hot.clear(AGENT, session_id="s")
        more = message(1, 0)
        await history.append(AGENT, more, session_id="s", run_id="third")
        await assert_tiers_equal(hot, cold)
        assert [s.run_id for s in await hot.get_stored(AGENT, session_id="s")] == ["first"] * 20 + ["second"] * 11 + [
            "third"
        ]
        assert await history.get_messages(AGENT, session_id="s") == [*messages, more]
        assert await history.clear_run(AGENT, session_id="s", run_id="second") == 11
        await assert_tiers_equal(hot, cold)

    asyncio.run(main())


def test_a_hot_tier_holding_more_than_the_cold_one_is_dropped_at_the_next_write() -> None:
    """A hot tier left with messages the cold tier no longer holds (a clear of the cold tier that the hot tier
    missed) is stale: the next write drops it and copies the cold tier's session, so no read serves the old
    messages, even once the cold tier holds as many."""

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        await history.append_many(AGENT, [message(0, k) for k in range(3)], session_id="s")
        await cold.clear(AGENT, session_id="s")  # the hot tier missed this clear
        await history.append_many(AGENT, [message(1, k) for k in range(3)], session_id="s")
        await assert_tiers_equal(hot, cold)
        assert await history.get_messages(AGENT, session_id="s") == [message(1, k) for k in range(3)]

    asyncio.run(main())


class ExpiringHistory(InMemoryHistoryProvider):
    """The in-memory provider, losing the session (as a hot tier's expiry does) right after the next read of
    one message, once ``armed``: the moment a copy has read its seam and not yet appended."""

    armed = False

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        read = await super().get_messages(agent_id, session_id=session_id, limit=limit, offset=offset)
        if self.armed and limit == 1:
            self.armed = False
            await self.clear(agent_id, session_id=session_id)
        return read


class ClearedHistory(InMemoryHistoryProvider):
    """The in-memory provider whose session is cleared by another writer right after the next read of its
    stored messages from an offset, once ``armed``: the moment a copy has read the cold tier and not yet
    appended."""

    armed = False

    async def get_stored(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        read = await super().get_stored(agent_id, session_id=session_id, limit=limit, offset=offset)
        if self.armed and offset:
            self.armed = False
            await self.clear(agent_id, session_id=session_id)
        return read


def test_a_hot_tier_that_expires_in_the_middle_of_a_copy_never_serves_another_order() -> None:
    """The hot tier loses the session after a copy read where to start and before it appended: the stretch lands
    at the start of an empty session. The copy sees the hot tier's generation change and that the hot tier is
    no longer the cold one's start, and drops it: reads go to the cold tier, and the next write copies it
    whole."""

    async def main() -> None:
        hot, cold = ExpiringHistory(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        await history.append_many(AGENT, [message(0, k) for k in range(4)], session_id="s", run_id="r")
        hot.armed = True
        await history.append(AGENT, message(0, 4), session_id="s", run_id="r")
        assert await hot.count_messages(AGENT, session_id="s") == 0
        assert await history.get_messages(AGENT, session_id="s") == [message(0, k) for k in range(5)]
        await history.append(AGENT, message(0, 5), session_id="s", run_id="r")
        await assert_tiers_equal(hot, cold)

    asyncio.run(main())


def test_a_cold_session_cleared_in_the_middle_of_a_copy_is_not_served_from_the_hot_tier() -> None:
    """Another writer clears the cold session after a copy read it and before the copy appended: the stretch of
    the old session lands in the hot tier. The copy sees the cold tier's generation change and drops the hot
    session, so no read serves the old messages, even once the cold tier holds as many again."""

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), ClearedHistory()
        history = HybridHistoryProvider(hot, cold)
        await history.append_many(AGENT, [message(0, k) for k in range(2)], session_id="s")
        cold.armed = True
        await history.append(AGENT, message(0, 2), session_id="s")
        assert await cold.count_messages(AGENT, session_id="s") == 0
        assert await hot.count_messages(AGENT, session_id="s") == 0
        await history.append_many(AGENT, [message(1, k) for k in range(3)], session_id="s")
        await assert_tiers_equal(hot, cold)
        assert await history.get_messages(AGENT, session_id="s") == [message(1, k) for k in range(3)]

    asyncio.run(main())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7)),
    readers=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    sizes=st.lists(st.integers(1, 5), min_size=2, max_size=4),
)
@example(turns=([1, 0], [0]), readers=(1, 0), sizes=[4, 4])  # a reader counts the hot tier before it is emptied
def test_readers_racing_a_replacement_read_the_old_transcript_or_the_new_one(
    turns: tuple[list[int], list[int]], readers: tuple[int, int], sizes: list[int]
) -> None:
    """Reads (whole, paged and windowed) gathered with ``replace_session`` through the hybrid provider, each
    tier call giving the loop a drawn number of turns, return the transcript before the replacement or the one
    after, never an empty session nor a part of one. The hot tier was emptied before the cold one was replaced:
    a reader that counted the hot tier before and read it after found as many messages in the cold tier as the
    hot tier had, and was served the empty hot tier."""

    async def main() -> None:
        hot, cold = YieldingHistory(turns[0]), YieldingHistory(turns[1])
        history = HybridHistoryProvider(hot, cold)
        versions = [[message(v, k) for k in range(n)] for v, n in enumerate(sizes)]
        await history.append_many(AGENT, versions[0], session_id="s", run_id="loaded")

        async def read() -> tuple[list[ChatMessage], ...]:
            whole = history.get_messages(AGENT, session_id="s")
            page = history.get_messages(AGENT, session_id="s", offset=1, limit=2)
            window = history.read_window(AGENT, session_id="s", tokens=10**6)
            got = await asyncio.gather(whole, page, window)
            return got[0], got[1], got[2].messages

        for v in range(1, len(versions)):
            before, after = versions[v - 1], versions[v]
            reads = await asyncio.gather(
                *(read() for _ in range(readers[0])),
                history.replace_session(AGENT, after, session_id="s", run_id="loaded"),
                *(read() for _ in range(readers[1])),
            )
            del reads[readers[0]]
            for whole, page, window in reads:  # type: ignore[misc]
                assert whole in (before, after), f"a reader saw {[m.text for m in whole]}"
                assert page in (before[1:3], after[1:3]), f"a paged reader saw {[m.text for m in page]}"
                assert window in (before, after), f"a windowed reader saw {[m.text for m in window]}"
            await assert_tiers_equal(hot, cold)

    asyncio.run(main())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7)),
    readers=st.integers(1, 4),
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=3),
)
@example(turns=([0, 1], []), readers=1, sizes=[(1, 1)])  # a writer clears the hot tier between a count and a read
def test_readers_racing_replacements_from_two_processes_read_one_whole_transcript(
    turns: tuple[list[int], list[int]], readers: int, sizes: list[tuple[int, int]]
) -> None:
    """Two writers that share no lock (two processes' providers over the same tiers) replace the session at
    once, while a third provider reads it (whole, paged and windowed): every read is one whole transcript, the
    one before or one of the two loaded, never an empty session. A writer that finds the session replaced again
    under it clears the hot tier; a reader that counted the hot tier before that and read it after was served
    the empty hot tier."""

    async def main() -> None:
        hot, cold = YieldingHistory(turns[0]), YieldingHistory(turns[1])
        first, second, reader = (HybridHistoryProvider(hot, cold) for _ in range(3))
        made = iter(range(10**6))

        def version(n: int) -> list[ChatMessage]:
            return [ChatMessage.user(f"m{k}", id=f"m{k}") for k in (next(made) for _ in range(n))]

        await first.append_many(AGENT, version(2), session_id="s", run_id="loaded")

        async def read() -> tuple[list[ChatMessage], ...]:
            whole = reader.get_messages(AGENT, session_id="s")
            page = reader.get_messages(AGENT, session_id="s", offset=1, limit=2)
            window = reader.read_window(AGENT, session_id="s", tokens=10**6)
            got = await asyncio.gather(whole, page, window)
            return got[0], got[1], got[2].messages

        for a, b in sizes:
            loads = [await cold.get_messages(AGENT, session_id="s"), version(a), version(b)]
            reads = await asyncio.gather(
                first.replace_session(AGENT, loads[1], session_id="s", run_id="loaded"),
                *(read() for _ in range(readers)),
                second.replace_session(AGENT, loads[2], session_id="s", run_id="loaded"),
            )
            for whole, page, window in reads[1:-1]:  # type: ignore[misc]
                assert whole in loads, f"a reader saw {[m.text for m in whole]}"
                assert page in [load[1:3] for load in loads], f"a paged reader saw {[m.text for m in page]}"
                assert window in loads, f"a windowed reader saw {[m.text for m in window]}"

    asyncio.run(main())


class FailingCopy(InMemoryHistoryProvider):
    """The in-memory provider whose next ``append_many`` fails before changing anything (a hot tier out of reach
    for that call), once ``armed``."""

    armed = False

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        if self.armed:
            self.armed = False
            raise BackendUnavailable("the hot tier did not answer")
        await super().append_many(agent_id, messages, session_id=session_id, run_id=run_id)


def test_a_hot_tier_that_fails_to_follow_a_replacement_is_not_served() -> None:
    """The cold tier took the new transcript and the hot tier failed to follow: the hot tier never serves the
    old transcript (as many messages as the new one), so reads serve the new transcript."""

    async def main() -> None:
        hot, cold = FailingCopy(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        old, new = [message(0, k) for k in range(3)], [message(1, k) for k in range(3)]
        await history.append_many(AGENT, old, session_id="s")
        hot.armed = True
        with pytest.raises(BackendUnavailable):
            await history.replace_session(AGENT, new, session_id="s")
        assert await history.get_messages(AGENT, session_id="s") == new
        assert (await history.read_window(AGENT, session_id="s", tokens=10**6)).messages == new
        await history.append(AGENT, message(1, 3), session_id="s")
        await assert_tiers_equal(hot, cold)

    asyncio.run(main())


# -- any interleaving of writers that share no lock ---------------------------------------------------------------

OPERATIONS = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 3)),  # which run, how many messages
    st.tuples(st.just("expire"), st.just(0), st.just(0)),  # the hot tier loses the session
    st.tuples(st.just("clear_run"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("replace_last"), st.integers(0, 2), st.integers(0, 2)),  # how many replace the newest
    st.tuples(st.just("clear"), st.just(0), st.just(0)),
    st.tuples(st.just("replace_session"), st.integers(0, 2), st.integers(0, 3)),  # which run, how many messages
)


async def write(
    history: HistoryProvider,
    cold: HistoryProvider,
    operation: tuple[str, object, int],
    fresh: Callable[[], ChatMessage],
) -> None:
    """One write of ``OPERATIONS`` to session ``s`` through ``history`` (``cold``: the tier whose newest message
    ``replace_last`` names), its messages made by ``fresh``; ``expire`` (the hot tier's business) is left to the
    caller."""
    kind, run_n, n = operation
    run_id = f"r{run_n}"
    if kind == "append":
        await history.append_many(AGENT, [fresh() for _ in range(n)], session_id="s", run_id=run_id)
    elif kind == "clear_run":
        await history.clear_run(AGENT, session_id="s", run_id=run_id)
    elif kind == "replace_last":
        newest = await cold.get_messages(AGENT, session_id="s")
        if newest:
            instead = [fresh() for _ in range(n)]
            assert isinstance(history, TailEditor)
            await history.replace_last(AGENT, session_id="s", message_id=newest[-1].id, messages=instead, run_id=run_id)
    elif kind == "replace_session":
        assert isinstance(history, SessionReplacer)
        await history.replace_session(AGENT, [fresh() for _ in range(n)], session_id="s", run_id=run_id)
    elif kind == "clear":
        await history.clear(AGENT, session_id="s")


async def assert_tiers_agree(
    hot: InMemoryHistoryProvider, cold: InMemoryHistoryProvider, writers: Sequence[HybridHistoryProvider]
) -> None:
    """Whenever the tiers hold as many messages of session ``s`` they hold the same ones, in one order, under the
    same runs, and reads through every writer are the cold tier's messages."""
    cold_stored = await cold.get_stored(AGENT, session_id="s")
    hot_stored = await hot.get_stored(AGENT, session_id="s")
    if len(hot_stored) == len(cold_stored):
        assert hot_stored == cold_stored, "the tiers hold as many messages, not the same ones"
    for writer in writers:
        assert await writer.get_messages(AGENT, session_id="s") == [s.message for s in cold_stored]
        assert await writer.get_stored(AGENT, session_id="s") == cold_stored


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.lists(st.tuples(st.integers(0, 2), OPERATIONS), min_size=1, max_size=4), max_size=10),
    turns=st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7)),
)
@example(steps=[[(0, ("append", 0, 1)), (1, ("append", 0, 1))]], turns=([1, 0], []))  # two writers' tier writes cross
@example(  # two writers' replacements cross: the hot tier kept the batch the cold tier replaced
    steps=[[(0, ("append", 0, 1))], [(0, ("replace_session", 0, 1)), (1, ("replace_session", 0, 1))]],
    turns=([0, 1], []),
)
def test_any_interleaving_of_writers_keeps_the_hot_tier_a_copy_of_the_cold_one(
    steps: list[list[tuple[int, tuple[str, int, int]]]], turns: tuple[list[int], list[int]]
) -> None:
    """Three providers over the same two tiers (writers that share no lock, as processes do) run steps of
    operations gathered at once: appends under several runs, the hot tier losing the session, ``clear_run``,
    ``replace_last``, ``replace_session`` and ``clear``, each tier call giving the loop a drawn number of turns.
    After every step, reads through any provider are the cold tier's messages, and whenever the tiers hold as
    many messages they hold the same ones, in one order, under the same runs."""

    async def main() -> None:
        hot, cold = YieldingHistory(turns[0]), YieldingHistory(turns[1])
        writers = [HybridHistoryProvider(hot, cold) for _ in range(3)]
        made = iter(range(10**6))

        def fresh() -> ChatMessage:
            k = next(made)
            return ChatMessage.user(f"m{k}", id=f"m{k}")

        async def run(writer: HybridHistoryProvider, operation: tuple[str, int, int]) -> None:
            if operation[0] == "expire":
                await hot.clear(AGENT, session_id="s")
            else:
                await write(writer, cold, operation, fresh)

        for step in steps:
            await asyncio.gather(*(run(writers[w], operation) for w, operation in step))
            await assert_tiers_agree(hot, cold, writers)

    asyncio.run(main())


class LoggedHistory(YieldingHistory):
    """A ``YieldingHistory`` that keeps every state session ``s`` went through (``states``, oldest first): a
    read is checked against the states the tier held while it ran."""

    def __init__(self, turns: Sequence[int] = (1,)) -> None:
        super().__init__(turns)
        self.states: list[list[ChatMessage]] = [[]]

    async def _logged(self, change: Awaitable[T]) -> T:
        result = await change
        self.states.append(await InMemoryHistoryProvider.get_messages(self, AGENT, session_id="s"))
        return result

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        await self._turn()
        change = InMemoryHistoryProvider.append_many(self, agent_id, messages, session_id=session_id, run_id=run_id)
        await self._logged(change)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        await self._turn()
        return await self._logged(InMemoryHistoryProvider.clear(self, agent_id, session_id=session_id))

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        await self._turn()
        change = InMemoryHistoryProvider.clear_run(self, agent_id, session_id=session_id, run_id=run_id)
        return await self._logged(change)

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        await self._turn()
        change = InMemoryHistoryProvider.replace_last(
            self, agent_id, session_id=session_id, message_id=message_id, messages=messages, run_id=run_id
        )
        return await self._logged(change)

    async def replace_session(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        await self._turn()
        change = InMemoryHistoryProvider.replace_session(self, agent_id, messages, session_id=session_id, run_id=run_id)
        return await self._logged(change)


READS = ("whole", "page", "window", "small window", "search", "count")
QUERY = "m1 m2 m3"


async def read_of(history: HistoryProvider, kind: str) -> object:
    """One read of session ``s`` of the kind named, as a value to compare."""
    if kind == "whole":
        return await history.get_messages(AGENT, session_id="s")
    if kind == "page":
        return await history.get_messages(AGENT, session_id="s", offset=1, limit=2)
    if kind in ("window", "small window"):
        assert isinstance(history, WindowReader)
        window = await history.read_window(AGENT, session_id="s", tokens=10**6 if kind == "window" else 5)
        return window.messages, window.head, window.complete, window.before
    if kind == "search":
        assert isinstance(history, HistorySearcher)
        return await history.search_units(AGENT, session_id="s", query=QUERY, before=10**6, limit=10)
    return await history.count_messages(AGENT, session_id="s")


async def read_of_state(state: list[ChatMessage], kind: str) -> object:
    """What a read of the kind named returns from a session holding ``state``."""
    history = InMemoryHistoryProvider()
    await history.append_many(AGENT, state, session_id="s")
    return await read_of(history, kind)


async def check_read(history: HistoryProvider, cold: LoggedHistory, kind: str) -> None:
    """A read of the kind named through ``history`` is of a transcript the cold tier held while it ran."""
    first = len(cold.states) - 1
    got = await read_of(history, kind)
    held = cold.states[first:]
    assert got in [await read_of_state(state, kind) for state in held], (
        f"a {kind} read got {got!r}; while it ran the cold tier held {[[m.id for m in s] for s in held]}"
    )


def short(k: int) -> ChatMessage:
    """Message ``k``: four texts, so searches find several."""
    return ChatMessage.user(f"m{k % 4} text" + " more" * (k % 3), id=f"m{k}")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.lists(st.one_of(OPERATIONS, st.tuples(st.just("read"), st.sampled_from(READS), st.just(0))), max_size=5),
        max_size=8,
    ),
    turns=st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7)),
)
@example(  # a reader served the transcript the cold tier had just replaced, before the hot tier followed
    steps=[[("append", 0, 2)], [("replace_session", 0, 2), ("read", "whole", 0)]], turns=([0, 2, 0], [])
)
@example(  # a windowed reader served the hot tier's transcript before the hot tier followed a replace_last
    steps=[[("append", 0, 2)], [("replace_last", 0, 0), ("read", "window", 0)]], turns=([2], [])
)
def test_a_reader_racing_the_provider_s_own_writes_reads_a_transcript_the_cold_tier_held(
    steps: list[list[tuple[str, object, int]]], turns: tuple[list[int], list[int]]
) -> None:
    """One provider (one process) writes the session while it reads it, every kind of read at once with
    appends, ``clear_run``, ``replace_last``, ``replace_session`` and ``clear``: each read is of a transcript the
    cold tier held at some point while the read ran. A reader racing a replacement was served, from the hot
    tier, the transcript the cold tier had just replaced (as many messages as the new one), and a windowed or
    searching reader one the cold tier never held (the hot tier halfway through following it)."""

    async def main() -> None:
        hot, cold = YieldingHistory(turns[0]), LoggedHistory(turns[1])
        history = HybridHistoryProvider(hot, cold)
        made = iter(range(10**6))

        async def run(operation: tuple[str, object, int]) -> None:
            if operation[0] == "read":
                assert isinstance(operation[1], str)
                await check_read(history, cold, operation[1])
            else:
                await write(history, cold, operation, lambda: short(next(made)))

        for step in steps:
            await asyncio.gather(*(run(operation) for operation in step if operation[0] != "expire"))

    asyncio.run(main())


def test_a_copy_into_a_hot_tier_that_took_another_message_under_one_id_does_not_fail_the_write() -> None:
    """An append's copy reads the cold tier's session from an empty hot tier while another writer's replacement
    puts a transcript reusing one of its ids, with other content, in the hot tier: the hot tier refused the copy
    (``MessageConflict``), and the append, already stored in the cold tier, failed as though it had been
    refused. The copy drops the hot tier instead: the append succeeds and reads serve the cold tier."""

    async def main() -> None:
        hot, cold = YieldingHistory([0]), YieldingHistory([2])
        first, second = HybridHistoryProvider(hot, cold), HybridHistoryProvider(hot, cold)
        loaded = [ChatMessage.user(f"load {v}", id="p0", created_at=WHEN) for v in range(2)]
        await asyncio.gather(
            first.append(AGENT, message(0, 0), session_id="s", run_id="r"),
            second.replace_session(AGENT, loaded[:1], session_id="s", run_id="r"),
            second.replace_session(AGENT, loaded[1:], session_id="s", run_id="r"),
        )
        cold_stored = await cold.get_stored(AGENT, session_id="s")
        hot_stored = await hot.get_stored(AGENT, session_id="s")
        if len(hot_stored) == len(cold_stored):
            assert hot_stored == cold_stored
        for history in (first, second):
            assert await history.get_messages(AGENT, session_id="s") == [s.message for s in cold_stored]

    asyncio.run(main())


def test_a_hot_tier_that_refuses_to_follow_replace_last_is_dropped_and_the_edit_stands() -> None:
    """The hot tier holds, under an id that ``replace_last`` brings in, another message than the new one (a
    message the cold tier no longer holds, whose removal the hot tier missed): the cold tier took the edit, the
    hot one refused it (``MessageConflict``), and the caller got that error for an edit that was made, with the
    hot tier left unchanged. The hot tier is dropped instead (and copied again from the cold one), and the edit
    is reported made."""

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        first, newest = message(0, 0), message(0, 1)
        await cold.append_many(AGENT, [first, newest], session_id="s")
        await hot.append_many(AGENT, [first, message(1, 0), newest], session_id="s")  # message(1, 0) missed
        instead = ChatMessage.user("another", id=message(1, 0).id, created_at=WHEN)
        assert await history.replace_last(AGENT, session_id="s", message_id=newest.id, messages=[instead])
        assert await cold.get_messages(AGENT, session_id="s") == [first, instead]
        assert await history.get_messages(AGENT, session_id="s") == [first, instead]
        assert await hot.get_messages(AGENT, session_id="s") == [first, instead]  # copied again, whole

    asyncio.run(main())


class ReplacedAfterEdit(InMemoryHistoryProvider):
    """The in-memory provider that, once ``armed``, runs ``then`` (another writer's write) right after its next
    ``replace_last``: the moment a provider has edited the cold tier and not yet the hot one."""

    armed = False
    then: Callable[[], Awaitable[object]]

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        done = await super().replace_last(
            agent_id, session_id=session_id, message_id=message_id, messages=messages, run_id=run_id
        )
        if self.armed:
            self.armed = False
            await self.then()
        return done


def test_replace_last_does_not_follow_in_the_hot_tier_a_session_replaced_after_it_in_the_cold_one() -> None:
    """A provider edits the newest message in the cold tier; another one (another process) then replaces the
    session with a transcript whose newest message is the one edited, in both tiers; the first provider's hot
    tier edit then found that id newest and followed: the hot tier held the edit, the cold tier the
    replacement, as many messages, and reads served the edit. The edit is kept in the hot tier only when the
    cold tier's newest message is still the edit's, in the same generation, after the hot tier followed."""

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), ReplacedAfterEdit()
        first, second = HybridHistoryProvider(hot, cold), HybridHistoryProvider(hot, cold)
        edited, edit = message(0, 0), message(1, 0)
        await first.append(AGENT, edited, session_id="s", run_id="r")
        cold.then = lambda: second.replace_session(AGENT, [edited], session_id="s", run_id="r")
        cold.armed = True
        assert await first.replace_last(AGENT, session_id="s", message_id=edited.id, messages=[edit], run_id="r")
        assert await cold.get_messages(AGENT, session_id="s") == [edited]
        assert await first.get_messages(AGENT, session_id="s") == [edited]
        hot_stored = await hot.get_stored(AGENT, session_id="s")
        if len(hot_stored) == 1:
            assert hot_stored == await cold.get_stored(AGENT, session_id="s")

    asyncio.run(main())


REUSING = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 2), st.just(())),
    st.tuples(st.just("expire"), st.just(0), st.just(0), st.just(())),
    st.tuples(st.just("clear_run"), st.integers(0, 2), st.just(0), st.just(())),
    *(
        st.tuples(st.just(kind), st.integers(0, 2), st.just(0), st.lists(st.integers(0, 3), max_size=4, unique=True))
        for kind in ("replace_session", "replace_last")
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.lists(st.tuples(st.integers(0, 2), REUSING), min_size=1, max_size=4), max_size=8),
    turns=st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7)),
)
@example(  # an edit removing the newest message, followed in the hot tier after other writers' copies
    steps=[
        [
            (0, ("replace_session", 0, 0, [0])),
            (0, ("append", 1, 2, ())),
            (0, ("replace_last", 0, 0, ())),
            (0, ("replace_last", 0, 0, ())),
        ],
        [
            (0, ("replace_last", 0, 0, ())),
            (0, ("replace_last", 0, 0, ())),
            (1, ("append", 0, 1, ())),
            (2, ("append", 0, 1, ())),
        ],
    ],
    turns=([0, 2], [0, 0, 3, 0]),
)
@example(  # two copies from the start, the hot tier emptied between the groups of one: the tiers in two orders
    steps=[
        [(0, ("replace_session", 0, 0, [0]))],
        [
            (0, ("append", 0, 1, ())),
            (0, ("replace_last", 0, 0, ())),
            (0, ("replace_last", 0, 0, ())),
            (1, ("append", 1, 1, ())),
        ],
        [
            (0, ("replace_last", 0, 0, ())),
            (1, ("append", 0, 1, ())),
            (0, ("replace_last", 0, 0, ())),
            (2, ("append", 0, 1, ())),
        ],
    ],
    turns=([0, 0, 2, 2], [0, 2, 2, 1]),
)
def test_writers_loading_transcripts_that_reuse_ids_keep_the_hot_tier_a_copy_of_the_cold_one(
    steps: list[list[tuple[int, tuple[str, int, int, Sequence[int]]]]], turns: tuple[list[int], list[int]]
) -> None:
    """As ``test_any_interleaving_of_writers_keeps_the_hot_tier_a_copy_of_the_cold_one``, with replacements and
    edits whose messages reuse a few ids, each time with other content: after every step, whenever the tiers
    hold as many messages they hold the same ones, and reads through any provider are the cold tier's."""

    async def main() -> None:
        hot, cold = YieldingHistory(turns[0]), YieldingHistory(turns[1])
        writers = [HybridHistoryProvider(hot, cold) for _ in range(3)]
        made = iter(range(10**6))

        def loaded(k: int) -> ChatMessage:
            return ChatMessage.user(f"p{k} version {next(made)}", id=f"p{k}", created_at=WHEN)

        async def run(writer: HybridHistoryProvider, operation: tuple[str, int, int, Sequence[int]]) -> None:
            kind, run_n, n, ids = operation
            if kind == "append":
                batch = [ChatMessage.user(f"m{k}", id=f"m{k}") for k in (next(made) for _ in range(n))]
                await writer.append_many(AGENT, batch, session_id="s", run_id=f"r{run_n}")
            elif kind == "expire":
                await hot.clear(AGENT, session_id="s")
            elif kind == "clear_run":
                await writer.clear_run(AGENT, session_id="s", run_id=f"r{run_n}")
            elif kind == "replace_session":
                await writer.replace_session(AGENT, [loaded(k) for k in ids], session_id="s", run_id=f"r{run_n}")
            else:
                newest = await cold.get_messages(AGENT, session_id="s")
                if newest:
                    held = {m.id for m in newest[:-1]}
                    instead = [loaded(k) for k in ids if f"p{k}" not in held]
                    with contextlib.suppress(MessageConflict):  # the session changed since it was read
                        await writer.replace_last(
                            AGENT, session_id="s", message_id=newest[-1].id, messages=instead, run_id=f"r{run_n}"
                        )

        for step in steps:
            await asyncio.gather(*(run(writers[w], operation) for w, operation in step))
            await assert_tiers_agree(hot, cold, writers)

    asyncio.run(main())


class ExpiringAfterCount(InMemoryHistoryProvider):
    """The in-memory provider losing the session (an expiry, or another writer dropping it) right after the next
    count of its messages, once ``armed``: the moment a reader has counted the hot tier and not yet read it."""

    armed = False

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        count = await super().count_messages(agent_id, session_id=session_id)
        if self.armed:
            self.armed = False
            await self.clear(agent_id, session_id=session_id)
        return count


def test_a_search_of_a_hot_tier_emptied_after_its_count_is_made_of_the_cold_tier() -> None:
    """The hot tier (one that searches) loses the session between a reader's count of it and its search: the
    search found nothing, in a session whose messages match. A search of the hot tier that finds nothing is
    made of the cold tier."""

    async def main() -> None:
        hot, cold = ExpiringAfterCount(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        await history.append_many(AGENT, [message(0, k) for k in range(4)], session_id="s")
        expected = await cold.search_units(AGENT, session_id="s", query="writer0 says", before=10**6, limit=3)
        assert expected
        hot.armed = True
        found = await history.search_units(AGENT, session_id="s", query="writer0 says", before=10**6, limit=3)
        assert found == expected

    asyncio.run(main())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 2),
                st.one_of(
                    st.tuples(st.sampled_from(["append", "replace_session"]), st.integers(0, 2), st.integers(1, 3)),
                    st.tuples(st.just("read"), st.sampled_from(READS), st.just(0)),
                ),
            ),
            min_size=1,
            max_size=5,
        ),
        max_size=6,
    ),
    turns=st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7)),
)
@example(  # another provider's reader served the transcript the cold tier had just replaced
    steps=[[(0, ("append", 0, 2))], [(0, ("replace_session", 0, 2)), (1, ("read", "whole", 0))]],
    turns=([0, 2, 0], []),
)
def test_readers_of_other_providers_racing_replacements_read_a_transcript_the_cold_tier_held(
    steps: list[list[tuple[int, tuple[str, object, int]]]], turns: tuple[list[int], list[int]]
) -> None:
    """Three providers over the same tiers (processes that share no lock) append, replace the session and read
    it, every kind of read: each read is of a transcript the cold tier held at some point while it ran. A
    replacement moved the hot tier to the new transcript after the cold tier's, so a reader of another provider
    in between was served the replaced transcript from the hot tier (as many messages as the new one)."""

    async def main() -> None:
        hot, cold = YieldingHistory(turns[0]), LoggedHistory(turns[1])
        providers = [HybridHistoryProvider(hot, cold) for _ in range(3)]
        made = iter(range(10**6))

        async def run(history: HybridHistoryProvider, operation: tuple[str, object, int]) -> None:
            if operation[0] == "read":
                assert isinstance(operation[1], str)
                await check_read(history, cold, operation[1])
            else:
                await write(history, cold, operation, lambda: short(next(made)))

        for step in steps:
            await asyncio.gather(*(run(providers[w], operation) for w, operation in step))

    asyncio.run(main())


class EditedThen(InMemoryHistoryProvider):
    """The in-memory provider that, once ``then`` is set, runs it right after its next ``replace_last`` has
    taken effect: a reader (or a crash) between the cold tier's edit and what the writer does next."""

    then: Callable[[], Awaitable[None]] | None = None

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        done = await super().replace_last(
            agent_id, session_id=session_id, message_id=message_id, messages=messages, run_id=run_id
        )
        then, self.then = self.then, None
        if then is not None:
            await then()
        return done


READ_KINDS = ("whole", "window", "small window", "search")


@pytest.mark.parametrize("kind", READ_KINDS)
def test_another_process_reading_after_the_cold_tier_took_replace_last_reads_the_edit(kind: str) -> None:
    """Another provider (another process) reads the session once the cold tier has replaced its newest message
    and before the writer's hot tier follows: it was served the hot tier's replaced message (as many messages
    in each tier), though the cold tier no longer held it."""

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), EditedThen()
        writer, reader = HybridHistoryProvider(hot, cold), HybridHistoryProvider(hot, cold)
        one, two, edit = short(1), short(2), short(6)
        await writer.append_many(AGENT, [one, two], session_id="s")
        got: list[object] = []

        async def read() -> None:
            got.append(await read_of(reader, kind))

        cold.then = read
        await writer.replace_last(AGENT, session_id="s", message_id="m2", messages=[edit])
        assert got == [await read_of_state([one, edit], kind)]

    asyncio.run(main())


@pytest.mark.parametrize("kind", READ_KINDS)
def test_a_writer_that_stops_after_the_cold_tier_took_replace_last_leaves_no_stale_hot_tier(kind: str) -> None:
    """A writer whose process ends right after the cold tier replaced the newest message (before the hot tier
    followed) left the hot tier holding the replaced message, as many messages as the cold tier: every reader
    was served it until the next write."""

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), EditedThen()
        writer, reader = HybridHistoryProvider(hot, cold), HybridHistoryProvider(hot, cold)
        one, two, edit = short(1), short(2), short(6)
        await writer.append_many(AGENT, [one, two], session_id="s")

        async def stop() -> None:
            raise asyncio.CancelledError  # the writer goes no further

        cold.then = stop
        with pytest.raises(asyncio.CancelledError):
            await writer.replace_last(AGENT, session_id="s", message_id="m2", messages=[edit])
        assert await read_of(reader, kind) == await read_of_state([one, edit], kind)

    asyncio.run(main())


class RecopiedBeforeRead(InMemoryHistoryProvider):
    """The in-memory provider that, once ``armed``, loses the session and gets its first ``keep`` messages back
    (another writer's copy in progress) right before its next windowed read: after a reader counted it."""

    armed = False
    keep = 1

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        if self.armed:
            self.armed = False
            held = await self.get_stored(agent_id, session_id=session_id)
            await self.clear(agent_id, session_id=session_id)
            for stored in held[: self.keep]:
                await self.append_many(agent_id, [stored.message], session_id=session_id, run_id=stored.run_id)
        return await super().read_window(agent_id, session_id=session_id, tokens=tokens)


def test_a_windowed_read_of_a_hot_tier_partly_copied_again_after_its_count_is_made_of_the_cold_tier() -> None:
    """The hot tier loses the session and gets part of it back between a reader's count and its windowed read:
    the read was served a shorter prefix (the newest messages missing), since it held something."""

    async def main() -> None:
        hot, cold = RecopiedBeforeRead(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        await history.append_many(AGENT, [short(k) for k in range(1, 5)], session_id="s")
        hot.armed = True
        window = await history.read_window(AGENT, session_id="s", tokens=10**6)
        assert [m.id for m in window.messages] == ["m1", "m2", "m3", "m4"]

    asyncio.run(main())


class CountedHistory(LoggedHistory):
    """A ``LoggedHistory`` that counts the reads that serve a session (``get_messages`` without a page,
    ``read_window`` of some tokens), and gives its loop turns around its summaries too (the hot tier's tags)."""

    def __init__(self, turns: Sequence[int] = (1,)) -> None:
        super().__init__(turns)
        self.served = 0

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        if limit is None and not offset:
            self.served += 1
        return await super().get_messages(agent_id, session_id=session_id, limit=limit, offset=offset)

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        if tokens:  # a window of no tokens is the newest message alone, read beside the hot tier's window
            self.served += 1
        await self._turn()
        return await super().read_window(agent_id, session_id=session_id, tokens=tokens)

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        await self._turn()
        return await super().get_summary(scope, span_id)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        await self._turn()
        return await super().put_summary(scope, span_id, text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 1),
                st.one_of(OPERATIONS, st.tuples(st.just("read"), st.sampled_from(["whole", "window"]), st.just(0))),
            ),
            min_size=1,
            max_size=4,
        ),
        max_size=8,
    ),
    turns=st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7)),
)
def test_after_racing_writers_stop_one_write_brings_reads_back_to_the_hot_tier(
    steps: list[list[tuple[int, tuple[str, object, int]]]], turns: tuple[list[int], list[int]]
) -> None:
    """Two providers over the same tiers (two processes) write and read the session at once, every kind of write
    (the hot tier losing it too), each tier call giving the loop a drawn number of turns: reads are of a
    transcript the cold tier held while they ran, no write is lost, and once the writers stop, one more append
    through either provider leaves the hot copy tagged with the cold tier's generation, so reads through both are
    served by the hot tier again, never by the cold one forever after the race."""

    async def main() -> None:
        hot, cold = CountedHistory(turns[0]), CountedHistory(turns[1])
        writers = [HybridHistoryProvider(hot, cold) for _ in range(2)]
        made = iter(range(10**6))

        async def run(writer: HybridHistoryProvider, operation: tuple[str, object, int]) -> None:
            if operation[0] == "expire":
                await hot.clear(AGENT, session_id="s")
            elif operation[0] == "read":
                assert isinstance(operation[1], str)
                await check_read(writer, cold, operation[1])
            else:
                await write(writer, cold, operation, lambda: short(next(made)))

        for step in steps:
            await asyncio.gather(*(run(writers[w], operation) for w, operation in step))
        last = short(next(made))
        await writers[1].append(AGENT, last, session_id="s", run_id="last")
        stored = await InMemoryHistoryProvider.get_stored(cold, AGENT, session_id="s")
        assert stored[-1].message == last, "the last write was lost"
        await assert_tiers_equal(hot, cold)
        hot_generation = await InMemoryHistoryProvider.generation(hot, AGENT, session_id="s")
        tag = await InMemoryHistoryProvider.get_summary(hot, Scope(AGENT, "s", hot_generation), COPY_OF)
        cold_generation = await InMemoryHistoryProvider.generation(cold, AGENT, session_id="s")
        assert tag == cold_generation, "the hot copy is not tagged with the cold generation"
        cold.served = 0
        for writer in writers:
            assert await writer.get_messages(AGENT, session_id="s") == [s.message for s in stored]
            assert (await writer.read_window(AGENT, session_id="s", tokens=10**6)).messages == [
                s.message for s in stored
            ]
        assert cold.served == 0, f"{cold.served} of 4 reads after the race were served by the cold tier"

    asyncio.run(main())
