"""One ``AgentContext`` shared by threads that each run their own event loop (a web server's thread pool calling
``asyncio.run``, or a sync face): every window any of them gets is one a context of its own would give, within
its budget and with no tool result apart from its call.

Several threads, started together, each record turns of one session (user turns, tool calls and their results,
each call's result stored in a write of its own, so other threads' turns may come between them) and ask for the
window after every write, while the interpreter switches threads as often as it can.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.agents.context import (
    AgentContext,
    CompactionPipeline,
    ContextConfig,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
)
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.conformance import threads
from ravi.conformance.threads import switching_often
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.messages import ChatMessage, ToolCallBlock

from .pairs import orphans

THREADS = 6
WORDS = ("invoice", "refund", "shipping", "password", "latency", "schema", "billing", "outage", "upgrade", "quota")

STRATEGIES: dict[str, Callable[[int], object]] = {
    "recall": lambda budget: RelevantRecallStrategy(token_budget=budget, meaning=None),
    "recall_cache": lambda budget: RelevantRecallStrategy(token_budget=budget, meaning=None, prefer="cache"),
    "recall_shared": lambda budget: RelevantRecallStrategy(token_budget=budget, meaning=None, recall_share=0.5),
    "budget": lambda budget: TokenBudgetComposedStrategy([], token_budget=budget),
}


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    """Make the interpreter switch threads every microsecond, so races show up in every run."""
    with switching_often():
        yield


def turns(thread: int, k: int, size: int) -> list[list[ChatMessage]]:
    """Thread ``thread``'s ``k``-th exchange, write by write: a question, then a tool call, then its result, then
    an answer (every third exchange without a tool)."""
    word = WORDS[(3 * thread + k) % len(WORDS)]
    padding = " detail" * (size + (k * 7 + thread) % 11)
    question = ChatMessage.user(f"thread {thread} asks about the {word} {k}{padding}", id=f"t{thread}-u{k}")
    answer = ChatMessage.assistant(f"the {word} {k} is settled{padding}", id=f"t{thread}-a{k}")
    if k % 3 == 2:
        return [[question], [answer]]
    call_id = f"t{thread}-c{k}"
    call = ChatMessage.assistant(
        tool_calls=[ToolCallBlock(id=call_id, name="lookup", arguments={"about": word})], id=f"t{thread}-a{k}-call"
    )
    result = ChatMessage.tool(call_id, f"{word} record {k}{padding}{padding}", id=f"t{thread}-r{k}")
    return [[question], [call], [result], [answer]]


def run_shared(
    name: str, budget: int, exchanges: int, size: int, retention: HistoryRetention = HistoryRetention.PERMANENT
) -> list[tuple[int, list[ChatMessage]]]:
    """Every thread records ``exchanges`` exchanges into one session of one shared ``AgentContext``, asking for the
    window after each write; returns every window with the thread that got it."""
    history = InMemoryHistoryProvider()
    system = ChatMessage.system("You answer questions about the shop.", id="system")
    pipeline = CompactionPipeline([STRATEGIES[name](budget)])  # type: ignore[list-item]
    context = AgentContext(ContextConfig(history, pipeline, retention=retention))
    asyncio.run(context.add_message("s", system, run_id="setup"))
    windows: list[tuple[int, list[ChatMessage]]] = []

    async def work(thread: int) -> None:
        for k in range(exchanges):
            for write in turns(thread, k, size):
                await context.add_messages("s", write, run_id=f"run-{thread}")
                windows.append((thread, await context.get_prompt_window("s")))

    threads.run_threads(lambda i: asyncio.run(work(i)), THREADS)
    return windows


def check(windows: Sequence[tuple[int, list[ChatMessage]]], budget: int) -> None:
    for thread, window in windows:
        ids = [m.id for m in window]
        tokens = DEFAULT_COUNTER.count_messages(window)
        assert tokens <= budget, f"thread {thread}'s window of {tokens} tokens passes its budget of {budget}: {ids}"
        assert not orphans(window), f"thread {thread}'s window sends a result without its call: {ids}"
        assert len(set(ids)) == len(ids), f"thread {thread}'s window holds a message twice: {ids}"


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_shared_context_keeps_every_window_within_budget_and_its_tool_pairs(name: str) -> None:
    budget = 700
    check(run_shared(name, budget, exchanges=40, size=20), budget)


@pytest.mark.parametrize("name", ["recall", "budget"])
def test_a_shared_context_keeping_turns_unsaved_holds_every_threads_turns(name: str) -> None:
    """Under retention ``NONE`` the turns of runs under way are held by the ``AgentContext`` itself: threads adding
    turns while others read them into windows raised ``RuntimeError`` (a dictionary changed while it was read).
    No call raises now, and every window keeps the invariants."""
    budget = 700
    check(run_shared(name, budget, exchanges=40, size=20, retention=HistoryRetention.NONE), budget)


@settings(max_examples=12, deadline=None)
@given(
    name=st.sampled_from(sorted(STRATEGIES)),
    budget=st.integers(250, 1_600),
    exchanges=st.integers(2, 10),
    size=st.integers(0, 40),
)
def test_a_shared_context_holds_the_invariants_for_any_budget_and_turn_sizes(
    name: str, budget: int, exchanges: int, size: int
) -> None:
    check(run_shared(name, budget, exchanges, size), budget)
