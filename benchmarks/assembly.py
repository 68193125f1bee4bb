"""Window assembly on agentic transcripts: Ravi's pipeline, cold and warm, beside LangChain's trim_messages.

Pipeline: [ToolResultCompactionStrategy(), SelectiveToolCallCompactionStrategy(),
TokenBudgetComposedStrategy([], token_budget=100_000)] through AgentContext.get_prompt_window on an
InMemoryHistoryProvider. Cold: a fresh context and no cached counts. Warm: append one message, assemble again
(the agent loop's steady state). trim_messages: approximate counter, 100k budget, strategy "last", system
message kept, on the same transcript already converted to LangChain messages (conversion not timed).

Targets: warm assembly of 10,000 messages under 2 ms median, at least 10x faster than trim_messages.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from _history import pipeline
from _table import median_ms, table, verdict
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    InMemoryHistoryProvider,
)
from ravi.agents.demo import agentic_transcript
from ravi.kernel.messages import ChatMessage

BUDGET = 100_000


def to_langchain(messages: list[ChatMessage]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for m in messages:
        if m.role == "system":
            out.append(SystemMessage(m.text))
        elif m.role == "user":
            out.append(HumanMessage(m.text))
        elif m.role == "assistant":
            calls = [{"name": c.name, "args": dict(c.arguments), "id": c.id} for c in m.tool_calls]
            out.append(AIMessage(m.text, tool_calls=calls))
        else:
            result = m.tool_result
            assert result is not None
            out.append(ToolMessage(result.content, tool_call_id=result.tool_call_id))
    return out


def context_for(messages: list[ChatMessage]) -> AgentContext:
    history = InMemoryHistoryProvider()
    asyncio.run(history.append_many("agent", messages, session_id="s"))
    return AgentContext(ContextConfig(history, pipeline()))  # its token budget is BUDGET


def forget_counts(messages: list[ChatMessage]) -> None:
    for m in messages:
        m.__dict__.pop("memo", None)


async def warm_runs(context: AgentContext, n: int, request: str = "follow-up question {i}") -> list[float]:
    """The times of ``n`` windows of session ``s``, each after a new user turn (``request``, formatted with its
    number ``i``)."""
    times = []
    for i in range(n):
        await context.add_message("s", ChatMessage.user(request.format(i=i)))
        start = time.perf_counter()
        await context.get_prompt_window("s")
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    rows = []
    figures = {}
    for size in (1_000, 10_000, 100_000):
        messages = agentic_transcript(size)
        cold = []
        for _ in range(3 if size < 100_000 else 1):
            forget_counts(messages)
            context = context_for(messages)
            start = time.perf_counter()
            window = asyncio.run(context.get_prompt_window("s"))
            cold.append(time.perf_counter() - start)
        warm = statistics.median(asyncio.run(warm_runs(context, 200))) * 1000
        lc = to_langchain(messages)
        trim = median_ms(
            lambda lc=lc: trim_messages(
                lc,
                max_tokens=BUDGET,
                token_counter="approximate",
                strategy="last",
                include_system=True,
                start_on="human",
            ),
            repeat=5 if size < 100_000 else 3,
        )
        figures[size] = (warm, trim)
        rows.append(
            (f"{size:,}", len(window), f"{min(cold) * 1000:.2f}", f"{warm:.3f}", f"{trim:.2f}", f"{trim / warm:.0f}x")
        )
    table(
        "Window assembly (ms): Ravi get_prompt_window vs LangChain trim_messages, 100k-token budget",
        ["messages", "window msgs", "Ravi cold", "Ravi warm (median)", "trim_messages (median)", "warm speed-up"],
        rows,
    )
    warm10, trim10 = figures[10_000]
    print_targets(warm10, trim10)


def print_targets(warm10: float, trim10: float) -> None:
    from _table import console

    console.print(f"target: warm 10,000-message assembly < 2 ms median: {warm10:.3f} ms, {verdict(warm10 < 2)}")
    console.print(f"target: >= 10x faster than trim_messages: {trim10 / warm10:.0f}x, {verdict(trim10 / warm10 >= 10)}")
    console.print()


if __name__ == "__main__":
    main()
