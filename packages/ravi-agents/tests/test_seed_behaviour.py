"""Behaviour the design documents promise of the assembly layer's constructors, checked by calling them: a single
strategy goes wherever strategies go (000), and a bad argument is refused with a typed error from
``ravi.kernel.errors`` when the object is built, never a ``TypeError`` or ``AttributeError`` later."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ravi.agents.context import (
    AgentContext,
    ChatMessage,
    CompactionPipeline,
    CompactionPolicy,
    ContextConfig,
    ContextManager,
    HybridContext,
    InMemoryHistoryProvider,
    SlidingWindowCompaction,
    SummarizationCompaction,
    SummarizingContext,
    TokenBudgetComposedStrategy,
)
from ravi.kernel.errors import RaviError

HISTORY = [ChatMessage.user(str(i)) for i in range(6)]


async def test_a_single_strategy_needs_no_list() -> None:
    """000: "A single strategy can be passed without wrapping it in a pipeline." A pipeline and a budget strategy
    take one as they take a list of one."""
    pipeline = CompactionPipeline(SlidingWindowCompaction(max_messages=2))
    assert [m.text for m in await pipeline.compact(HISTORY)] == ["4", "5"]
    child = SlidingWindowCompaction(max_messages=3)
    budget = TokenBudgetComposedStrategy(child, token_budget=1_000)
    assert budget.strategies == [child]
    listed = TokenBudgetComposedStrategy([child], 1_000)
    assert await budget.compact(HISTORY * 100) == await listed.compact(HISTORY * 100)


def _stores() -> tuple[InMemoryHistoryProvider, InMemoryHistoryProvider]:
    return InMemoryHistoryProvider(), InMemoryHistoryProvider()


BAD: dict[str, Callable[[], Any]] = {
    "pipeline of a number": lambda: CompactionPipeline(5),  # type: ignore[arg-type]
    "pipeline of a string": lambda: CompactionPipeline("sliding"),  # type: ignore[arg-type]
    "budget strategies of a number": lambda: TokenBudgetComposedStrategy(5),  # type: ignore[arg-type]
    "budget low_watermark text": lambda: TokenBudgetComposedStrategy([], 10, low_watermark="x"),  # type: ignore[arg-type]
    "budget counter of a number": lambda: TokenBudgetComposedStrategy([], 10, counter=5),  # type: ignore[arg-type]
    "from_model trigger_ratio text": lambda: TokenBudgetComposedStrategy.from_model("gpt-4o", trigger_ratio="x"),  # type: ignore[arg-type]
    "sliding low_watermark text": lambda: SlidingWindowCompaction(10, low_watermark="x"),  # type: ignore[arg-type]
    "policy trigger_ratio text": lambda: CompactionPolicy(trigger_ratio="x"),  # type: ignore[arg-type]
    "policy keep_recent text": lambda: CompactionPolicy(keep_recent="x"),  # type: ignore[arg-type]
    "manager keep_recent text": lambda: ContextManager(keep_recent="x"),  # type: ignore[arg-type]
    "agent context of a number": lambda: AgentContext(5),  # type: ignore[arg-type]
    "config counter of a number": lambda: ContextConfig(InMemoryHistoryProvider(), counter=5),  # type: ignore[arg-type]
    "summariser llm of a number": lambda: SummarizationCompaction(5),  # type: ignore[arg-type]
    "summarizing threshold text": lambda: SummarizingContext(threshold="x", max_tokens=100),  # type: ignore[arg-type]
    "summarizing max_tokens text": lambda: SummarizingContext(max_tokens="a"),  # type: ignore[arg-type]
    "summarizing llm of a number": lambda: SummarizingContext(5, max_tokens=100),  # type: ignore[arg-type]
    "hybrid recent_n text": lambda: HybridContext(*_stores(), recent_n="a"),  # type: ignore[arg-type]
    "hybrid max_total text": lambda: HybridContext(*_stores(), 5, "x"),  # type: ignore[arg-type]
    "hybrid hot store of a number": lambda: HybridContext(5, InMemoryHistoryProvider()),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("build", BAD.values(), ids=BAD.keys())
def test_a_bad_argument_is_refused_with_a_typed_error(build: Callable[[], Any]) -> None:
    """Bad input gets a clear error from ``ravi.kernel.errors`` (the documents' ``ValueError`` for bad input:
    every one of them is one) when the object is built, not a builtin error when it is first used."""
    with pytest.raises(RaviError):
        build()
