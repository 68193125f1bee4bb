"""Tool pairs with unsaved turns (retention ``NONE``): the unsaved turns come after the stored ones in every read, so
a message stored meanwhile (another writer), or a turn another run adds to its own unsaved turns, lands before
messages a window already looked at. A call without its results, or a result apart from its call, among them is
still found, and the window sends each call with its results or not at all."""

from __future__ import annotations

import asyncio

from ravi.agents.context import (
    AgentContext,
    CompactionPipeline,
    ContextConfig,
    InMemoryHistoryProvider,
    SlidingWindowCompaction,
    WindowRequest,
)
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.messages import ChatMessage, ToolCallBlock


def _paired(window: list[ChatMessage]) -> bool:
    """Whether each call in ``window`` is followed by one result for each of its ids, and each result follows its
    call (only results and system messages between them)."""
    open_ids: set[str] = set()
    for m in window:
        if m.role == "tool":
            result = m.tool_result
            if result is None or result.tool_call_id not in open_ids:
                return False
            open_ids.discard(result.tool_call_id)
        elif m.role != "system":
            if open_ids:
                return False
            open_ids = {c.id for c in m.tool_calls}
    return not open_ids


def _older(n: int) -> list[ChatMessage]:
    messages = [ChatMessage.system("be brief")]
    for i in range(n):
        messages += [ChatMessage.user(f"question {i} " + "word " * 30), ChatMessage.assistant(f"answer {i}")]
    return messages


def test_a_call_stored_by_another_writer_before_the_unsaved_turns_is_sent_with_its_results_or_not_at_all() -> None:
    """The session is read in part (its newest messages); a window is made with two unsaved turns after it. Another
    writer then stores a call whose tool still runs: it lands before the unsaved turns, which the last window
    looked at already. The next window does not send the call without its result."""

    async def main() -> list[ChatMessage]:
        store = InMemoryHistoryProvider()
        await store.append_many("a", [*_older(400), ChatMessage.user("go on")], session_id="s")
        pipeline = CompactionPipeline([SlidingWindowCompaction(400)])
        assert pipeline.reads_windows(store)
        call = ToolCallBlock(id="u1", name="read", arguments={"page": 1})
        unsaved = [ChatMessage.assistant(None, tool_calls=[call]), ChatMessage.tool("u1", "page 1")]
        window = (await pipeline.window(WindowRequest("a", "s", history=store, unsaved=unsaved))).messages
        assert _paired(window)
        running = ToolCallBlock(id="c2", name="fetch", arguments={"url": "x"})
        await store.append_many("a", [ChatMessage.assistant(None, tool_calls=[running])], session_id="s")
        return (await pipeline.window(WindowRequest("a", "s", history=store, unsaved=unsaved))).messages

    window = asyncio.run(main())
    assert any(m.text == "go on" for m in window)  # the window reaches back past the call
    assert _paired(window), [(m.role, [c.id for c in m.tool_calls]) for m in window[-4:]]


def test_a_call_one_run_adds_before_another_runs_unsaved_turns_is_sent_with_its_results_or_not_at_all() -> None:
    """Two runs of one session under retention ``NONE``: the unsaved turns are read run by run, so a call the first
    run adds (its tool still running) comes before the second run's turns, which the last window looked at. The
    second run's next window does not send the call without its result."""

    async def main() -> list[ChatMessage]:
        store = InMemoryHistoryProvider()
        await store.append_many("agent", _older(400), session_id="s")
        pipeline = CompactionPipeline([SlidingWindowCompaction(400)])
        context = AgentContext(ContextConfig(store, pipeline, retention=HistoryRetention.NONE))
        await context.add_messages("s", [ChatMessage.user("first run")], run_id="one")
        await context.add_messages("s", [ChatMessage.user("second run"), ChatMessage.assistant("ok")], run_id="two")
        assert _paired(await context.get_prompt_window("s"))
        running = ToolCallBlock(id="c1", name="fetch", arguments={"url": "x"})
        await context.add_messages("s", [ChatMessage.assistant(None, tool_calls=[running])], run_id="one")
        return await context.get_prompt_window("s")

    window = asyncio.run(main())
    assert any(m.text == "first run" for m in window)  # the window reaches back past the call
    assert _paired(window), [(m.role, [c.id for c in m.tool_calls]) for m in window[-4:]]
