"""One ``AgentContext`` over Redis or Postgres, shared by threads that each call ``asyncio.run`` per request and run
several tasks in each loop, while another thread clears the sessions.

Writers store exchanges (a question, a tool call, its result in a write of its own, an answer) into two sessions
and ask for windows after every write; a clearer clears one of the sessions again and again. Every window must fit
its budget, send each call with its result and each result after its call, hold no message twice and no message
of another session, and a window asked for after a clear returned must hold nothing that clear removed. When every
thread is done, no window still holds a session's state.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from ledger import Ledger
from servers import Server

from ravi.agents.context import (
    AgentContext,
    CompactionPipeline,
    ContextConfig,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
)
from ravi.agents.context.calibration import Calibration
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.conformance import threads
from ravi.conformance.threads import switching_often
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage, ToolCallBlock

WRITERS = 3
EXCHANGES = 12
BUDGET = 400
WORDS = ("invoice", "refund", "shipping", "password", "latency", "schema", "billing", "outage", "upgrade", "quota")

STRATEGIES: dict[str, Callable[[], object]] = {
    "recall_relevance": lambda: RelevantRecallStrategy(token_budget=BUDGET, meaning=None, prefer="relevance"),
    "recall_cache": lambda: RelevantRecallStrategy(token_budget=BUDGET, meaning=None, prefer="cache"),
    "budget": lambda: TokenBudgetComposedStrategy([], token_budget=BUDGET),
}


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    with switching_often():
        yield


def history_of(request: pytest.FixtureRequest, backend: str) -> Any:
    if backend == "redis":
        from ravi.capabilities.redis import RedisHistoryProvider

        server: Server = request.getfixturevalue("redis_server")
        return RedisHistoryProvider(server.address, prefix=request.getfixturevalue("redis_prefix"))
    from ravi.capabilities.postgres import PostgresHistoryProvider

    server = request.getfixturevalue("postgres_server")
    return PostgresHistoryProvider(server.address, schema=request.getfixturevalue("pg_schema"))


def exchange(session: str, thread: int, k: int) -> list[list[ChatMessage]]:
    """Thread ``thread``'s ``k``-th exchange in ``session``, write by write."""
    word = WORDS[(3 * thread + k) % len(WORDS)]
    pad = " detail" * ((k * 7 + thread) % 13)
    tag = f"{session}-t{thread}-{k}"
    question = ChatMessage.user(f"{session} thread {thread} asks about the {word} {k}{pad}", id=f"{tag}-u")
    answer = ChatMessage.assistant(f"the {word} {k} is settled{pad}", id=f"{tag}-a")
    if k % 3 == 2:
        return [[question], [answer]]
    call = ChatMessage.assistant(
        "let me look",
        tool_calls=[ToolCallBlock(id=f"{tag}-c", name="lookup", arguments={"about": word})],
        id=f"{tag}-call",
    )
    result = ChatMessage.tool(f"{tag}-c", f"{word} record {k}{pad}{pad}", id=f"{tag}-r")
    return [[question], [call], [result], [answer]]


def check_window(session: str, window: Sequence[ChatMessage], removed: frozenset[str]) -> None:
    ids = [m.id for m in window]
    tokens = DEFAULT_COUNTER.count_messages(window)
    assert tokens <= BUDGET, f"a window of {tokens} tokens passes its budget of {BUDGET}: {ids}"
    assert len(set(ids)) == len(ids), f"a window holds a message twice: {ids}"
    assert all(i.startswith(f"{session}-") for i in ids), f"a window of {session} holds another session's: {ids}"
    assert not (set(ids) & removed), f"a window holds messages a clear removed before it began: {set(ids) & removed}"
    calls: set[str] = set()
    answered: set[str] = set()
    for m in window:
        calls.update(c.id for c in m.tool_calls)
        result = m.tool_result
        if result is not None:
            assert result.tool_call_id in calls, f"a result without its call before it: {m.id} in {ids}"
            assert result.tool_call_id not in answered, f"a second result for one call: {m.id} in {ids}"
            answered.add(result.tool_call_id)
    assert calls <= answered, f"calls without their result: {calls - answered} in {ids}"


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize("retention", [HistoryRetention.PERMANENT, HistoryRetention.NONE], ids=["permanent", "unsaved"])
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_windows_of_a_shared_context_while_another_thread_clears(
    request: pytest.FixtureRequest, backend: str, retention: HistoryRetention, name: str
) -> None:
    history = history_of(request, backend)
    pipeline = CompactionPipeline([STRATEGIES[name]()])  # type: ignore[list-item]
    context = AgentContext(ContextConfig(history, pipeline, retention=retention))
    sessions = ("s1", "s2")
    ledgers = {s: Ledger() for s in sessions}
    done = threading.Event()

    async def window(session: str) -> None:
        started = ledgers[session].now()
        got = await context.get_prompt_window(session)
        check_window(session, got, ledgers[session].removed_before(started))

    async def writes(session: str, thread: int, k: int) -> None:
        for write in exchange(session, thread, k):
            await context.add_messages(session, write, run_id=f"run-{thread}")
            ledgers[session].append_returned([m.id for m in write])
            await window(session)

    async def request_of(thread: int, k: int) -> None:
        # several tasks of one loop: a write to each session, and a reader of each
        await asyncio.gather(*(writes(s, thread, k) for s in sessions), *(window(s) for s in sessions))

    def work(i: int) -> None:
        if i == WRITERS:  # the clearer, until every writer is done
            while not done.is_set():
                started = ledgers["s1"].now()
                asyncio.run(context.clear("s1"))
                ledgers["s1"].cleared(started)
                asyncio.run(window("s1"))
            return
        try:
            for k in range(EXCHANGES):
                asyncio.run(request_of(i, k))
        finally:
            with lock:
                finished.append(i)
                if len(finished) == WRITERS:
                    done.set()

    lock = threading.Lock()
    finished: list[int] = []
    try:
        threads.run_threads(work, WRITERS + 1)
        assert not pipeline.sessions._leases, "windows that ended still hold their session's state"
        assert ledgers["s1"].removals, "the clearer never cleared"
    finally:

        async def close() -> None:
            await (getattr(history, "aclose", None) or history.close)()

        asyncio.run(close())


class Gated(TokenBudgetComposedStrategy):
    """A budget strategy that, while ``gate`` is set, says it started and waits to be let go."""

    gate: tuple[asyncio.Event, asyncio.Event] | None = None

    async def compact(self, history: Any, session: Any = None) -> list[ChatMessage]:
        if self.gate is not None:
            started, go = self.gate
            started.set()
            await go.wait()
        return await super().compact(history, session)


class GatedCalibration(Calibration):
    """Corrections that, while ``gate`` is set, say they were asked for and wait to be let go (a state store that
    answers slowly)."""

    gate: tuple[asyncio.Event, asyncio.Event] | None = None

    async def factor(self, model: str) -> float:
        if self.gate is not None:
            started, go = self.gate
            started.set()
            await go.wait()
        return await super().factor(model)


@pytest.mark.parametrize("retention", [HistoryRetention.PERMANENT, HistoryRetention.NONE], ids=["permanent", "unsaved"])
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_window_of_a_session_cleared_while_it_was_assembled_is_not_its_last(
    request: pytest.FixtureRequest, backend: str, retention: HistoryRetention
) -> None:
    """A window under way when its session is cleared ends after a window of the new transcript: the last window
    (what ``record_usage`` counts) is the new one. It was the old one under retention ``NONE``, whose generation a
    clear does not change: the old window was kept because another window of the session was under way."""
    history = history_of(request, backend)
    strategy = Gated([], token_budget=BUDGET)
    pipeline = CompactionPipeline([strategy])
    context = AgentContext(ContextConfig(history, pipeline, retention=retention))

    async def run() -> None:
        try:
            await context.add_messages("s", [ChatMessage.user(f"old turn {i}", id=f"old-{i}") for i in range(4)])
            started, go = asyncio.Event(), asyncio.Event()
            strategy.gate = (started, go)
            first = asyncio.create_task(context.get_prompt_window("s"))
            await started.wait()
            strategy.gate = None
            await context.clear("s")
            await context.add_messages("s", [ChatMessage.user("new turn", id="new")])
            assert [m.id for m in await context.get_prompt_window("s")] == ["new"]
            go.set()
            assert [m.id for m in await first] == [f"old-{i}" for i in range(4)]  # asked for before the clear
            last = await pipeline.last_window("agent", "s", history=history)
            assert last is not None and [m.id for m in last] == ["new"]
        finally:
            await (getattr(history, "aclose", None) or history.close)()

    asyncio.run(run())


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_window_asked_for_just_before_a_clear_keeps_nothing_of_the_removed_turns(
    request: pytest.FixtureRequest, backend: str
) -> None:
    history = history_of(request, backend)
    pipeline = CompactionPipeline([RelevantRecallStrategy(token_budget=BUDGET, meaning=None, prefer="cache")])
    context = AgentContext(
        ContextConfig(history, pipeline, retention=HistoryRetention.NONE, model="gpt-4o"), agent_id="agent"
    )
    calibration = GatedCalibration()
    context.config.calibration = calibration

    async def run() -> None:
        try:
            await context.add_messages("s", [ChatMessage.user(f"old invoice {i}", id=f"old-{i}") for i in range(6)])
            started, go = asyncio.Event(), asyncio.Event()
            calibration.gate = (started, go)
            first = asyncio.create_task(context.get_prompt_window("s"))
            await started.wait()  # the request holds the unsaved turns; the window has not begun
            calibration.gate = None
            await context.clear("s")
            go.set()
            await first
            assert pipeline.sessions.find("agent", "s") is None, "the state of the removed turns is kept"
            assert await pipeline.last_window("agent", "s", history=history) is None
            with pytest.raises(InvalidArgument):
                await context.record_usage("s", 100)
        finally:
            await (getattr(history, "aclose", None) or history.close)()

    asyncio.run(run())


@pytest.mark.parametrize("backend", ["redis", "postgres", "hybrid"])
def test_append_many_counts_what_it_stored_under_writers_of_overlapping_batches(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Threads, each running a loop per batch, append overlapping batches (every message is in the batches of
    two threads, in a different order) to one session: the counts ``append_many`` returns add up to the number
    of messages the session holds, and none passes its batch."""
    if backend == "hybrid":
        from ravi.agents.context.hybrid import HybridHistoryProvider

        history: Any = HybridHistoryProvider(history_of(request, "redis"), history_of(request, "postgres"))
    else:
        history = history_of(request, backend)
    pool = [ChatMessage.user(f"shared turn {i}", id=f"m{i}") for i in range(60)]
    writers = 4
    counts: list[int] = []
    lock = threading.Lock()

    def work(thread: int) -> None:
        mine = pool[thread * 15 : thread * 15 + 30] if thread < writers - 1 else pool[45:] + pool[:15]
        if thread % 2:
            mine = mine[::-1]
        for start in range(0, len(mine), 5):
            batch = mine[start : start + 5]
            stored = asyncio.run(history.append_many("agent", batch, session_id="s", run_id=f"run-{thread}"))
            assert stored is not None and 0 <= stored <= len(batch)
            with lock:
                counts.append(stored)

    async def stored() -> list[ChatMessage]:
        return await history.get_messages("agent", session_id="s")

    async def close() -> None:
        for store in (history.hot, history.cold) if backend == "hybrid" else (history,):
            await (getattr(store, "aclose", None) or store.close)()

    try:
        threads.run_threads(work, writers)
        held = asyncio.run(stored())
        assert sorted(m.id for m in held) == sorted(m.id for m in pool)
        assert sum(counts) == len(pool), f"the appends said they stored {sum(counts)} of {len(pool)}"
    finally:
        asyncio.run(close())
