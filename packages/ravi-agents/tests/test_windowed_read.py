"""The windowed read: a window assembled from the newest part of a session equals the one from the whole session."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ravi.agents.context import (
    CompactionPipeline,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowCompaction,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    TruncationStrategy,
    WindowRequest,
)
from ravi.agents.context.compaction._keep import TailCut, newest_cut
from ravi.conformance.strategy import transcripts
from ravi.kernel.agent import CompactionEvent
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.storage import HistoryWindow, window_of
from ravi.kernel.tokens import CachedTokenCounter

from .doubles import Recording


class DoubleCounter(CachedTokenCounter):
    """Counts twice what the stored heuristic does: windows need more than the first read gives."""

    key = "tokens:test-double"

    def count_text(self, text: str) -> int:
        return -(-len(text) // 2)


class HalfCounter(CachedTokenCounter):
    """Counts half what the stored heuristic does."""

    key = "tokens:test-half"

    def count_text(self, text: str) -> int:
        return -(-len(text) // 8)


PIPELINES: dict[str, Callable[[int], list[object]]] = {
    "budget": lambda n: [TokenBudgetComposedStrategy([], token_budget=n * 40)],
    "budget_composed": lambda n: [
        TokenBudgetComposedStrategy(
            [ToolResultCompactionStrategy(100), SelectiveToolCallCompactionStrategy(1)], token_budget=n * 40
        )
    ],
    "budget_watermark": lambda n: [
        TokenBudgetComposedStrategy([ToolResultCompactionStrategy(100)], token_budget=n * 40, low_watermark=0.5)
    ],
    "sliding": lambda n: [SlidingWindowCompaction(max_messages=n)],
    "sliding_watermark": lambda n: [SlidingWindowCompaction(max_messages=n, low_watermark=0.5)],
    "truncation": lambda n: [TruncationStrategy(max_messages=n + 3, max_chars=n * 100)],
    "chain": lambda n: [
        ToolResultCompactionStrategy(200),
        SelectiveToolCallCompactionStrategy(2),
        TokenBudgetComposedStrategy([], token_budget=n * 50),
    ],
    "recall": lambda n: [RelevantRecallStrategy(token_budget=n * 40)],
    "recall_chain": lambda n: [
        ToolResultCompactionStrategy(100),
        RelevantRecallStrategy(token_budget=n * 50, recall_share=0.6, search_limit=3),
    ],
    "with_summaries": lambda n: [  # not suffix-determined: read whole
        SummarizationCompaction(recent_token_budget=n * 30, min_old_tokens=0),
        TokenBudgetComposedStrategy([], token_budget=n * 60),
    ],
}
COUNTERS = {"stored": None, "double": DoubleCounter(), "half": HalfCounter()}


def _groups(*results: list[str]) -> list[ChatMessage]:
    """Tool-call groups, one per list of result texts (results given in the order listed, ids by position)."""
    out: list[ChatMessage] = []
    for g, texts in enumerate(results):
        calls = [ToolCallBlock(id=f"c{g}-{k}", name="tool", arguments={"q": ""}) for k in range(len(texts))]
        out.append(ChatMessage.assistant(None, tool_calls=calls))
        out += [ChatMessage.tool(f"c{g}-{k}", text) for k, text in enumerate(texts)]
    return out


def chunks(messages: Sequence[ChatMessage], k: int) -> list[list[ChatMessage]]:
    return [list(messages[i : i + k]) for i in range(0, len(messages), k)] or [[]]


@pytest.mark.parametrize("counter", COUNTERS)
@pytest.mark.parametrize("name", PIPELINES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=transcripts, n=st.integers(0, 12), step=st.integers(1, 9))
@example(history=_groups(["", "", ""], ["", "y" * 2500, ""], ["", "", "x" * 700]), n=4, step=2)
def test_the_window_from_the_newest_part_is_the_window_from_the_whole(
    name: str, counter: str, history: list[ChatMessage], n: int, step: int
) -> None:
    """Appended in chunks (so watermarks move and remembered starts age), every window read through
    ``read_window`` equals the window of the whole transcript, and each window's events arrive once."""

    async def main() -> None:
        store = Recording()
        windowed = CompactionPipeline(PIPELINES[name](n), counter=COUNTERS[counter])  # type: ignore[arg-type]
        whole = CompactionPipeline(PIPELINES[name](n), counter=COUNTERS[counter])  # type: ignore[arg-type]
        seen: list[CompactionEvent] = []
        windowed.subscribe(seen.append)
        so_far: list[ChatMessage] = []
        for chunk in chunks(history, step):
            await store.append_many("a", chunk, session_id="s")
            so_far += chunk
            seen.clear()
            got = (await windowed.window(WindowRequest("a", "s", history=store))).messages
            reference = whole.session("a", "s", history=store)
            reference.generation = await store.generation("a", session_id="s")  # the records the window kept
            want = await whole.compact(so_far, reference)
            assert got == want
            assert [e.kind for e in seen][:1] == ["pre_compact"] and [e.kind for e in seen].count("post_compact") == 1

    asyncio.run(main())


def test_a_long_session_is_read_only_near_its_end() -> None:
    """10,000 messages and a 2,000-token budget: the window is read from the newest part, not the session."""

    async def main() -> tuple[int, int, list[ChatMessage]]:
        store = Recording()
        messages = [ChatMessage.system("be brief")] + [
            ChatMessage.user(f"question {i} " + "x" * 200) if i % 2 else ChatMessage.assistant(f"answer {i}")
            for i in range(10_000)
        ]
        await store.append_many("a", messages, session_id="s")
        pipeline = CompactionPipeline([TokenBudgetComposedStrategy([], token_budget=2_000)])
        window = (await pipeline.window(WindowRequest("a", "s", history=store))).messages
        assert window == await pipeline.compact(messages)
        return store.windowed, store.whole, window

    windowed, whole, window = asyncio.run(main())
    assert whole == 0
    assert len(window) < windowed < 3 * len(window) + 10


def test_a_pipeline_that_reads_older_messages_reads_the_whole_session() -> None:
    async def main() -> tuple[int, int]:
        store = Recording()
        await store.append_many("a", [ChatMessage.user(f"m{i}") for i in range(50)], session_id="s")
        pipeline = CompactionPipeline([SummarizationCompaction(recent_token_budget=20)])
        await pipeline.window(WindowRequest("a", "s", history=store))
        return store.windowed, store.whole

    assert asyncio.run(main()) == (0, 50)


@settings(max_examples=100, deadline=None)
@given(history=transcripts, tokens=st.integers(0, 3_000))
def test_the_in_memory_read_follows_the_reference_rule(history: list[ChatMessage], tokens: int) -> None:
    async def main() -> tuple[HistoryWindow, str]:
        store = InMemoryHistoryProvider()
        await store.append_many("a", history, session_id="s")
        return await store.read_window("a", session_id="s", tokens=tokens), await store.generation("a", session_id="s")

    view, generation = asyncio.run(main())
    assert view == window_of(history, tokens, generation if history else "")


@settings(max_examples=300, deadline=None)
@given(
    history=transcripts,
    steps=st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 6)), min_size=1, max_size=12),
    allowance=st.integers(0, 2_000),
    other=st.integers(0, 2_000),
)
def test_a_remembered_cut_is_the_cut_from_scratch(
    history: list[ChatMessage], steps: list[tuple[int, int]], allowance: int, other: int
) -> None:
    """``TailCut`` (the budget's memo of its last cut) gives ``newest_cut`` for views that grow, start later or
    earlier (inside a tool group, say), or come with another allowance now and then."""
    count = DoubleCounter().count_message
    memo = TailCut()
    start = end = 0
    for i, (skip, grow) in enumerate(steps):
        end = min(len(history), end + grow)
        start = max(0, min(end, start + skip))
        view = history[start:end]
        budget = other if i % 5 == 4 else allowance
        assert memo.cut(view, count, budget) == newest_cut(view, count, budget)


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
def test_a_recall_window_reads_only_what_its_newest_turns_need(prefer: str) -> None:
    """Recalled units come from the store's search, so the next read reaches back only as far as the budget
    does, not to the oldest unit recalled from the part read; the window stays the one of the whole session."""

    async def main() -> tuple[int, int, bool]:
        store = Recording()
        messages = [ChatMessage.system("be brief")] + [
            ChatMessage.user(f"note {i} about the deploy of service {i % 7}")
            if i % 2
            else ChatMessage.assistant(f"noted {i}")
            for i in range(4_000)
        ]
        await store.append_many("a", messages, session_id="s")
        strategy = lambda: RelevantRecallStrategy(1_000, meaning=None, prefer=prefer)  # noqa: E731
        half = COUNTERS["half"]
        windowed = CompactionPipeline([strategy()], counter=half)  # type: ignore[arg-type]
        whole = CompactionPipeline([strategy()], counter=half)  # type: ignore[arg-type]
        same = True
        for i in range(12):
            question = ChatMessage.user(f"what did we note about the deploy of service {i % 7}?")
            await store.append("a", question, session_id="s")
            messages.append(question)
            before = store.windowed
            window = (await windowed.window(WindowRequest("a", "s", history=store))).messages
            read = store.windowed - before
            same = same and window == await whole.compact(messages, whole.session("a", "s", history=store))
        plain = await CompactionPipeline(
            [TokenBudgetComposedStrategy([], token_budget=1_000)],
            counter=half,  # type: ignore[arg-type]
        ).compact(messages)
        return read, len(plain), same

    read, plain, same = asyncio.run(main())
    assert same
    print("READ", read, plain)
    assert read <= 2 * plain
