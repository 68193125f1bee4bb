"""What one process keeps about a session (held recall, memos, indexes) after another process clears it and
writes it again under the same message ids: nothing of the removed messages is shown by any path. Two contexts
over one store stand for the two processes: each keeps its own state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import pytest
from pausing_index import PausingBM25  # tests-integration/, on pytest's pythonpath

from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider, RelevantRecallStrategy
from ravi.agents.context.recall_index import BM25Index
from ravi.kernel.messages import ChatMessage


def transcript(secret: str) -> list[ChatMessage]:
    """A long session whose first turn holds ``secret``; the same ids and sizes every time it is written."""
    first = ChatMessage.user(f"my invoice {secret} shows the wrong amount", id="m-0")
    rest = [ChatMessage.user(f"filler turn {i} about the weather and nothing else", id=f"m-{i}") for i in range(1, 40)]
    return [first, *rest, ChatMessage.user("what was wrong with my invoice?", id="m-40")]


def text(window: list[ChatMessage]) -> str:
    return " ".join(m.text for m in window)


STRATEGIES: dict[str, Callable[[], RelevantRecallStrategy]] = {
    "store search, cache": lambda: RelevantRecallStrategy(token_budget=400, recall_share=0.5, prefer="cache"),
    "store search, relevance": lambda: RelevantRecallStrategy(token_budget=400, recall_share=0.5),
    "bm25, cache": lambda: RelevantRecallStrategy(400, recall_share=0.5, prefer="cache", index=BM25Index()),
    "bm25, relevance": lambda: RelevantRecallStrategy(400, recall_share=0.5, index=BM25Index()),
}


@pytest.mark.parametrize("explain", [False, True], ids=["window", "explain"])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
async def test_a_warm_recall_shows_nothing_of_a_session_cleared_elsewhere(strategy: str, explain: bool) -> None:
    store = InMemoryHistoryProvider()
    mine = AgentContext(ContextConfig(store, [STRATEGIES[strategy]()]))
    theirs = AgentContext(ContextConfig(store, [STRATEGIES[strategy]()]))

    async def window() -> str:
        if explain:
            return text((await mine.explain("s")).messages)
        return text(await mine.get_prompt_window("s"))

    await theirs.add_messages("s", transcript("INV-2291"))
    assert "INV-2291" in await window()  # recalled, and held

    await theirs.clear("s")
    await theirs.add_messages("s", transcript("INV-7777"))  # same ids, same sizes, other text
    shown = await window()
    assert "INV-2291" not in shown
    assert "INV-7777" in shown


@pytest.mark.parametrize("prefer", ["cache", "relevance"])
async def test_a_window_under_way_across_a_clear_elsewhere_leaves_nothing_in_the_new_generations_state(
    prefer: Literal["cache", "relevance"],
) -> None:
    """The first window read the old session; meanwhile another process cleared it and wrote it again, and a
    second window of this process assembled the new one. What the first keeps when it ends (the last window, the
    ids it recalled) is not the new generation's."""
    store, index = InMemoryHistoryProvider(), PausingBM25()
    strategy = RelevantRecallStrategy(400, recall_share=0.5, prefer=prefer, index=index)
    mine = AgentContext(ContextConfig(store, [strategy]))
    theirs = AgentContext(ContextConfig(store, [RelevantRecallStrategy(400, recall_share=0.5)]))
    await theirs.add_messages("s", transcript("INV-2291"))
    second: list[ChatMessage] = []

    async def elsewhere() -> None:
        await theirs.clear("s")
        await theirs.add_messages("s", transcript("INV-7777"))
        second.extend(await mine.get_prompt_window("s"))

    index.during = elsewhere
    assert "INV-2291" in text(await mine.get_prompt_window("s"))  # it read the session before the clear
    assert "INV-7777" in text(second)
    last = await mine.config.pipeline.last_window("agent", "s", history=store)
    assert last is not None
    assert "INV-2291" not in text(last)
    assert last == second  # the new generation's last window, not the late one of the old
    assert "INV-2291" not in text(await mine.get_prompt_window("s"))


async def test_the_last_window_of_a_session_cleared_elsewhere_is_not_read() -> None:
    """``last_window`` gave the window this process assembled before another process cleared the session (and
    ``record_usage`` counted it) until this process assembled the session again."""
    from ravi.kernel.errors import InvalidArgument

    store = InMemoryHistoryProvider()
    mine = AgentContext(ContextConfig(store, model="gpt-4o"))
    theirs = AgentContext(ContextConfig(store))
    await theirs.add_messages("s", transcript("INV-2291"))
    window = await mine.get_prompt_window("s")
    assert "INV-2291" in text(window)
    await theirs.clear("s")
    with pytest.raises(InvalidArgument, match="no window was assembled"):
        await mine.record_usage("s", 500)
    assert await mine.config.pipeline.last_window("agent", "s", history=store) is None
    await theirs.add_messages("s", transcript("INV-7777"))
    assert await mine.config.pipeline.last_window("agent", "s", history=store) is None
    newer = await mine.get_prompt_window("s")
    assert await mine.config.pipeline.last_window("agent", "s", history=store) == newer


async def test_a_window_of_messages_read_after_the_generation_is_filed_under_that_generation() -> None:
    """``WindowRequest(generation=...)``: the generation a caller read before the messages it passes is the one
    the window's state is kept under, not one read after them; it goes only with those messages and that store."""
    from ravi.agents.context import CompactionPipeline, WindowRequest
    from ravi.kernel.errors import InvalidArgument

    store = InMemoryHistoryProvider()
    await store.append_many("agent", transcript("INV-2291"), session_id="s")
    generation = await store.generation("agent", session_id="s")
    messages = await store.get_messages("agent", session_id="s")
    await store.clear("agent", session_id="s")  # lands between the caller's reads and the window
    pipeline = CompactionPipeline([])
    request = WindowRequest("agent", "s", history=store, messages=messages, generation=generation)
    assert (await pipeline.window(request)).messages == messages
    assert await pipeline.last_window("agent", "s", history=store) is None
    for bad in (
        {"history": store, "generation": generation},
        {"messages": messages, "generation": generation},
        {"history": store, "messages": messages, "generation": 5},
        {"history": store, "messages": messages, "generation": "\ud800"},
    ):
        with pytest.raises(InvalidArgument):
            WindowRequest("agent", "s", **bad)  # type: ignore[arg-type]


async def test_messages_from_a_store_that_keeps_generations_need_the_generation_read_before_them() -> None:
    """``WindowRequest(messages=..., history=..., agent_id, session_id)`` without ``generation=``: the pipeline
    read the generation after the caller's read, so a clear landing between the two filed the window of the
    removed messages under the new generation (its ``last_window`` gave them back after the clear). Such a request
    is refused, saying how to read the generation; a store that keeps no generation needs none, and a window of
    messages alone, or read by the pipeline itself, is unchanged."""
    from ravi.agents.context import CompactionPipeline, WindowRequest
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.storage import SessionGeneration

    store = InMemoryHistoryProvider()
    assert isinstance(store, SessionGeneration)
    await store.append_many("agent", transcript("INV-2291"), session_id="s")
    messages = await store.get_messages("agent", session_id="s")
    with pytest.raises(InvalidArgument, match="generation") as raised:
        WindowRequest("agent", "s", history=store, messages=messages)
    assert "history.generation(" in (raised.value.hint or "")

    class NoGenerations:  # a store that keeps no generations: nothing to read first
        async def get_messages(self, agent_id: str, *, session_id: str) -> list[ChatMessage]:
            return await store.get_messages(agent_id, session_id=session_id)

    plain = NoGenerations()
    assert not isinstance(plain, SessionGeneration)
    pipeline = CompactionPipeline([])
    request = WindowRequest("agent", "s", history=plain, messages=messages)  # type: ignore[arg-type]
    assert (await pipeline.window(request)).messages == messages
    assert (await pipeline.window(WindowRequest("agent", "s", messages=messages))).messages == messages
    assert (await pipeline.window(WindowRequest("agent", "s", history=store))).messages == messages
