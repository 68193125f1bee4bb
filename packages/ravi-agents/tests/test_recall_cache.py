"""What relevant recall keeps of a session's older units (their costs, words and labelled forms) changes no
window: a strategy that kept them gives the window a fresh one gives, over appends, clears and requests, and a
session never reads what another session kept."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, WindowRequest
from ravi.agents.context.compaction.relevant_recall import _UNITS, RelevantRecallStrategy, _Units
from ravi.kernel.messages import ChatMessage, ToolCallBlock

WORDS = ["cache", "deploy", "staging", "port", "walrus", "Maya", "invoice", "東京"]

step = st.one_of(
    st.tuples(st.just("user"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), st.booleans()),
    st.tuples(st.just("assistant"), st.lists(st.sampled_from(WORDS), max_size=12), st.booleans()),
    st.tuples(st.just("tool"), st.lists(st.sampled_from(WORDS), max_size=30), st.booleans()),
    st.tuples(st.just("call"), st.lists(st.sampled_from(WORDS), max_size=4), st.booleans()),
    st.tuples(st.just("result"), st.lists(st.sampled_from(WORDS), max_size=30), st.booleans()),
    st.tuples(st.just("clear"), st.just([]), st.booleans()),
    st.tuples(st.just("window"), st.just([]), st.booleans()),
)


def _messages(kind: str, words: list[str], named: bool, k: int) -> list[ChatMessage]:
    """The messages one step appends; ids repeat after a clear (``k`` counts from the session's start)."""
    text = " ".join(words)
    name = {"name": "Maya"} if named else {}
    if kind == "user":
        return [ChatMessage.user(text, id=f"m{k}", **name)]
    if kind == "assistant":
        return [ChatMessage.assistant(text or "ok", id=f"m{k}")]
    if kind == "result":  # a result of the last call, when that call is still open (else a user turn)
        return [ChatMessage.tool("c", text, id=f"m{k}")]
    call = ToolCallBlock(id=f"c{k}" if kind == "tool" else "c", name="lookup", arguments={"q": text})
    opened = ChatMessage.assistant(None, tool_calls=[call], id=f"m{k}")
    return [opened, ChatMessage.tool(f"c{k}", text, id=f"r{k}")] if kind == "tool" else [opened]


async def _window(pipeline: CompactionPipeline, store: InMemoryHistoryProvider, session: str) -> list[ChatMessage]:
    return (await pipeline.window(WindowRequest(agent_id="a", session_id=session, history=store))).messages


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=1, max_size=40),
    budget=st.integers(20, 400),
    prefer=st.sampled_from(["relevance", "cache"]),
)
def test_a_strategy_that_kept_its_units_gives_the_window_a_fresh_one_gives(
    steps: list[tuple[str, list[str], bool]], budget: int, prefer: str
) -> None:
    """After every append or clear, the long-lived pipeline's window equals that of a new strategy on the same
    store (``prefer="cache"`` compares against a new strategy fed the same requests, since it holds units)."""

    async def main() -> None:
        store = InMemoryHistoryProvider()
        kept = CompactionPipeline([RelevantRecallStrategy(budget, meaning=None, prefer=prefer)])  # type: ignore[arg-type]
        replay = CompactionPipeline([RelevantRecallStrategy(budget, meaning=None, prefer=prefer)])  # type: ignore[arg-type]
        k, open_call = 0, False
        for kind, words, named in steps:
            if kind == "clear":
                await store.clear("a", session_id="s")
                k, open_call = 0, False
                continue
            if kind == "result" and open_call is False:
                kind = "user"
            if kind != "window":
                open_call = kind == "call" or (open_call and kind == "result")
                batch = _messages(kind, words, named, k)
                k += len(batch)
                await store.append_many("a", batch, session_id="s")
            window = await _window(kept, store, "s")
            if prefer == "relevance":
                fresh = CompactionPipeline([RelevantRecallStrategy(budget, meaning=None)])
                assert window == await _window(fresh, store, "s")
            else:
                # the replayed pipeline sees the same requests (it holds units too) but keeps no unit facts
                [strategy] = replay.strategies
                replay.sessions.get("a", "s").put(strategy, _UNITS, _Units())
                assert window == await _window(replay, store, "s")

    asyncio.run(main())


def test_a_session_never_reads_the_unit_costs_another_session_kept() -> None:
    """Two sessions that share a message object and the ids after it, but not what those messages say: each
    session's window is costed on its own messages, so the longer tool result is not recalled into a window it
    does not fit."""
    call = ToolCallBlock(id="c0", name="lookup", arguments={"q": "walrus invoice"})
    shared = ChatMessage.assistant(None, tool_calls=[call], id="u0")
    short = ChatMessage.tool("c0", "in the drawer", id="a1")
    long = ChatMessage.tool("c0", "in the drawer " + "walrus invoice details " * 40, id="a1")
    filler = ChatMessage.user("something else entirely " * 30, id="f1")
    newest = [ChatMessage.user("walrus invoice again?", id="u2"), ChatMessage.assistant("looking", id="a3")]

    async def main() -> None:
        store = InMemoryHistoryProvider()
        await store.append_many("a", [shared, short, filler, *newest], session_id="s1")
        await store.append_many("a", [shared, long, filler, *newest], session_id="s2")
        budget = 60
        pipeline = CompactionPipeline([RelevantRecallStrategy(budget, meaning=None, recall_share=0.7)])
        first = await _window(pipeline, store, "s1")
        assert [m.id for m in first][:2] == ["u0", "a1"]  # the short unit is recalled
        second = await _window(pipeline, store, "s2")
        fresh = await _window(
            CompactionPipeline([RelevantRecallStrategy(budget, meaning=None, recall_share=0.7)]), store, "s2"
        )
        assert second == fresh
        assert "a1" not in [m.id for m in second]  # the long result does not fit

    asyncio.run(main())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories=st.lists(st.lists(step, min_size=1, max_size=25), min_size=1, max_size=6),
    budget=st.integers(20, 300),
)
def test_windows_of_given_messages_match_a_fresh_strategy(
    histories: list[list[tuple[str, list[str], bool]]], budget: int
) -> None:
    """Histories given to the engine directly (ranked in the process), one after another under one session and
    with the same message ids for other messages: each window is the window a new strategy makes of it."""

    async def main() -> None:
        kept = CompactionPipeline([RelevantRecallStrategy(budget, meaning=None)])
        for steps in histories:
            history: list[ChatMessage] = []
            for kind, words, named in steps:
                if kind in ("user", "assistant", "tool"):
                    history += _messages(kind, words, named, len(history))
                window = (await kept.window(WindowRequest(agent_id="a", session_id="s", messages=history))).messages
                fresh = CompactionPipeline([RelevantRecallStrategy(budget, meaning=None)])
                assert window == (await fresh.window(WindowRequest(messages=history))).messages

    asyncio.run(main())


def test_concurrent_windows_of_one_session_each_match_a_fresh_strategy() -> None:
    """Windows of one session assembled by interleaved asyncio tasks (sharing the session's kept units) while
    messages are appended: each is the window a fresh strategy makes of the session it read."""

    async def main() -> None:
        store = InMemoryHistoryProvider()
        words = WORDS * 3
        await store.append_many(
            "a",
            [ChatMessage.user(" ".join(words[i % 8 : i % 8 + 5]) * (1 + i % 4), id=f"m{i}") for i in range(60)],
            session_id="s",
        )
        kept = CompactionPipeline([RelevantRecallStrategy(120, meaning=None)])

        async def one(i: int) -> tuple[list[ChatMessage], list[ChatMessage]]:
            await store.append_many("a", [ChatMessage.user(f"{WORDS[i % 8]} walrus {i}", id=f"q{i}")], session_id="s")
            await asyncio.sleep(0)  # let the other tasks append and assemble before this one does
            window = await _window(kept, store, "s")
            # the in-memory store never suspends: the fresh window reads the same session as the kept one did
            fresh = CompactionPipeline([RelevantRecallStrategy(120, meaning=None)])
            return window, await _window(fresh, store, "s")

        for window, fresh in await asyncio.gather(*(one(i) for i in range(24))):
            assert window == fresh

    asyncio.run(main())


def test_a_unit_a_store_returns_again_as_new_objects_is_worked_out_once() -> None:
    """A store search builds new message objects on every call: equal messages at the same place find the facts
    kept for them; messages that differ at the same place (same offset, length and newest id) are worked out
    again."""
    from datetime import UTC, datetime

    from ravi.kernel.search import UnitMatch

    at = datetime(2026, 5, 1, tzinfo=UTC)

    def unit(text: str) -> UnitMatch:
        messages = (
            ChatMessage.user(text, id="u1", created_at=at),
            ChatMessage.assistant("noted", id="a2", created_at=at),
        )
        return UnitMatch(1.0, messages, 40)

    units = _Units()
    first = units.of(unit("the walrus invoice"))
    assert units.of(unit("the walrus invoice")) is first
    changed = units.of(unit("the walrus invoice, paid twice"))
    assert changed is not first
    assert changed.messages[0].text == "the walrus invoice, paid twice"
