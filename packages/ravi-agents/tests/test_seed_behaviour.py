"""Behaviour the design documents promise of the assembly layer's constructors, checked by calling them: a single
strategy goes wherever strategies go (000), and a bad argument is refused with a typed error from
``ravi.kernel.errors`` when the object is built, never a ``TypeError`` or ``AttributeError`` later."""

from __future__ import annotations

import inspect
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
    RelevantRecallStrategy,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowCompaction,
    SummarizationCompaction,
    SummarizingContext,
    TokenBudgetComposedStrategy,
    TokenBudgetContext,
    ToolResultCompactionStrategy,
    TruncationStrategy,
    compact,
    estimate_context_tokens,
    find_cut_point,
    should_compact,
    summarize,
)
from ravi.agents.context.functional import PolicyCompactionStrategy
from ravi.agents.react import ReActAgent, ScriptedModel
from ravi.kernel.errors import InvalidArgument, RaviError

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
    "recall token_budget text": lambda: RelevantRecallStrategy("x"),  # type: ignore[arg-type]
    "recall token_budget float": lambda: RelevantRecallStrategy(100.5),  # type: ignore[arg-type]
    "recall recall_share text": lambda: RelevantRecallStrategy(100, recall_share="x"),  # type: ignore[arg-type]
    "recall recall_share bool": lambda: RelevantRecallStrategy(100, recall_share=True),  # type: ignore[arg-type]
    "recall low_watermark text": lambda: RelevantRecallStrategy(100, low_watermark="x"),  # type: ignore[arg-type]
    "recall low_watermark NaN": lambda: RelevantRecallStrategy(100, low_watermark=float("nan")),
    "recall annotate text": lambda: RelevantRecallStrategy(100, annotate="no"),  # type: ignore[arg-type]
    "recall counter of a number": lambda: RelevantRecallStrategy(100, counter=5),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("build", BAD.values(), ids=BAD.keys())
def test_a_bad_argument_is_refused_with_a_typed_error(build: Callable[[], Any]) -> None:
    """Bad input gets a clear error from ``ravi.kernel.errors`` (the documents' ``ValueError`` for bad input:
    every one of them is one) when the object is built, not a builtin error when it is first used."""
    with pytest.raises(RaviError):
        build()


class CountingModel(ScriptedModel):
    """A scripted model whose tokenizer counts every text as 100 tokens."""

    def count_tokens(self, text: str) -> int:
        return 100


async def test_an_agent_sizes_a_token_budget_context_with_its_model() -> None:
    """003: ``TokenBudgetContext`` "Uses model_client.count_tokens() if provided"; "model_client is passed in at
    build() time by the agent". Counted by the model (104 tokens a message), 250 tokens hold two messages; counted
    by the heuristic, all eleven would fit."""
    context = TokenBudgetContext(max_tokens=250)
    await AgentContext(context, agent_id="bot").add_messages("s", [ChatMessage.user(str(i)) for i in range(10)])
    model = CountingModel([ChatMessage.assistant("ok")])
    await ReActAgent("bot", model=model, context=context).run("s", "hello")
    assert [m.text for m in model.seen[0]] == ["9", "hello"]
    assert [m.text for m in await context.build("s", agent_id="bot", model_client=model)] == ["hello", "ok"]


async def test_a_hybrid_context_backfills_the_newest_turns_from_the_cold_store() -> None:
    """003: "Redis (fast, recent messages) and Postgres (full history backfill)", ``recent_n <= max_total``. The
    window is the system message and the newest ``max_total`` turns, without a gap (decision 79), though the hot
    store holds only the newest six."""
    hot, cold = _stores()
    transcript = [ChatMessage.system("sys")] + [ChatMessage.user(f"m{i}") for i in range(1, 51)]
    await cold.append_many("agent", transcript, session_id="s")
    await hot.append_many("agent", transcript[-6:], session_id="s")
    window = await HybridContext(hot, cold, recent_n=20, max_total=40).build("s", agent_id="agent")
    assert [m.text for m in window] == ["sys"] + [f"m{i}" for i in range(11, 51)]


class Echo:
    async def complete(self, messages: Any, *, max_tokens: int | None = None, cancel: Any = None) -> str:
        return "summary"


NOT_MESSAGES: dict[str, Callable[[], Any]] = {
    "pipeline of strings": lambda: CompactionPipeline([]).compact(["hello"]),  # type: ignore[list-item]
    "pipeline of a string": lambda: CompactionPipeline([SlidingWindowCompaction(2)]).compact("abc"),  # type: ignore[arg-type]
    "estimate of dicts": lambda: estimate_context_tokens([{"role": "user", "content": "hi"}]),  # type: ignore[list-item]
    "should_compact of dicts": lambda: should_compact([{"role": "user", "content": "hi"}], 100),  # type: ignore[list-item]
    "cut point of strings": lambda: find_cut_point(["a", "b"], 1),  # type: ignore[list-item]
    "summarize of strings": lambda: summarize(["a"], Echo()),  # type: ignore[list-item]
    "compact of strings": lambda: compact(["a"] * 20, 100, None, Echo()),  # type: ignore[list-item]
    **{
        f"{type(strategy).__name__} called directly on strings": (
            lambda strategy=strategy: strategy.compact(["a", "b"])  # type: ignore[misc]
        )
        for strategy in (
            SlidingWindowCompaction(1),
            TruncationStrategy(max_messages=1),
            TokenBudgetComposedStrategy([], 1),
            RelevantRecallStrategy(1, meaning=None),
            ToolResultCompactionStrategy(),
            SelectiveToolCallCompactionStrategy(),
            SummarizationCompaction(Echo(), recent_token_budget=1, min_old_tokens=1),
            PolicyCompactionStrategy(1, CompactionPolicy(), Echo()),
        )
    },
}


@pytest.mark.parametrize("call", NOT_MESSAGES.values(), ids=NOT_MESSAGES.keys())
async def test_a_history_that_is_not_messages_is_refused(call: Callable[[], Any]) -> None:
    """000's ``compact(raw_history: list[ChatMessage])`` and 002's functions take messages: anything else is an
    ``InvalidArgument`` naming the item, not an ``AttributeError`` from inside (nor a string read as characters)."""

    async def run() -> None:
        result = call()
        if inspect.isawaitable(result):
            await result

    with pytest.raises(RaviError):
        await run()


@pytest.mark.parametrize("expires_in", [0, -5, float("nan"), 1e17, "60"])
async def test_a_presigned_urls_lifetime_is_refused_by_its_own_name(expires_in: Any) -> None:
    """000's ``presign_url``: a lifetime no store can hold is refused naming ``expires_in`` (it said "ttl")."""
    from ravi.agents.storage import InMemoryFileStore

    store = InMemoryFileStore()
    await store.upload("report.pdf", b"%PDF")
    with pytest.raises(InvalidArgument, match=r"^expires_in "):
        await store.presign_url("report.pdf", expires_in=expires_in)


async def test_a_bool_is_not_a_depth_or_a_limit() -> None:
    """004's ``get_neighbors(entity_id, depth)`` and ``search(..., limit)``: ``True`` was taken as 1, where every
    other count of Ravi's (``get_messages(limit=True)``, a strategy's size) refuses a bool."""
    from ravi.agents.storage import InMemoryGraphStore, InMemoryLongTermMemory, InMemoryVectorStore
    from ravi.kernel.storage import Entity

    graph = InMemoryGraphStore()
    await graph.add_entities([Entity(id="a")])
    with pytest.raises(InvalidArgument, match="depth"):
        await graph.get_neighbors("a", depth=True)
    with pytest.raises(InvalidArgument, match="limit"):
        await InMemoryVectorStore().search([1.0, 0.0], collection="c", limit=True)
    with pytest.raises(InvalidArgument, match="limit"):
        await InMemoryLongTermMemory().search("agent", "query", limit=True)


@pytest.mark.parametrize(
    "build",
    [
        lambda: TruncationStrategy(max_messages=True),
        lambda: TruncationStrategy(max_chars=False),
        lambda: CompactionPipeline([], max_sessions=True),
        lambda: ReActAgent("bot", model=ScriptedModel([]), max_steps=True),
    ],
    ids=["truncation max_messages", "truncation max_chars", "pipeline max_sessions", "agent max_steps"],
)
def test_a_bool_is_not_a_size(build: Callable[[], Any]) -> None:
    """000's ``TruncationStrategy(max_messages=..., max_chars=...)`` took ``True`` as 1 (and ``False`` as 0, every
    message dropped); every other size of Ravi's refuses a bool."""
    with pytest.raises(InvalidArgument):
        build()
