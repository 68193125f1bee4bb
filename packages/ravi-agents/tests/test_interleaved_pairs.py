"""Transcripts where other messages came between a tool call and its results: two writers of one session, or a
user who spoke while a tool ran. A window never holds a tool result whose call it does not hold before it
(providers refuse such a request), whichever strategy cut it and whichever face asked for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.agents.context import (
    AgentContext,
    CompactionPipeline,
    ContextConfig,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowCompaction,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    WindowRequest,
)
from ravi.agents.context.functional import CompactionPolicy, compact, find_cut_point
from ravi.agents.context.manager import ContextManager
from ravi.conformance.strategy import transcripts
from ravi.kernel.messages import ChatMessage, ToolCallBlock

FACTORIES: dict[str, Callable[[int], object]] = {
    "budget": lambda n: TokenBudgetComposedStrategy([], token_budget=n * 60),
    "budget_composed": lambda n: TokenBudgetComposedStrategy(
        [ToolResultCompactionStrategy(200), SelectiveToolCallCompactionStrategy(1)], token_budget=n * 60
    ),
    "sliding": lambda n: SlidingWindowCompaction(max_messages=n),
    "selective": lambda n: SelectiveToolCallCompactionStrategy(keep_recent_groups=n % 3),
    "recall": lambda n: RelevantRecallStrategy(token_budget=n * 60, meaning=None),
    "recall_cache": lambda n: RelevantRecallStrategy(token_budget=n * 60, meaning=None, prefer="cache"),
}


def orphans(window: Sequence[ChatMessage]) -> list[str]:
    """The ids of the tool results in ``window`` whose call is not in a message before them."""
    calls: set[str] = set()
    found = []
    for m in window:
        calls.update(c.id for c in m.tool_calls)
        result = m.tool_result
        if m.role == "tool" and result is not None and result.tool_call_id not in calls:
            found.append(m.id)
    return found


def interleaved(history: list[ChatMessage], spots: list[int]) -> list[ChatMessage]:
    """``history`` with a user message put before each position of ``spots`` (inside tool groups too)."""
    out = list(history)
    for k, spot in enumerate(sorted(spots, reverse=True)):
        out.insert(min(spot, len(out)), ChatMessage.user(f"meanwhile {k}: and the deploy?", id=f"x{k}-{spot}"))
    return out


def call(i: int) -> list[ChatMessage]:
    """A tool call, a message from elsewhere, then the call's result."""
    return [
        ChatMessage.user(f"question {i} about the deploy " + "w " * 40, id=f"u{i}"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id=f"c{i}", name="f", arguments={})], id=f"a{i}"),
        ChatMessage.user(f"meanwhile {i}", id=f"x{i}"),
        ChatMessage.tool(f"c{i}", "deploy log " * 30, id=f"t{i}"),
    ]


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("budget", [157, 211, 400, 1_000])
async def test_a_window_cut_between_a_call_and_its_late_result_holds_no_orphan(name: str, budget: int) -> None:
    """A cut between a call and its result, with a message between them: the result is left out with its call
    (it was sent alone, and the provider refused the request)."""
    history = InMemoryHistoryProvider()
    await history.append_many("agent", [m for i in range(40) for m in call(i)], session_id="s")
    context = AgentContext(ContextConfig(history, [FACTORIES[name](budget // 60 or 1)]))
    window = await context.get_prompt_window("s")
    assert not orphans(window), [m.id for m in window][:6]
    assert adjacent(window), [m.id for m in window][:6]


@settings(max_examples=40, deadline=None)
@given(
    history=transcripts,
    spots=st.lists(st.integers(0, 80), max_size=6),
    n=st.integers(1, 30),
    name=st.sampled_from(sorted(FACTORIES)),
)
def test_no_face_sends_an_orphaned_result(history: list[ChatMessage], spots: list[int], n: int, name: str) -> None:
    """A window of given messages and one of a stored session read in windows, on random transcripts with messages
    put between calls and results: no result without its call, each right after it, the other messages in their
    order, nothing twice."""
    messages = interleaved(history, spots)

    async def windows() -> list[list[ChatMessage]]:
        given_ = await CompactionPipeline([FACTORIES[name](n)]).window(WindowRequest(messages=messages))  # type: ignore[list-item]
        store = InMemoryHistoryProvider()
        if messages:
            await store.append_many("agent", messages, session_id="s")
        stored = await AgentContext(ContextConfig(store, [FACTORIES[name](n)])).get_prompt_window("s")  # type: ignore[list-item]
        return [given_.messages, stored]

    position = {m.id: i for i, m in enumerate(messages)}
    for window in asyncio.run(windows()):
        assert not orphans(window)
        assert adjacent(window), "a result not right after its call"
        ids = [m.id for m in window]
        assert len(ids) == len(set(ids)), "a message twice"
        others = [position[m.id] for m in window if m.id in position and m.role != "tool"]
        assert others == sorted(others), "order changed (only results move, up to their calls)"


@settings(max_examples=20, deadline=None)
@given(history=transcripts, spots=st.lists(st.integers(0, 80), max_size=6), n=st.integers(1, 30))
def test_a_context_manager_sends_no_orphaned_result(history: list[ChatMessage], spots: list[int], n: int) -> None:
    """001's face: the dicts it sends hold no tool result whose call is not sent before it."""
    messages = interleaved(history, spots)

    async def sent() -> list[dict[str, object]]:
        store = InMemoryHistoryProvider()
        if messages:
            await store.append_many("agent", messages, session_id="s")
        manager = ContextManager(history=store, session_id="s", max_tokens=n * 60 + 10)
        return await manager.get_messages_for_request()

    calls: set[object] = set()
    for item in asyncio.run(sent()):
        calls.update(c["id"] for c in item.get("tool_calls") or ())  # type: ignore[attr-defined]
        assert item["role"] != "tool" or item["tool_call_id"] in calls


async def recalled(old: list[ChatMessage], prefer: str) -> list[ChatMessage]:
    """The recall window (words only, no neighbours, 600 tokens) of ``old`` buried under 60 plain turns, for a
    request about the zebra migration that ``old`` tells of."""
    history = InMemoryHistoryProvider()
    filler = [
        m
        for i in range(60)
        for m in (
            ChatMessage.user(f"plain question {i} " + "w " * 30, id=f"q{i}"),
            ChatMessage.assistant(f"plain answer {i} " + "v " * 30, id=f"r{i}"),
        )
    ]
    request = ChatMessage.user("how did the zebra migration go?")
    await history.append_many("agent", [*old, *filler, request], session_id="s")
    strategy = RelevantRecallStrategy(token_budget=600, meaning=None, spread=0.0, prefer=prefer)  # type: ignore[arg-type]
    return await AgentContext(ContextConfig(history, [strategy])).get_prompt_window("s")


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
async def test_recall_never_brings_back_a_result_stored_apart_from_its_call(prefer: str) -> None:
    """A result stored apart from its call is a unit of its own; recall, which reaches far older turns than the
    engine reads, never brings it back without its call, though it matches the request best."""
    old = [
        ChatMessage.user("start the zebra migration", id="u0"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id="c0", name="migrate", arguments={})], id="a0"),
        ChatMessage.user("meanwhile: lunch?", id="x0"),
        ChatMessage.tool("c0", "zebra migration finished: 41 zebra rows moved", id="t0"),
    ]
    window = await recalled(old, prefer)
    assert "u0" in [m.id for m in window]  # recall reached the oldest turns
    assert not orphans(window), [m.id for m in window]


async def test_the_manifest_says_the_engine_left_the_result_out() -> None:
    """An explained window accounts for the result it left out: dropped, for the tool pairs."""
    history = InMemoryHistoryProvider()
    await history.append_many("agent", [m for i in range(40) for m in call(i)], session_id="s")
    context = AgentContext(ContextConfig(history, [TokenBudgetComposedStrategy([], token_budget=220)]))
    window = await context.get_prompt_window("s")
    explained = await context.explain("s")
    assert explained.messages == window and window[0].id == "u39"
    entry = explained.entry("t38")
    assert entry is not None and (entry.status, entry.strategy) == ("dropped", "tool pairs")


def adjacent(window: Sequence[ChatMessage]) -> bool:
    """Whether each tool result comes right after its call (only results and system messages between them), the
    one shape every provider takes."""
    for i, m in enumerate(window):
        result = m.tool_result
        if m.role != "tool" or result is None:
            continue
        j = i - 1
        while j >= 0 and window[j].role in ("tool", "system"):
            j -= 1
        if j < 0 or result.tool_call_id not in {c.id for c in window[j].tool_calls}:
            return False
    return True


async def test_a_result_stored_apart_is_sent_right_after_its_call() -> None:
    """Parallel calls whose second result came after a user turn: the window sends both results right after the
    call, then the user turn (the only move a window makes: providers take a result only there)."""
    calls = [ToolCallBlock(id=f"c{i}", name="f", arguments={}) for i in (1, 2)]
    messages = [
        ChatMessage.user("check both services", id="u"),
        ChatMessage.assistant(tool_calls=calls, id="a"),
        ChatMessage.tool("c1", "service 1 is up", id="t1"),
        ChatMessage.user("and hurry please", id="x"),
        ChatMessage.tool("c2", "service 2 is up", id="t2"),
    ]
    history = InMemoryHistoryProvider()
    await history.append_many("agent", messages, session_id="s")
    window = await AgentContext(ContextConfig(history, [])).get_prompt_window("s")
    assert [m.id for m in window] == ["u", "a", "t1", "t2", "x"]
    assert [m.id for m in await history.get_messages("agent", session_id="s")] == ["u", "a", "t1", "x", "t2"]


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
async def test_recall_never_brings_back_a_call_without_its_results(prefer: str) -> None:
    """A call whose result was stored apart (or never stored) is a unit without its results: recall does not
    bring it back, though it matches the request best, since a provider refuses a call without its results."""
    old = [
        ChatMessage.user("lunch?", id="u0"),
        ChatMessage.assistant(
            "running the zebra migration now",
            tool_calls=[ToolCallBlock(id="c0", name="migrate", arguments={"what": "zebra migration"})],
            id="a0",
        ),
        ChatMessage.user("meanwhile: lunch?", id="x0"),
        ChatMessage.tool("c0", "done: 41 rows moved", id="t0"),
    ]
    window = await recalled(old, prefer)
    calls = {c.id for m in window for c in m.tool_calls}
    results = {m.tool_result.tool_call_id for m in window if m.tool_result is not None}
    assert calls <= results, [m.id for m in window]


@pytest.mark.parametrize("name", ["budget", "recall", "recall_cache"])
async def test_a_later_wider_read_checks_the_older_messages_it_reaches(name: str) -> None:
    """The engine read only the newest part of the session at first (a small budget), where every result follows
    its call; a later window with a larger budget reads older messages, among them a result stored apart from its
    call. It is looked at too, and never sent without its call, whatever the budget cuts."""
    history = InMemoryHistoryProvider()
    old = [
        ChatMessage.user("start the migration " + "w " * 40, id="u0"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id="c0", name="f", arguments={})], id="a0"),
        ChatMessage.user("meanwhile " + "w " * 40, id="x0"),
        ChatMessage.tool("c0", "log " * 30, id="t0"),
    ]
    filler = [ChatMessage.user(f"question {i} " + "w " * 30, id=f"q{i}") for i in range(40)]
    await history.append_many("agent", [*old, *filler], session_id="s")
    pipeline = CompactionPipeline([FACTORIES[name](5)])
    assert pipeline.reads_windows(history)
    first = await pipeline.window(WindowRequest("agent", "s", history=history))
    assert "t0" not in [m.id for m in first.messages]  # the first read did not reach it
    for budget in range(300, 3_000, 20):
        window = await pipeline.window(WindowRequest("agent", "s", history=history, budget=budget))
        assert not orphans(window.messages), (budget, [m.id for m in window.messages][:4])


@settings(max_examples=25, deadline=None)
@given(
    history=transcripts,
    spots=st.lists(st.integers(0, 80), max_size=6),
    apart=st.lists(st.integers(0, 30), min_size=1, max_size=3),
    later=st.integers(0, 40),
    grown=st.integers(0, 60),
    name=st.sampled_from(["budget", "recall", "recall_cache"]),
)
def test_windows_read_in_parts_send_no_orphaned_result(
    history: list[ChatMessage], spots: list[int], apart: list[int], later: int, grown: int, name: str
) -> None:
    """One engine assembles windows of a session from a small budget to a large one, so each read reaches older
    messages than the one before (and, after more turns are stored, newer ones): none holds a result without its
    call."""
    turns = [ChatMessage.user(f"later {i} " + "w " * 20, id=f"later-{i}") for i in range(later)]
    for i, spot in enumerate(sorted(apart, reverse=True)):  # a call, a long message from elsewhere, its result
        turns[spot:spot] = [
            ChatMessage.assistant(tool_calls=[ToolCallBlock(id=f"late{i}", name="f", arguments={})], id=f"late-a{i}"),
            ChatMessage.user(f"meanwhile {i} " + "w " * 60, id=f"late-x{i}"),
            ChatMessage.tool(f"late{i}", "deploy log " * 30, id=f"late-t{i}"),
        ]
    messages = interleaved(history, spots) + turns
    more = [ChatMessage.user(f"more {i} " + "w " * 20, id=f"more-{i}") for i in range(grown)]

    async def windows() -> list[list[ChatMessage]]:
        store = InMemoryHistoryProvider()
        await store.append_many("agent", messages, session_id="s")
        pipeline = CompactionPipeline([FACTORIES[name](1)])  # type: ignore[list-item]
        got = []
        for size in range(60, 2_400, 8):  # a cut at nearly every unit, each read reaching further back
            if size == 1_200 and more:
                await store.append_many("agent", more, session_id="s")
            got.append((await pipeline.window(WindowRequest("agent", "s", history=store, budget=size))).messages)
        return got

    for window in asyncio.run(windows()):
        assert not orphans(window), [m.id for m in window]


def crossed() -> list[ChatMessage]:
    """Two writers' calls crossed: call B, call A, then B's result and A's. A's unit (its call and the results
    after it) holds B's result, whose call is a unit of its own before it."""
    return [
        ChatMessage.user("start the zebra migration", id="u0"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id="cB", name="migrate", arguments={})], id="aB"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id="cA", name="count", arguments={})], id="aA"),
        ChatMessage.tool("cB", "zebra migration finished: 41 zebra rows moved", id="tB"),
        ChatMessage.tool("cA", "zebra count 41", id="tA"),
    ]


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
async def test_recall_never_brings_back_a_unit_holding_another_calls_result(prefer: str) -> None:
    """Calls of two writers crossed, so one call's unit holds the other's result: recall, which reaches turns the
    engine never read, does not bring that unit back (the result would go without its call)."""
    window = await recalled(crossed(), prefer)
    assert "u0" in [m.id for m in window]  # recall reached the oldest turns
    assert not orphans(window), [m.id for m in window]


async def test_the_functional_compact_keeps_no_result_whose_call_it_summarised() -> None:
    """002's ``compact``: a cut between a call and its result stored apart (a user spoke while the tool ran)
    summarises the call; the result is left out of the tail with it."""
    messages = [
        ChatMessage.user("hi " * 20, id="u"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id="c1", name="f", arguments={})], id="a1"),
        ChatMessage.user("meanwhile", id="x"),
        ChatMessage.tool("c1", "result", id="r1"),
        ChatMessage.assistant("done", id="a"),
        ChatMessage.user("next?", id="u2"),
    ]
    out = await compact(messages, cfg=CompactionPolicy(keep_recent=4))
    assert [m.id for m in out[1:]] == ["x", "a", "u2"]


@settings(max_examples=100, deadline=None)
@given(history=transcripts, spots=st.lists(st.integers(0, 40), min_size=1, max_size=8), keep=st.integers(0, 30))
def test_the_functional_compact_sends_no_orphaned_result(
    history: list[ChatMessage], spots: list[int], keep: int
) -> None:
    """On random transcripts with messages put between calls and results, ``compact`` sends no result whose call it
    summarised, and keeps every other message of the tail."""
    messages = interleaved(history, spots)
    out = asyncio.run(compact(messages, cfg=CompactionPolicy(keep_recent=keep)))
    assert set(orphans(out)) <= set(orphans(messages))  # none the cut made
    tail = messages[find_cut_point(messages, keep) :]
    kept = {m.id for m in out}
    assert all(m.id in kept for m in tail if m.role != "tool"), "a message of the tail lost"
