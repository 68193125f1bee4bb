"""How a history backend is measured, the same way for every backend: append throughput, a cold read of the
whole session by a fresh provider, and the warm ``get_prompt_window`` of the agent loop."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    SelectiveToolCallCompactionStrategy,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.kernel.agent import CompactionStrategy
from ravi.kernel.messages import ChatMessage


def pipeline() -> list[CompactionStrategy]:
    """The agent-loop pipeline the assembly targets are measured on."""
    return [
        ToolResultCompactionStrategy(),
        SelectiveToolCallCompactionStrategy(),
        TokenBudgetComposedStrategy([], token_budget=100_000),
    ]


async def history_figures(make: Callable[[], Any], messages: list[ChatMessage]) -> dict[str, float]:
    """``append`` (messages/s in batches of 100), ``cold_read`` (ms, a new provider reading the whole session)
    and ``window`` (ms, median warm ``get_prompt_window`` after appending one message) for the provider
    ``make()`` builds; every provider it builds must share the same store."""
    history = make()
    await history.count_messages("warmup", session_id="s")
    start = time.perf_counter()
    for i in range(0, len(messages), 100):
        await history.append_many("agent", messages[i : i + 100], session_id="s")
    append = len(messages) / (time.perf_counter() - start)
    cold = make()
    start = time.perf_counter()
    await cold.get_messages("agent", session_id="s")
    cold_read = (time.perf_counter() - start) * 1000
    await cold.close()
    context = AgentContext(ContextConfig(history, pipeline()))
    await context.get_prompt_window("s")
    warm = []
    for i in range(100):
        await context.add_message("s", ChatMessage.user(f"follow-up {i}"))
        start = time.perf_counter()
        await context.get_prompt_window("s")
        warm.append(time.perf_counter() - start)
    await history.close()
    return {"append": append, "cold_read": cold_read, "window": statistics.median(warm) * 1000}
