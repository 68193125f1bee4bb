"""Property-based tests: every strategy and pipeline keeps the invariants on random transcripts. The general
invariants are the public ``StrategyContract`` a third-party strategy runs too; the rest are particular to a
strategy."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ravi.agents.context import (
    CompactionPipeline,
    RelevantRecallStrategy,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowCompaction,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    TruncationStrategy,
)
from ravi.agents.context.functional import CompactionPolicy, PolicyCompactionStrategy
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.conformance import StrategyContract
from ravi.conformance.strategy import check_window, transcripts
from ravi.kernel.agent import CompactionStrategy, SessionContext
from ravi.kernel.messages import ChatMessage

FACTORIES: dict[str, Callable[[int], CompactionStrategy]] = {
    "sliding": lambda n: SlidingWindowCompaction(max_messages=n),
    "tool_result": lambda n: ToolResultCompactionStrategy(max_chars=n * 10),
    "selective": lambda n: SelectiveToolCallCompactionStrategy(keep_recent_groups=n % 4),
    "truncation": lambda n: TruncationStrategy(max_messages=n, max_chars=n * 20),
    "summarization": lambda n: SummarizationCompaction(recent_token_budget=n * 40, min_old_tokens=n),
    "budget": lambda n: TokenBudgetComposedStrategy([], token_budget=n * 60),
    "budget_composed": lambda n: TokenBudgetComposedStrategy(
        [ToolResultCompactionStrategy(200), SelectiveToolCallCompactionStrategy(1)], token_budget=n * 60
    ),
    "pipeline": lambda n: CompactionPipeline(
        [
            ToolResultCompactionStrategy(300),
            SelectiveToolCallCompactionStrategy(2),
            SummarizationCompaction(recent_token_budget=n * 50, min_old_tokens=0),
            TokenBudgetComposedStrategy([], token_budget=n * 80),
        ]
    ),
    "empty_pipeline": lambda n: CompactionPipeline([]),
    "sliding_watermark": lambda n: SlidingWindowCompaction(max_messages=n, low_watermark=0.5),
    "budget_watermark": lambda n: TokenBudgetComposedStrategy(
        [ToolResultCompactionStrategy(200)], token_budget=n * 60, low_watermark=0.6
    ),
    "relevant_recall": lambda n: RelevantRecallStrategy(token_budget=n * 60, recall_share=0.5),
    # its defaults: the share follows the request, words and meaning fused, neighbours, labels
    "relevant_recall_defaults": lambda n: RelevantRecallStrategy(token_budget=n * 60),
    "relevant_recall_words": lambda n: RelevantRecallStrategy(
        token_budget=n * 60, meaning=None, spread=0.0, annotate=False, search_limit=1 + n % 5
    ),
    "relevant_recall_cache": lambda n: RelevantRecallStrategy(token_budget=n * 60, prefer="cache"),
    # 002's conductor, as ContextManager runs it: a summary of all but the newest keep_recent messages
    "policy": lambda n: PolicyCompactionStrategy(n * 60, CompactionPolicy(trigger_ratio=0.5, keep_recent=n % 9)),
}
RECALL = [name for name in FACTORIES if name.startswith("relevant_recall")]

sizes = st.integers(0, 30)


def run(
    strategy: CompactionStrategy, history: list[ChatMessage], session: SessionContext | None = None
) -> list[ChatMessage]:
    if session is None:
        return asyncio.run(strategy.compact(history))
    session.read_from(history)
    return asyncio.run(strategy.compact(history, session))  # type: ignore[call-arg]


class _Contract(StrategyContract):
    """The public contract, for one of Ravi's own strategies (a pipeline is run as the strategy it composes)."""

    name: str

    @pytest.fixture
    def strategy(self) -> Callable[[int], CompactionStrategy]:
        factory = FACTORIES[self.name]

        def built(n: int) -> CompactionStrategy:
            made = factory(n)
            return _Pipeline(made) if isinstance(made, CompactionPipeline) else made

        return built


class _Pipeline:
    """A pipeline as a plain ``compact(history)`` object (the engine is tested as one too)."""

    def __init__(self, pipeline: CompactionPipeline) -> None:
        self.pipeline = pipeline

    async def compact(self, history: list[ChatMessage]) -> list[ChatMessage]:
        return await self.pipeline.compact(history)


for _name in FACTORIES:
    _class = f"TestContract_{_name}"
    globals()[_class] = type(_class, (_Contract,), {"name": _name})


@pytest.mark.parametrize("name", ["budget", "budget_composed", "budget_watermark"])
@settings(max_examples=60, deadline=None)
@given(history=transcripts, n=sizes)
def test_budget_met_whenever_system_messages_fit(name: str, history: list[ChatMessage], n: int) -> None:
    strategy = FACTORIES[name](n)
    assert isinstance(strategy, TokenBudgetComposedStrategy)
    window = run(strategy, history)
    total = DEFAULT_COUNTER.count_messages(history)
    if total <= strategy.token_budget and strategy.low_watermark is None and not strategy.strategies:
        assert window == history, "a window that fits must be returned as it is"
    system_tokens = DEFAULT_COUNTER.count_messages([m for m in history if m.role == "system"])
    if system_tokens <= strategy.token_budget:
        assert DEFAULT_COUNTER.count_messages(window) <= strategy.token_budget


@settings(max_examples=60, deadline=None)
@given(history=transcripts, n=sizes)
def test_sliding_window_keeps_at_most_n_others(history: list[ChatMessage], n: int) -> None:
    window = run(SlidingWindowCompaction(n), history)
    assert sum(1 for m in window if m.role != "system") <= n


@pytest.mark.parametrize("name", ["tool_result", "selective", "pipeline", "budget_composed"])
@settings(max_examples=40, deadline=None)
@given(history=transcripts, n=sizes, data=st.data())
def test_growing_session_gives_the_same_window_as_from_scratch(
    name: str, history: list[ChatMessage], n: int, data: st.DataObject
) -> None:
    """Strategies that reuse their previous result for a growing session must agree with a fresh run (one with
    the same summary store: a rolling summary is the transcript and the summaries stored so far)."""
    warm = FACTORIES[name](n)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(history)), max_size=4)))
    for cut in [*cuts, len(history)]:
        prefix = history[:cut]
        fresh = FACTORIES[name](n)
        share_summaries(fresh, warm)
        assert run(warm, prefix) == run(fresh, prefix)


def share_summaries(fresh: object, warm: object) -> None:
    """Give ``fresh``'s summarisers the stores of ``warm``'s, as two processes on one summary store have."""
    if isinstance(fresh, SummarizationCompaction) and isinstance(warm, SummarizationCompaction):
        fresh.store = warm.store
    for a, b in zip(getattr(fresh, "strategies", ()), getattr(warm, "strategies", ()), strict=True):
        share_summaries(a, b)


def test_the_checker_catches_broken_windows() -> None:
    """The invariant checker must fail on each kind of broken window, or the properties above prove nothing."""
    from ravi.kernel.messages import ToolCallBlock

    call = ToolCallBlock(id="c1", name="f")
    source = [
        ChatMessage.system("s"),
        ChatMessage.user("u"),
        ChatMessage.assistant(tool_calls=[call]),
        ChatMessage.tool("c1", "r"),
        ChatMessage.user("v"),
    ]
    broken = {
        "order changed": [source[0], source[4], source[1]],
        "system lost": source[1:],
        "orphaned tool result": [source[0], source[3], source[4]],
        "tool call without its result": [source[0], source[2], source[4]],
        "a message appears twice": [source[0], source[1], source[1]],
    }
    for reason, window in broken.items():
        with pytest.raises(AssertionError, match=reason):
            check_window(source, window)
    check_window(source, source)


@pytest.mark.parametrize("name", RECALL)
@settings(max_examples=60, deadline=None)
@given(history=transcripts, n=sizes)
def test_relevant_recall_meets_its_budget(name: str, history: list[ChatMessage], n: int) -> None:
    strategy = FACTORIES[name](n)
    assert isinstance(strategy, RelevantRecallStrategy)
    window = run(strategy, history)
    if DEFAULT_COUNTER.count_messages([m for m in history if m.role == "system"]) <= strategy.token_budget:
        assert DEFAULT_COUNTER.count_messages(window) <= strategy.token_budget
    if DEFAULT_COUNTER.count_messages(history) <= strategy.token_budget:
        assert window == history


_names = st.sampled_from([None, "Maya", "Sam"])
_days = st.integers(0, 400)


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """A transcript whose turns have senders' names and dates over a year, ending with a question: what recall
    labels."""
    from datetime import UTC, datetime, timedelta

    start = datetime(2023, 1, 1, tzinfo=UTC)
    out = []
    for m in draw(transcripts):
        if m.role in ("user", "assistant"):
            when = start + timedelta(days=draw(_days))
            m = m.model_copy(update={"name": draw(_names), "created_at": when})
        out.append(m)
    question = draw(st.sampled_from(["What did Maya do in March 2023?", "When did Sam adopt the puppy?", "Why?"]))
    return [*out, ChatMessage.user(question, id=f"q{len(out)}")]


@pytest.mark.parametrize("name", RECALL)
@settings(max_examples=60, deadline=None)
@given(history=conversations(), n=sizes)
def test_recalled_turns_keep_their_ids_and_the_budget_with_their_labels(
    name: str, history: list[ChatMessage], n: int
) -> None:
    """Labels (day, sender) are counted in the budget, and a labelled turn is still the turn: same id, same
    position, its text at the end of the label."""
    strategy = FACTORIES[name](n)
    assert isinstance(strategy, RelevantRecallStrategy)
    window = run(strategy, history)
    check_window(history, window)
    if DEFAULT_COUNTER.count_messages([m for m in history if m.role == "system"]) <= strategy.token_budget:
        assert DEFAULT_COUNTER.count_messages(window) <= strategy.token_budget
    source = {m.id: m for m in history}
    for m in window:
        if m != source[m.id]:
            assert m.role in ("user", "assistant") and m.text.endswith(source[m.id].text)
            assert m.text.startswith("[") or (m.name is not None and m.text.startswith(m.name))


@settings(max_examples=40, deadline=None)
@given(history=conversations(), n=st.integers(1, 30))
def test_a_cache_stable_recall_window_grows_at_its_end_while_its_request_and_budget_allow(
    history: list[ChatMessage], n: int
) -> None:
    """As a session grows, a ``prefer="cache"`` window is the previous one with the new turn appended whenever
    that fits the budget and the request (the latest user turn) is the same (a tool result may belong to a call
    the window no longer holds); every window keeps the invariants and the budget."""
    from ravi.agents.context.recall_request import read_request

    strategy = RelevantRecallStrategy(token_budget=n * 60, prefer="cache")
    session = SessionContext("agent", "s")
    previous: list[ChatMessage] | None = None
    for end in range(1, len(history) + 1):
        source = history[:end]
        window = run(strategy, source, session)
        check_window(source, window)
        if DEFAULT_COUNTER.count_messages([m for m in source if m.role == "system"]) <= strategy.token_budget:
            assert DEFAULT_COUNTER.count_messages(window) <= strategy.token_budget
        if previous is not None:
            grown = [*previous, source[-1]]
            same_request = read_request(source).text == read_request(source[:-1]).text
            turn = source[-1].role in ("user", "assistant")
            if turn and same_request and DEFAULT_COUNTER.count_messages(grown) <= strategy.token_budget:
                assert window == grown, "the window did not keep its prefix"
        previous = window


@pytest.mark.parametrize("name", ["sliding_watermark", "budget_watermark"])
@settings(max_examples=40, deadline=None)
@given(history=transcripts, n=st.integers(1, 30), data=st.data())
def test_watermarked_windows_keep_their_prefix_between_crossings(
    name: str, history: list[ChatMessage], n: int, data: st.DataObject
) -> None:
    """As a session grows, a watermarked window either starts as the previous one did, or it crossed the high
    watermark and dropped to the low one; it never exceeds the high watermark."""
    strategy = FACTORIES[name](n)
    session = SessionContext("agent", "s")
    previous: list[ChatMessage] | None = None
    for end in range(1, len(history) + 1):
        window = run(strategy, history[:end], session)
        check_window(history[:end], window)
        crossed = previous is not None and window[: len(previous)] != previous
        if crossed and isinstance(strategy, SlidingWindowCompaction):
            assert sum(1 for m in window if m.role != "system") <= n
        previous = window


_ASKED = [
    ChatMessage.user("the walrus lives in the cache", id="old"),
    *[ChatMessage.user(f"filler {i}", id=f"f{i}") for i in range(20)],
    ChatMessage.user("where does the walrus live these days, tell me please?", id="request"),
]


@settings(max_examples=150, deadline=None)
@example(history=_ASKED, budget=20, share=0.4, prefer="cache")  # the request costs more than the share, not the budget
@given(
    history=conversations(),
    budget=st.integers(0, 300),
    share=st.sampled_from([None, 0.3, 0.6]),
    prefer=st.sampled_from(["relevance", "cache"]),
)
def test_a_recall_window_holds_the_request_whenever_it_fits(
    history: list[ChatMessage], budget: int, share: float | None, prefer: str
) -> None:
    """The latest user turn, and every turn after it, are in the window whenever they fit in the budget beside
    the system messages: older units are recalled with what is left, never in their place."""
    strategy = RelevantRecallStrategy(budget, recall_share=share, prefer=prefer)  # type: ignore[arg-type]
    window = run(strategy, history)
    last = max(k for k, m in enumerate(history) if m.role == "user")
    count = DEFAULT_COUNTER.count_message
    systems = sum(count(m) for m in history if m.role == "system")
    if systems + sum(count(m) for m in history[last:] if m.role != "system") <= budget:
        kept = {m.id for m in window}
        assert [m.id for m in history[last:] if m.id not in kept] == []


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
def test_a_small_budget_keeps_the_request_before_recalling_older_units(prefer: str) -> None:
    """A request that costs more than the newest turns' share of the budget, but fits the budget, is sent; an
    older unit that matches it is recalled only with what is left."""
    from ravi.agents.context import InMemoryHistoryProvider, WindowRequest

    history = [ChatMessage.user("the walrus lives in the cache", id="old"), ChatMessage.assistant("noted", id="ok")]
    history += [ChatMessage.user(f"filler {i}", id=f"f{i}") for i in range(20)]
    history.append(ChatMessage.user("where does the walrus live these days, tell me please?", id="request"))
    count = DEFAULT_COUNTER.count_message
    budget = count(history[-1]) + 2
    assert count(history[-1]) > budget * 0.6 and count(history[0]) < budget

    async def main() -> None:
        store = InMemoryHistoryProvider()
        await store.append_many("a", history, session_id="s")
        strategy = RelevantRecallStrategy(budget, recall_share=0.4, meaning=None, prefer=prefer)  # type: ignore[arg-type]
        window = (await CompactionPipeline([strategy]).window(WindowRequest("a", "s", history=store))).messages
        assert [m.id for m in window] == ["request"]
        assert [m.id for m in await strategy.compact(history)] == ["request"]

    asyncio.run(main())


def test_a_cache_stable_window_held_empty_takes_the_request_once_the_budget_allows() -> None:
    """A window whose budget held nothing (its newest turns start with the next message to come) sends the
    request as soon as a larger budget fits it, without waiting for a new message."""
    from ravi.agents.context import InMemoryHistoryProvider, WindowRequest

    history = [ChatMessage.user(f"turn {i}", id=f"t{i}") for i in range(8)]

    async def main() -> None:
        store = InMemoryHistoryProvider()
        await store.append_many("a", history, session_id="s")
        pipeline = CompactionPipeline([RelevantRecallStrategy(4_000, meaning=None, prefer="cache")])
        assert (await pipeline.window(WindowRequest("a", "s", history=store, budget=0))).messages == []
        window = (await pipeline.window(WindowRequest("a", "s", history=store, budget=30))).messages
        assert "t7" in [m.id for m in window]

    asyncio.run(main())
