from __future__ import annotations

import asyncio

import pytest

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    HistoryRetention,
    HybridContext,
    InMemoryHistoryProvider,
    SlidingWindowCompaction,
    SlidingWindowContext,
    SummarizingContext,
    TokenBudgetComposedStrategy,
    TokenBudgetContext,
    ToolResultCompactionStrategy,
    UnboundedContext,
)
from ravi.kernel.errors import ConfigurationError, InvalidArgument, MessageConflict
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.registry import load_backend


async def test_history_keeps_order_runs_and_sessions_apart() -> None:
    history = InMemoryHistoryProvider()
    await history.append_many("a", [ChatMessage.user("1"), ChatMessage.user("2")], session_id="s1", run_id="r1")
    await history.append("a", ChatMessage.user("3"), session_id="s1", run_id="r2")
    await history.append("a", ChatMessage.user("other"), session_id="s2", run_id="r1")
    await history.append("b", ChatMessage.user("other agent"), session_id="s1", run_id="r1")
    assert [m.text for m in await history.get_messages("a", session_id="s1")] == ["1", "2", "3"]
    assert [m.text for m in await history.get_messages("a", session_id="s1", limit=1, offset=1)] == ["2"]
    assert await history.get_messages("a", session_id="s1", offset=10) == []
    assert await history.clear_run("a", session_id="s1", run_id="r1") == 2
    assert [m.text for m in await history.get_messages("a", session_id="s1")] == ["3"]
    assert await history.count_messages("a", session_id="s2") == 1
    assert await history.count_messages("b", session_id="s1") == 1


async def test_history_appends_are_idempotent_and_readers_cannot_change_it() -> None:
    history = InMemoryHistoryProvider()
    message = ChatMessage.user("once")
    await history.append("a", message, session_id="s")
    await history.append("a", message, session_id="s")
    await history.append_many("a", [message, message], session_id="s")
    got = await history.get_messages("a", session_id="s")
    assert len(got) == 1
    got.clear()
    with pytest.raises(TypeError):
        (await history.get_messages("a", session_id="s"))[0].metadata["x"] = 1
    assert await history.count_messages("a", session_id="s") == 1


async def test_bad_input_is_refused_and_loses_nothing() -> None:
    history = InMemoryHistoryProvider()
    await history.append("a", ChatMessage.user("kept"), session_id="s")
    with pytest.raises(InvalidArgument):
        await history.append_many("a", [ChatMessage.user("x"), {"role": "user"}], session_id="s")  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        await history.get_messages("a", session_id="s", limit=-1)
    with pytest.raises(InvalidArgument):
        await history.append("", ChatMessage.user("x"), session_id="s")
    assert [m.text for m in await history.get_messages("a", session_id="s")] == ["kept"]


async def test_retention_policies() -> None:
    for retention, expected in [(HistoryRetention.PERMANENT, 2), (HistoryRetention.RUN, 0), (HistoryRetention.NONE, 0)]:
        history = InMemoryHistoryProvider()
        context = AgentContext(ContextConfig(history, retention=retention))
        async with context.run("s", "r1") as run:
            await run.add(ChatMessage.user("hi"), ChatMessage.assistant("hello"))
            assert [m.text for m in await run.window()] == ["hi", "hello"]  # the run sees its turns
            stored = await history.count_messages("agent", session_id="s")
            assert stored == (0 if retention is HistoryRetention.NONE else 2)
        assert await history.count_messages("agent", session_id="s") == expected
        assert len(await context.get_prompt_window("s")) == expected  # after the run: what was kept, nothing else


@pytest.mark.parametrize("retention", list(HistoryRetention))
async def test_turns_are_checked_as_a_store_checks_them_under_every_retention(retention: HistoryRetention) -> None:
    """Under retention NONE the turns were kept unchecked: an item that is not a ChatMessage raised AttributeError
    at every later window of the session, a retried turn was in the window twice, and a second message under a
    held id was kept beside the first. Each retention now checks them as the store does, keeping what it held."""
    context = AgentContext(ContextConfig(InMemoryHistoryProvider(), retention=retention))
    first, other = ChatMessage.user("one", id="m1"), ChatMessage.user("two", id="m1")
    async with context.run("s") as run:
        await run.add(first)
        for bad in ("hello", {"role": "user", "content": "x"}):
            with pytest.raises(InvalidArgument):
                await run.add(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await context.add_messages("s", None, run_id=run.run_id)  # type: ignore[arg-type]
        with pytest.raises(MessageConflict):
            await run.add(other)
        with pytest.raises(MessageConflict):
            await run.add(ChatMessage.user("three", id="m3"), other)
        await run.add(first)  # a retry
        fourth = ChatMessage.user("four", id="m4")
        await run.add(fourth, fourth.model_copy())
        assert [m.text for m in await run.window()] == ["one", "four"]


async def test_a_strategy_class_given_for_an_instance_is_refused_where_it_is_given() -> None:
    """A strategy's class has its instances' compact method, so it passed the check of a strategy: the pipeline
    was built, and every window then raised a bare TypeError (compact() missing raw_history)."""
    history = InMemoryHistoryProvider()
    mixed = [ToolResultCompactionStrategy(), SlidingWindowCompaction]
    for given in (SlidingWindowCompaction, [SlidingWindowCompaction], mixed):
        with pytest.raises(InvalidArgument, match="SlidingWindowCompaction"):
            ContextConfig(history, given)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="an instance"):
        TokenBudgetComposedStrategy([SlidingWindowCompaction], 1_000)  # type: ignore[list-item]


async def test_a_window_counter_that_is_not_a_token_counter_is_refused() -> None:
    """A window's counter was taken unchecked: a model name raised a bare AttributeError under a token budget and
    was ignored under a sliding window; a counter's class, which passes the protocol's check, was taken too."""
    from ravi.agents.tokens import HeuristicTokenCounter

    history = InMemoryHistoryProvider()
    await history.append("agent", ChatMessage.user("hi"), session_id="s")
    for pipeline in ([TokenBudgetComposedStrategy([], 1_000)], [SlidingWindowCompaction(3)]):
        context = AgentContext(ContextConfig(history, pipeline))
        for counter in ("gpt-4o", 5, HeuristicTokenCounter):
            with pytest.raises(ConfigurationError, match="counter must be a TokenCounter"):
                await context.get_prompt_window("s", counter=counter)  # type: ignore[arg-type]
        assert [m.text for m in await context.get_prompt_window("s", counter=HeuristicTokenCounter())] == ["hi"]
    with pytest.raises(ConfigurationError, match="the class HeuristicTokenCounter"):
        ContextConfig(history, counter=HeuristicTokenCounter)  # type: ignore[arg-type]


async def test_a_model_or_state_store_that_is_not_one_is_refused_when_configured() -> None:
    """ContextConfig kept its model and state store unchecked: a model that is not a name raised a bare
    AttributeError at record_usage, and a state store that is not one (a URL, a class) at the first window."""
    from ravi.agents.storage import InMemoryStateStore

    history = InMemoryHistoryProvider()
    for model in (5, "", "gpt\ud800"):
        with pytest.raises(ConfigurationError if model != "gpt\ud800" else InvalidArgument, match="model"):
            ContextConfig(history, model=model)  # type: ignore[arg-type]
    for state in ("redis://localhost:6379/0", InMemoryStateStore, history):
        with pytest.raises(ConfigurationError, match="state must be a session-state store"):
            ContextConfig(history, model="gpt-4o", state=state)  # type: ignore[arg-type]
    context = AgentContext(ContextConfig(history, model="gpt-4o", state=InMemoryStateStore()))
    await context.add_message("s", ChatMessage.user("hi " * 2_000))
    counted = context.config.pipeline.window_counter().count_messages(await context.get_prompt_window("s"))
    assert await context.record_usage("s", 2 * counted) > 1


async def test_run_retention_removes_only_that_run() -> None:
    history = InMemoryHistoryProvider()
    context = AgentContext(ContextConfig(history, retention=HistoryRetention.RUN))
    await history.append("agent", ChatMessage.user("earlier, permanent"), session_id="s", run_id="old")
    async with context.run("s") as run:
        await run.add(ChatMessage.user("scratch"))
    assert [m.text for m in await context.get_prompt_window("s")] == ["earlier, permanent"]


async def test_sessions_never_bleed() -> None:
    context = AgentContext(ContextConfig.default())
    await context.add_message("s1", ChatMessage.user("for s1"))
    await context.add_message("s2", ChatMessage.user("for s2"))
    assert [m.text for m in await context.get_prompt_window("s1")] == ["for s1"]


async def test_default_config_is_a_sliding_window_of_100() -> None:
    context = AgentContext(ContextConfig.default())
    await context.add_messages("s", [ChatMessage.user(str(i)) for i in range(150)])
    window = await context.get_prompt_window("s")
    assert len(window) == 100 and window[0].text == "50"


def test_config_refuses_what_is_not_a_history() -> None:
    with pytest.raises(ConfigurationError, match="HistoryProvider"):
        ContextConfig(object())  # type: ignore[arg-type]


async def test_model_context_family() -> None:
    msgs = [ChatMessage.system("rules")] + [ChatMessage.user(f"{i} " + "x" * 100) for i in range(30)]
    for config, check in [
        (UnboundedContext(), lambda w: len(w) == 31),
        (SlidingWindowContext(5), lambda w: len(w) == 6 and w[0].role == "system"),
        (TokenBudgetContext(300), lambda w: 0 < len(w) < 31 and w[0].role == "system"),
        (SummarizingContext(max_tokens=1_000), lambda w: any("ravi.summary" in m.metadata for m in w)),
    ]:
        context = AgentContext(config)
        await context.add_messages("s", msgs)
        assert check(await context.get_prompt_window("s")), type(config).__name__
    with pytest.raises(ConfigurationError):
        SummarizingContext()


async def test_hybrid_context_merges_hot_and_cold_without_duplicates() -> None:
    hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
    older = [ChatMessage.user(f"old {i}") for i in range(10)]
    await cold.append_many("agent", older, session_id="s")  # written before the hot tier existed
    context = AgentContext(HybridContext(hot, cold, recent_n=3, max_total=6))
    call = ToolCallBlock(id="c", name="f")
    await context.add_messages(
        "s", [ChatMessage.assistant(tool_calls=[call]), ChatMessage.tool("c", "r"), ChatMessage.user("new")]
    )
    window = await context.get_prompt_window("s")
    assert [m.text or m.role for m in window] == ["old 7", "old 8", "old 9", "assistant", "tool", "new"]
    assert await cold.count_messages("agent", session_id="s") == 13
    # the hot tier, added later, got the whole session at the first write (decision 78)
    assert await hot.get_stored("agent", session_id="s") == await cold.get_stored("agent", session_id="s")
    with pytest.raises(ConfigurationError, match="recent_n"):
        HybridContext(hot, cold, recent_n=10, max_total=5)


def test_in_memory_history_is_registered_as_memory() -> None:
    assert isinstance(load_backend("history", "memory"), InMemoryHistoryProvider)


def test_the_hybrid_provider_reads_the_cold_tier_when_the_hot_one_lost_the_session() -> None:
    """The hot tier expired the session (or was added later): reads and windows come from the cold tier, whole."""
    from ravi.agents.context import HybridHistoryProvider

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
        hybrid = HybridHistoryProvider(hot, cold)
        messages = [ChatMessage.system("rules")] + [ChatMessage.user(f"m{i}") for i in range(30)]
        await hybrid.append_many("a", messages, session_id="s")
        assert await hybrid.get_messages("a", session_id="s") == messages
        await hot.clear("a", session_id="s")  # the hot tier forgot it
        more = ChatMessage.user("after expiry")
        await hybrid.append("a", more, session_id="s")  # the hot tier now holds only this one
        assert await hybrid.get_messages("a", session_id="s") == [*messages, more]
        view = await hybrid.read_window("a", session_id="s", tokens=20)
        assert view.messages[0].text == "rules" and view.messages[-1] == more

    asyncio.run(main())


def test_the_hybrid_provider_takes_writes_from_another_event_loop_while_a_write_holds_the_session() -> None:
    """A store shared by threads that each run their own event loop: while one loop's write of a session is under
    way, with another task of that loop waiting for it, a write of the same session from a second loop completes,
    and every message reaches both tiers. One lock served every loop: the second loop found it held by the first
    and raised ``RuntimeError``."""
    from ravi.agents.context import HybridHistoryProvider

    class HeldCold(InMemoryHistoryProvider):
        """A cold tier whose writes of run ``held`` wait until the test lets them through."""

        def __init__(self) -> None:
            super().__init__()
            self.gate = asyncio.Event()
            self.entered = asyncio.Event()

        async def append_many(self, agent_id: str, messages, *, session_id: str, run_id: str = "") -> None:  # type: ignore[no-untyped-def]
            if run_id == "held":
                self.entered.set()
                await self.gate.wait()
            await super().append_many(agent_id, messages, session_id=session_id, run_id=run_id)

    async def main() -> None:
        hot, cold = InMemoryHistoryProvider(), HeldCold()
        hybrid = HybridHistoryProvider(hot, cold)
        held = ChatMessage.user("first", id="1")
        first = asyncio.create_task(hybrid.append("a", held, session_id="s", run_id="held"))
        await cold.entered.wait()  # the first write holds the session's lock
        second = asyncio.create_task(hybrid.append("a", ChatMessage.user("second", id="2"), session_id="s"))
        await asyncio.sleep(0)  # one step: the second task reaches the lock (nothing before it awaits) and waits
        assert not second.done()
        other = ChatMessage.user("from another loop", id="3")
        await asyncio.to_thread(asyncio.run, hybrid.append("a", other, session_id="s"))
        cold.gate.set()
        await asyncio.gather(first, second)
        for tier in (hot, cold):
            assert sorted(m.id for m in await tier.get_messages("a", session_id="s")) == ["1", "2", "3"]

    asyncio.run(main())


async def test_a_run_keeps_the_run_id_it_is_given_and_refuses_a_bad_one_before_its_block() -> None:
    """``run(session, "")`` replaced the empty run id (the one ``add_messages`` uses by default) with a fresh one;
    a run id that is not text was refused only at the block's first ``add``, and again when the run ended."""
    context = AgentContext()
    async with context.run("s", "") as run:
        assert run.run_id == ""
    entered: list[bool] = []
    for bad in (1, 1.5, b"r"):
        with pytest.raises(InvalidArgument, match="run_id"):
            async with context.run("s", bad):  # type: ignore[arg-type]
                entered.append(True)
    with pytest.raises(InvalidArgument, match="session_id"):
        async with context.run(None):  # type: ignore[arg-type]
            entered.append(True)
    assert not entered


def test_a_session_of_a_bad_id_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="session_id"):
        AgentContext().session(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="session_id"):
        AgentContext().session("")


async def test_record_usage_names_a_bad_count_before_the_missing_model() -> None:
    for bad in (True, 1.0, 0, -3, None):
        with pytest.raises(InvalidArgument, match="prompt_tokens"):
            await AgentContext().record_usage("s", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("retention", [HistoryRetention.PERMANENT, HistoryRetention.RUN, HistoryRetention.NONE])
async def test_the_usage_of_a_run_that_has_ended_is_recorded_whatever_the_retention(
    retention: HistoryRetention,
) -> None:
    """The provider's usage comes with its reply, often after the ``async with context.run(...)`` block: under
    ``RUN`` and ``NONE`` ending the run forgot the window, and the report was refused (``InvalidArgument``),
    failing the agent's turn after its reply. The window's count is kept; none of its turns are."""
    history = InMemoryHistoryProvider()
    context = AgentContext(ContextConfig(history, model="gpt-4o", retention=retention))
    async with context.run("s") as run:
        await run.add(ChatMessage.user("hi " * 2_000))
        counted = context.config.pipeline.window_counter().count_messages(await run.window())
    factor = await context.record_usage("s", 2 * counted)
    assert factor > 1
    assert await context.config.calibration.factor("gpt-4o") == factor
    assert await context.record_usage("s", 2 * counted) == factor  # reported again: the same window
    kept = 0 if retention is not HistoryRetention.PERMANENT else 1
    assert len(await history.get_messages("agent", session_id="s")) == kept
    assert len(await context.get_prompt_window("s")) == kept  # the run's turns are gone, as its retention says
    for forget in (context.clear("s"), context.replace_messages("s", [])):
        async with context.run("s") as run:
            await run.add(ChatMessage.user("hi " * 2_000))
            assert await run.window()
        await forget
        with pytest.raises(InvalidArgument, match="no window was assembled"):  # a cleared session: none to report
            await context.record_usage("s", 100)
    with pytest.raises(InvalidArgument, match="no window was assembled"):
        await context.record_usage("never-assembled", 100)
