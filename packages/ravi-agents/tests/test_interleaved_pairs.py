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
    TokenBudgetContext,
    ToolResultCompactionStrategy,
    WindowRequest,
)
from ravi.agents.context.functional import CompactionPolicy, PolicyCompactionStrategy, compact, find_cut_point
from ravi.agents.context.manager import ContextManager
from ravi.conformance.strategy import transcripts
from ravi.kernel.messages import ChatMessage, ToolCallBlock

from .pairs import orphans

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


def manager_sent(messages: list[ChatMessage], n: int) -> list[dict[str, object]]:
    """The dicts a ``ContextManager`` of ``n * 60 + 10`` tokens sends for a session of ``messages``."""

    async def sent() -> list[dict[str, object]]:
        store = InMemoryHistoryProvider()
        if messages:
            await store.append_many("agent", messages, session_id="s")
        manager = ContextManager(history=store, session_id="s", max_tokens=n * 60 + 10)
        return await manager.get_messages_for_request()

    return asyncio.run(sent())


@settings(max_examples=20, deadline=None)
@given(history=transcripts, spots=st.lists(st.integers(0, 80), max_size=6), n=st.integers(1, 30))
def test_a_context_manager_sends_no_orphaned_result(history: list[ChatMessage], spots: list[int], n: int) -> None:
    """001's face: the dicts it sends hold no tool result whose call is not sent before it."""
    calls: set[object] = set()
    for item in manager_sent(interleaved(history, spots), n):
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


# -- calls never answered, results stored twice (decision 113) -------------------------------------------------------


def refusals(window: Sequence[ChatMessage]) -> list[str]:
    """What a provider refuses in ``window``: a result not right after its call (or without it), a second result for
    one call, and a call not followed by a result for each of its ids (OpenAI and Anthropic refuse each)."""
    found = [f"result without its call: {i}" for i in orphans(window)]
    if not adjacent(window):
        found.append("a result not right after its call")
    answered: set[str] = set()
    for i, m in enumerate(window):
        if m.tool_calls:
            j, answers = i + 1, set()
            while j < len(window) and window[j].role in ("tool", "system"):
                result = window[j].tool_result
                if result is not None:
                    answers.add(result.tool_call_id)
                j += 1
            found += [f"call without its result: {c.id}" for c in m.tool_calls if c.id not in answers]
        result = m.tool_result
        if result is not None:
            if result.tool_call_id in answered:
                found.append(f"a second result for {result.tool_call_id}: {m.id}")
            answered.add(result.tool_call_id)
    return found


@st.composite
def unruly(draw: st.DrawFn) -> list[ChatMessage]:
    """Random transcripts with every shape writers leave: messages between calls and results, results never
    stored (a crashed tool, an agent stopped mid-tool), results stored twice (a retried tool, two writers; the
    second right after the first or later), and now and then a call still running at the end."""
    messages = interleaved(draw(transcripts), draw(st.lists(st.integers(0, 80), max_size=6)))
    results = [m for m in messages if m.role == "tool"]
    if results:
        for k, (twice, later) in enumerate(
            draw(st.lists(st.tuples(st.sampled_from(results), st.integers(0, 4)), max_size=3))
        ):
            at = next(i for i, m in enumerate(messages) if m.id == twice.id) + 1 + later
            result = twice.tool_result
            assert result is not None
            again = ChatMessage.tool(result.tool_call_id, f"retried {k}: " + result.content, id=f"again{k}-{twice.id}")
            messages.insert(min(at, len(messages)), again)
        lost = draw(st.sets(st.sampled_from([m.id for m in results]), max_size=3))
        messages = [m for m in messages if m.id not in lost]
    running = draw(st.sampled_from([None, "", "let me look at the deploy log"]))
    if running is not None:
        call = ToolCallBlock(id="running", name="f", arguments={"q": "deploy"})
        messages.append(ChatMessage.assistant(running or None, tool_calls=[call], id="a-running"))
    return messages


FACES_STRATEGIES: dict[str, Callable[[int], object]] = {
    **FACTORIES,
    "policy": lambda n: PolicyCompactionStrategy(n * 60, CompactionPolicy(keep_recent=n % 7)),
}


@settings(max_examples=60, deadline=None)
@given(messages=unruly(), n=st.integers(1, 30), name=st.sampled_from(["none", *sorted(FACES_STRATEGIES)]))
def test_no_face_sends_an_unanswered_call_or_a_second_result(messages: list[ChatMessage], n: int, name: str) -> None:
    """A window of given messages, one of a stored session read in windows, and a model context's: no call
    without a result for each of its ids, no second result for one call, no result without its call; the other
    messages in their order, nothing twice; and the stored transcript as it was."""

    def strategies() -> list[object]:
        return [] if name == "none" else [FACES_STRATEGIES[name](n)]

    async def windows() -> list[list[ChatMessage]]:
        given_ = await CompactionPipeline(strategies()).window(WindowRequest(messages=messages))  # type: ignore[arg-type]
        store = InMemoryHistoryProvider()
        if messages:
            await store.append_many("agent", messages, session_id="s")
        stored = await AgentContext(ContextConfig(store, strategies())).get_prompt_window("s")  # type: ignore[arg-type]
        assert await store.get_messages("agent", session_id="s") == messages
        model_context = TokenBudgetContext(max_tokens=n * 60)
        if messages:
            await model_context.history.append_many("agent", messages, session_id="s")
        return [given_.messages, stored, await model_context.build("s")]

    position = {m.id: i for i, m in enumerate(messages)}
    for window in asyncio.run(windows()):
        assert not refusals(window), (refusals(window), [m.id for m in window])
        ids = [m.id for m in window]
        assert len(ids) == len(set(ids)), "a message twice"
        others = [position[m.id] for m in window if m.id in position and m.role != "tool"]
        assert others == sorted(others), "order changed (only results move, up to their calls)"


@settings(max_examples=30, deadline=None)
@given(messages=unruly(), n=st.integers(1, 30), name=st.sampled_from(sorted(FACES_STRATEGIES)))
def test_windows_of_a_growing_session_send_no_unanswered_call(messages: list[ChatMessage], n: int, name: str) -> None:
    """One engine assembles a window after each message is stored (so now and then while a tool runs: its call
    stored, its result not yet): none is refused by a provider."""

    async def windows() -> list[list[ChatMessage]]:
        store = InMemoryHistoryProvider()
        pipeline = CompactionPipeline([FACES_STRATEGIES[name](n)])  # type: ignore[list-item]
        got = []
        for k, m in enumerate(messages):
            await store.append("agent", m, session_id="s")
            budget = 60 * (n + k % 5)
            got.append((await pipeline.window(WindowRequest("agent", "s", history=store, budget=budget))).messages)
        return got

    for window in asyncio.run(windows()):
        assert not refusals(window), (refusals(window), [m.id for m in window])


@settings(max_examples=20, deadline=None)
@given(messages=unruly(), n=st.integers(1, 30))
def test_a_context_manager_sends_no_unanswered_call_or_second_result(messages: list[ChatMessage], n: int) -> None:
    """001's face: each call in the dicts it sends is followed by one result for each of its ids."""
    dicts = manager_sent(messages, n)
    assert not refusals([ChatMessage.from_openai(d) for d in dicts]), dicts


def running(text: str | None) -> list[ChatMessage]:
    """A user asks, the assistant calls a tool that is still running (its result not stored yet)."""
    return [
        ChatMessage.user("what does the deploy log say?", id="u"),
        ChatMessage.assistant(text, tool_calls=[ToolCallBlock(id="c1", name="logs", arguments={})], id="a"),
    ]


@pytest.mark.parametrize("text", [None, "let me look at the log"])
async def test_a_window_asked_for_while_a_tool_runs_leaves_its_call_out(text: str | None) -> None:
    """A second writer asks for a window while the first writer's tool runs: the call is not sent (a provider
    refuses a call without its result), the assistant's text is; once the result is stored, both are sent. The
    stored transcript keeps the call."""
    history = InMemoryHistoryProvider()
    await history.append_many("agent", running(text), session_id="s")
    context = AgentContext(ContextConfig(history, [TokenBudgetComposedStrategy([], token_budget=2_000)]))
    window = await context.get_prompt_window("s")
    assert [m.id for m in window] == (["u"] if text is None else ["u", "a"])
    assert not refusals(window)
    if text is not None:
        assert window[1].text == text and not window[1].tool_calls
    explained = await context.explain("s")
    entry = explained.entry("a")
    assert entry is not None and entry.strategy == "tool pairs"
    assert entry.status == ("dropped" if text is None else "truncated")
    assert (await history.get_messages("agent", session_id="s"))[-1].tool_calls  # stored as it was
    await history.append("agent", ChatMessage.tool("c1", "all green", id="t"), session_id="s")
    window = await context.get_prompt_window("s")
    assert [m.id for m in window] == ["u", "a", "t"] and window[1].tool_calls


async def test_a_call_whose_result_was_never_stored_is_left_out_of_every_later_window() -> None:
    """An agent stopped mid-tool: its call was stored, its result never, and the conversation went on. The call
    is left out of every window (the assistant's text kept), with the manifest saying so."""
    messages = [
        ChatMessage.user("check the deploy", id="u0"),
        ChatMessage.assistant(
            "checking", tool_calls=[ToolCallBlock(id=f"c{i}", name="f", arguments={}) for i in (1, 2)], id="a0"
        ),
        ChatMessage.tool("c1", "deploy 1 fine", id="t1"),
        ChatMessage.user("hello? are you there?", id="u1"),
        ChatMessage.assistant("sorry, the second check crashed", id="a1"),
    ]
    history = InMemoryHistoryProvider()
    await history.append_many("agent", messages, session_id="s")
    context = AgentContext(ContextConfig(history, []))
    window = await context.get_prompt_window("s")
    assert [m.id for m in window] == ["u0", "a0", "t1", "u1", "a1"]
    assert [c.id for c in window[1].tool_calls] == ["c1"] and window[1].text == "checking"
    explained = await context.explain("s")
    assert explained.messages == window
    entry = explained.entry("a0")
    assert entry is not None and (entry.status, entry.strategy) == ("truncated", "tool pairs")
    assert entry.chars_removed > 0


async def test_of_two_results_for_one_call_the_first_stored_is_sent() -> None:
    """A retried tool stored a second result for the same call, once right after the first and once later, after
    a user turn (two writers): the first stored is sent, the others are left out, and the manifest says so."""
    messages = [
        ChatMessage.user("check both", id="u0"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id=f"c{i}", name="f", arguments={}) for i in (1, 2)], id="a"),
        ChatMessage.tool("c1", "first answer", id="t1"),
        ChatMessage.tool("c1", "retried answer", id="t1-again"),
        ChatMessage.tool("c2", "second call's answer", id="t2"),
        ChatMessage.user("and?", id="u1"),
        ChatMessage.tool("c2", "retried by another writer", id="t2-again"),
    ]
    history = InMemoryHistoryProvider()
    await history.append_many("agent", messages, session_id="s")
    context = AgentContext(ContextConfig(history, []))
    window = await context.get_prompt_window("s")
    assert [m.id for m in window] == ["u0", "a", "t1", "t2", "u1"]
    explained = await context.explain("s")
    for left in ("t1-again", "t2-again"):
        entry = explained.entry(left)
        assert entry is not None and (entry.status, entry.strategy) == ("dropped", "tool pairs")


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
async def test_recall_never_brings_back_a_unit_with_two_results_for_one_call(prefer: str) -> None:
    """A retried tool stored two results right after its call: the unit holds both, and recall, which reaches
    turns the engine never read, does not bring it back (a provider refuses the second)."""
    old = [
        ChatMessage.user("start the zebra migration", id="u0"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id="c0", name="migrate", arguments={})], id="a0"),
        ChatMessage.tool("c0", "zebra migration timed out", id="t0"),
        ChatMessage.tool("c0", "zebra migration finished: 41 zebra rows moved", id="t0-again"),
    ]
    window = await recalled(old, prefer)
    assert "u0" in [m.id for m in window]  # recall reached the oldest turns
    assert not refusals(window), [m.id for m in window]


async def test_a_later_read_reaching_the_call_of_its_first_result_judges_that_calls_group() -> None:
    """A framework's run state gave the engine a session's messages from a result on (its call cut off), then
    the whole session: the call, which the first window could not see, asked for two results and got one. The
    second window does not send the unanswered call."""
    calls = [ToolCallBlock(id=f"c{i}", name="f", arguments={}) for i in (1, 2)]
    messages = [
        ChatMessage.user("check both services", id="u0"),
        ChatMessage.assistant("checking both", tool_calls=calls, id="a"),
        ChatMessage.tool("c1", "service 1 is up", id="t1"),
        ChatMessage.user("and the second?", id="u1"),
        ChatMessage.assistant("its check crashed", id="r1"),
        ChatMessage.user("ok", id="u2"),
    ]
    pipeline = CompactionPipeline([])
    first = await pipeline.window(WindowRequest("agent", "s", messages=messages[2:]))
    assert [m.id for m in first.messages] == ["u1", "r1", "u2"]
    second = await pipeline.window(WindowRequest("agent", "s", messages=messages))
    assert not refusals(second.messages), [m.id for m in second.messages]
    assert [c.id for c in second.messages[1].tool_calls] == ["c1"]


async def test_a_unit_held_by_a_cache_window_is_sent_with_one_result_when_its_call_is_answered_again() -> None:
    """``prefer="cache"`` holds the units it recalled and sends them again, unranked and unchecked, while the
    topic stays: each was checked when it was chosen, and what it holds never changes. What can change is the
    session around it: a retried tool stores a second result for a held unit's call among the newest turns. The
    next window still sends the held unit, and only its first result."""
    old = [
        ChatMessage.user("start the zebra migration", id="u0"),
        ChatMessage.assistant(tool_calls=[ToolCallBlock(id="c0", name="migrate", arguments={})], id="a0"),
        ChatMessage.tool("c0", "zebra migration finished: 41 zebra rows moved", id="t0"),
    ]
    filler = [
        m
        for i in range(60)
        for m in (
            ChatMessage.user(f"plain question {i} " + "w " * 30, id=f"q{i}"),
            ChatMessage.assistant(f"plain answer {i} " + "v " * 30, id=f"r{i}"),
        )
    ]
    history = InMemoryHistoryProvider()
    await history.append_many("agent", [*old, *filler], session_id="s")
    await history.append("agent", ChatMessage.user("how did the zebra migration go?", id="ask"), session_id="s")
    strategy = RelevantRecallStrategy(token_budget=600, meaning=None, spread=0.0, prefer="cache")
    context = AgentContext(ContextConfig(history, [strategy]))
    first = await context.get_prompt_window("s")
    assert {"a0", "t0"} <= {m.id for m in first}  # recalled, and held
    again = ChatMessage.tool("c0", "zebra migration finished (retried)", id="t0-again")
    await history.append("agent", again, session_id="s")
    window = await context.get_prompt_window("s")
    assert [m.id for m in window if m.id in ("a0", "t0", "t0-again")] == ["a0", "t0"]
    assert not refusals(window), [m.id for m in window]


# -- the functional compact gives the engine's guarantee (decision 117) -----------------------------------------------


@settings(max_examples=150, deadline=None)
@given(messages=unruly(), keep=st.integers(0, 40))
def test_no_output_of_the_functional_compact_is_refused(messages: list[ChatMessage], keep: int) -> None:
    """002's ``compact``, whether it cuts or not (a ``keep_recent`` past the length cuts nothing): no call without a
    result for each of its ids right after it, no second result for one call, no result without its call; the
    messages it is given are left as they were."""
    given_ = [m.model_copy(deep=True) for m in messages]
    out = asyncio.run(compact(messages, cfg=CompactionPolicy(keep_recent=keep)))
    assert not refusals(out), (refusals(out), [m.id for m in out])
    assert messages == given_  # nothing the caller holds is changed
    ids = [m.id for m in out]
    assert len(ids) == len(set(ids)), "a message twice"


async def test_the_functional_compact_that_cuts_nothing_still_leaves_out_what_a_provider_refuses() -> None:
    """Nothing old enough to condense: ``compact`` used to give its input back as it was, with a call whose result
    was never stored and a second result for one call. It now gives what the engine gives: the call taken out of
    a copy of its message (its text kept), the first result of a call, the rest as given."""
    messages = [
        ChatMessage.user("check both", id="u0"),
        ChatMessage.assistant(
            "checking", tool_calls=[ToolCallBlock(id=f"c{i}", name="f", arguments={}) for i in (1, 2)], id="a"
        ),
        ChatMessage.tool("c1", "first answer", id="t1"),
        ChatMessage.tool("c1", "retried answer", id="t1-again"),
        ChatMessage.user("and?", id="u1"),
    ]
    out = await compact(messages, cfg=CompactionPolicy(keep_recent=8))
    assert [m.id for m in out] == ["u0", "a", "t1", "u1"]
    assert [c.id for c in out[1].tool_calls] == ["c1"] and out[1].text == "checking"
    assert [c.id for c in messages[1].tool_calls] == ["c1", "c2"]  # the given message keeps its calls
    assert out == (await CompactionPipeline([]).window(WindowRequest(messages=messages))).messages
