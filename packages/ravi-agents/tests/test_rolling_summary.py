"""The rolling summary: it moves forward in steps, folds the previous summary in, and is found by key, so a window
of a long session reads only the newest part of it."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ravi.agents.context import (
    CompactionPipeline,
    InMemoryHistoryProvider,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
    WindowRequest,
)
from ravi.agents.context.compaction.summarization import SUMMARY_KEY, is_summary
from ravi.agents.storage.summaries import InMemorySummaryStore
from ravi.conformance.strategy import check_window
from ravi.kernel.messages import ChatMessage, ToolCallBlock

from .doubles import Recording, RecordingLLM


def turn(i: int) -> list[ChatMessage]:
    return [ChatMessage.user(f"question {i} " + "q" * 150), ChatMessage.assistant(f"answer {i} " + "a" * 150)]


def summarising(llm: RecordingLLM, store: InMemorySummaryStore) -> CompactionPipeline:
    summarizer = SummarizationCompaction(llm, recent_token_budget=1_000, min_old_tokens=200, store=store)
    return CompactionPipeline([TokenBudgetComposedStrategy([summarizer], token_budget=2_000)])


async def test_the_summary_moves_in_steps_and_folds_the_previous_one() -> None:
    llm, store, history = RecordingLLM(), InMemorySummaryStore(), InMemoryHistoryProvider()
    pipeline = summarising(llm, store)
    await history.append("a", ChatMessage.system("be brief"), session_id="s")
    summaries: list[ChatMessage] = []
    turns = 60
    for i in range(turns):
        await history.append_many("a", turn(i), session_id="s")
        window = (await pipeline.window(WindowRequest("a", "s", history=history))).messages
        check_window(await history.get_messages("a", session_id="s"), window)
        found = [m for m in window if is_summary(m)]
        assert len(found) <= 1, "a summary is updated, never stacked"
        if found and (not summaries or found[0].id != summaries[-1].id):
            summaries.append(found[0])
    # a turn is about 80 stored tokens and a step 250: a new summary every three or four turns, not every turn
    assert 8 <= len(llm.prompts) == len(summaries) <= turns // 3
    for previous, summary in itertools.pairwise(summaries):
        covers = summary.metadata[SUMMARY_KEY]
        assert covers["replaces"] == [previous.id]
        assert covers["first"] == previous.metadata[SUMMARY_KEY]["first"]
        assert covers["count"] > previous.metadata[SUMMARY_KEY]["count"]
    assert all(p.startswith("Previous summary:") for p in llm.prompts[1:])  # folded in, not summarised again


async def test_a_fresh_worker_fetches_the_summary_by_key_and_reads_only_the_window() -> None:
    llm, store, history = RecordingLLM(), InMemorySummaryStore(), Recording()
    await history.append("a", ChatMessage.system("be brief"), session_id="s")
    for i in range(1_000):
        await history.append_many("a", turn(i), session_id="s")
    first = summarising(llm, store)
    window = (await first.window(WindowRequest("a", "s", history=history))).messages
    assert history.whole + history.windowed > 2_000, "the first summary of a session reads it whole"
    assert len(llm.prompts) == 1

    history.whole = history.windowed = 0
    worker = summarising(llm, store)  # another process: no state, the same summary store
    again = (await worker.window(WindowRequest("a", "s", history=history))).messages
    assert again == window
    assert len(llm.prompts) == 1, "the summary is found by key, not written again"
    assert history.whole == 0 and history.windowed < 3 * len(window)

    await history.append_many("a", turn(1_000), session_id="s")
    history.whole = history.windowed = 0
    grown = (await worker.window(WindowRequest("a", "s", history=history))).messages
    assert history.whole == 0 and history.windowed < 3 * len(grown)
    history.whole = history.windowed = 0
    after = (await first.window(WindowRequest("a", "s", history=history))).messages
    assert after == grown
    assert history.whole == 0 and history.windowed < 3 * len(after), "after a whole read, the next reads the window"
    whole = summarising(llm, store)
    reference = whole.session("a", "s")
    reference.generation = await history.generation("a", session_id="s")  # where the windows kept their summaries
    assert grown == await whole.compact(await history.get_messages("a", session_id="s"), reference)


async def test_sessions_with_the_same_messages_keep_their_own_summaries() -> None:
    llm, store, history = RecordingLLM(), InMemorySummaryStore(), InMemoryHistoryProvider()
    shared = [ChatMessage.system("be brief"), *(m for i in range(30) for m in turn(i))]
    for session in ("s1", "s2"):
        await history.append_many("a", shared, session_id=session)
    pipeline = summarising(llm, store)
    one = (await pipeline.window(WindowRequest("a", "s1", history=history))).messages
    two = (await pipeline.window(WindowRequest("a", "s2", history=history))).messages
    ids = [next(m.id for m in w if is_summary(m)) for w in (one, two)]
    assert ids[0] != ids[1]
    assert len(llm.prompts) == 2


async def test_too_little_old_history_is_not_summarised() -> None:
    llm = RecordingLLM()
    strategy = SummarizationCompaction(llm, recent_token_budget=1_000, min_old_tokens=5_000)
    history = [ChatMessage.system("be brief"), *(m for i in range(30) for m in turn(i))]
    assert await strategy.compact(history) == history
    assert llm.prompts == []


class RenameCalls:
    """An earlier strategy that rebuilds every tool-call message under a new id (the summariser cannot place
    those in the session)."""

    async def compact(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
        return [
            ChatMessage(role=m.role, content=m.content) if m.role == "assistant" and m.tool_calls else m
            for m in history
        ]


async def test_messages_made_by_an_earlier_strategy_are_summarised_not_refused() -> None:
    """A checkpoint that lands on a message the summariser cannot place gives a window, never an error."""
    history: list[ChatMessage] = []
    for i in range(40):
        call = ToolCallBlock(id=f"c{i}", name="f")
        history += [
            ChatMessage.user(f"q{i} " + "x" * 120),
            ChatMessage.assistant(None, tool_calls=[call]),
            ChatMessage.tool(f"c{i}", "r" * 200),
        ]
    for step in (1, 50, 120, 393):
        for budget in (291, 970, 1_843):
            summarizer = SummarizationCompaction(recent_token_budget=budget, min_old_tokens=0, update_tokens=step)
            window = await CompactionPipeline([RenameCalls(), summarizer]).compact(history)
            assert sum(is_summary(m) for m in window) <= 1
            assert window[-1] is history[-1]
