"""The model contexts as 003 describes them, checked against its words."""

from __future__ import annotations

import inspect

import pytest

from ravi.agents.context import (
    AgentContext,
    ChatMessage,
    HybridContext,
    InMemoryHistoryProvider,
    ModelContext,
    SlidingWindowContext,
    SummarizingContext,
    TokenBudgetContext,
    UnboundedContext,
)
from ravi.agents.llm import CallableLLMClient
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.llm import ModelInfo


class WordClient:
    """A model client that counts tokens as words and runs gpt-4o."""

    model = "gpt-4o"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def complete(self, prompt: object, *, max_tokens: int = 256, cancel: object = None) -> str:
        return "summary"


async def fill(context: ModelContext, n: int) -> None:
    await AgentContext(context).add_messages("s", [ChatMessage.user(f"m{i} " + "word " * 9) for i in range(n)])


async def test_every_context_is_a_model_context_with_build() -> None:
    """003: "ModelContext is the strategy that decides which messages the LLM actually sees"; ``.build()``."""
    assert inspect.isabstract(ModelContext)
    contexts = [
        UnboundedContext(),
        SlidingWindowContext(max_messages=3),
        TokenBudgetContext(max_tokens=10_000),
        HybridContext(InMemoryHistoryProvider(), InMemoryHistoryProvider(), recent_n=2, max_total=4),
        SummarizingContext(model_client=WordClient(), threshold=0.8),
    ]
    for context in contexts:
        assert isinstance(context, ModelContext)
        await fill(context, 6)
        window = await context.build("s")
        assert window and window[-1].text.startswith("m5")
    assert len(await contexts[1].build("s")) == 3


async def test_token_budget_context_counts_with_the_model_client() -> None:
    """003: "Uses model_client.count_tokens() if provided, else falls back to the 4-chars-per-token heuristic"."""
    long_words = [ChatMessage.user(f"m{i} " + "supercalifragilistic " * 4) for i in range(10)]
    context = TokenBudgetContext(max_tokens=40)
    await AgentContext(context).add_messages("s", long_words)
    # by words: 5 words + 4 framing = 9 a message, 4 fit in 40; by characters: 88 / 4 + 4 = 26, only 1 fits
    assert len(await context.build("s", model_client=WordClient())) == 4
    assert len(await context.build("s")) == 1
    counted = TokenBudgetContext(max_tokens=40, model_client=WordClient())
    await AgentContext(counted).add_messages("s", long_words)
    assert len(await counted.build("s")) == 4


def test_summarizing_context_as_printed() -> None:
    """003: ``SummarizingContext(model_client=client, threshold=0.8)``, sized from the client's model."""
    context = SummarizingContext(model_client=WordClient(), threshold=0.8)
    assert context.pipeline.strategies
    with pytest.raises(ConfigurationError, match="model_client that names its model"):
        SummarizingContext(model_client=CallableLLMClient(lambda messages: "summary"), threshold=0.8)
    with pytest.raises(ConfigurationError, match="model_client must be an LLMClient"):
        SummarizingContext(model_client=object(), threshold=0.8)  # type: ignore[arg-type]


async def test_hybrid_context_takes_a_session_manager() -> None:
    """003: ``HybridContext(session_manager=sm, recent_n=20, max_total=40)``."""

    class SessionManager:
        redis = InMemoryHistoryProvider()
        postgres = InMemoryHistoryProvider()

    context = HybridContext(session_manager=SessionManager(), recent_n=2, max_total=4)
    await fill(context, 6)
    assert await SessionManager.postgres.count_messages("agent", session_id="s") == 6
    assert len(await context.build("s")) == 4
    with pytest.raises(ConfigurationError):
        HybridContext(session_manager=object())


async def test_hybrid_context_keeps_the_system_message_above_max_total() -> None:
    """003: the hybrid window is ``[sys, m1..m30, m45..m50]`` "(up to max_total)": the newest ``max_total`` turns,
    in order and each once, with the system message kept on top as ``SlidingWindowContext`` keeps it."""
    hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
    context = HybridContext(hot, cold, recent_n=2, max_total=4)
    await AgentContext(context).add_messages("s", [ChatMessage.system("rules")])
    await fill(context, 6)
    window = await context.build("s")
    assert window[0].text == "rules"
    assert [m.text.split()[0] for m in window[1:]] == ["m2", "m3", "m4", "m5"]


async def test_a_model_context_default_is_that_context_with_its_own_defaults() -> None:
    """``ContextConfig.default()`` (000) is inherited by 003's contexts: each gives itself over in-memory history
    with its own defaults, not a ``ContextConfig``'s arguments put in its own places (the history as
    ``max_messages``)."""
    sliding = SlidingWindowContext.default()
    assert type(sliding) is SlidingWindowContext
    assert isinstance(sliding.history, InMemoryHistoryProvider)
    await fill(sliding, 120)
    assert len(await sliding.build("s")) == 100  # its own default, max_messages=100
    unbounded = UnboundedContext.default()
    assert type(unbounded) is UnboundedContext
    await fill(unbounded, 120)
    assert len(await unbounded.build("s")) == 120


@pytest.mark.parametrize(
    ("context", "needs"),
    [(TokenBudgetContext, "max_tokens"), (HybridContext, "hot"), (SummarizingContext, "max_tokens")],
)
def test_a_model_context_that_needs_arguments_has_no_default(context: type[ModelContext], needs: str) -> None:
    """A context with no defaults for what it needs says so as a ``ConfigurationError`` naming it."""
    with pytest.raises(ConfigurationError, match=needs) as raised:
        context.default()
    assert raised.value.hint


@pytest.mark.parametrize("context", [SlidingWindowContext, UnboundedContext, TokenBudgetContext, HybridContext])
def test_a_model_context_is_not_built_from_settings(context: type[ModelContext]) -> None:
    """``from_settings`` builds the pipeline the settings name; a model context's pipeline is its own, so the two
    cannot both hold: a ``ConfigurationError`` that says what to do instead, not a context built with the
    settings' pieces in the wrong places."""
    with pytest.raises(ConfigurationError, match="from_settings") as raised:
        context.from_settings()
    assert "build_store('history')" in (raised.value.hint or "")


class _NamedClient:
    model = "gpt-4o"

    async def complete(self, messages: object, *, max_tokens: int | None = None, cancel: object = None) -> str:
        return "a summary"


@pytest.mark.parametrize(
    "named",
    [
        {"model": "gpt-4o"},
        {"max_tokens": 4_000, "model": "gpt-4o"},
        {"model": ModelInfo(name="my-model", context_window=32_000, max_output_tokens=4_000)},
        {"model_client": _NamedClient()},
    ],
)
async def test_a_summarizing_context_that_names_its_model_takes_usage_reports(named: dict[str, object]) -> None:
    """The model a SummarizingContext is given (or its client names) is the model its windows are sent to, so
    record_usage calibrates it rather than saying no model is configured."""
    context = AgentContext(SummarizingContext(**named))  # type: ignore[arg-type]
    await context.add_message("s", ChatMessage.user("hello " * 50))
    await context.get_prompt_window("s")
    assert await context.record_usage("s", 80) > 0


class _CountingClient(_NamedClient):
    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1


@pytest.mark.parametrize(
    "named",
    [
        {"model": "gpt-4o"},
        {"model": ModelInfo(name="my-model", context_window=32_000, max_output_tokens=4_000)},
        {"model_client": _CountingClient()},
    ],
)
async def test_a_token_budget_context_that_names_its_model_takes_usage_reports(named: dict[str, object]) -> None:
    context = AgentContext(TokenBudgetContext(max_tokens=8_000, **named))  # type: ignore[arg-type]
    for _ in range(3):
        await context.add_message("s", ChatMessage.user("hello " * 400))
    await context.get_prompt_window("s")
    assert await context.record_usage("s", 2_000) > 1


@pytest.mark.parametrize("kind", ["budget", "summarizing"])
async def test_model_contexts_share_corrections_through_the_state_store_they_are_given(kind: str) -> None:
    """Two workers' contexts over one state store: a correction one records sizes the other's windows."""
    from ravi.agents.storage import InMemoryStateStore
    from ravi.agents.tokens import HeuristicTokenCounter

    state, history = InMemoryStateStore(), InMemoryHistoryProvider()
    first = AgentContext(TokenBudgetContext(max_tokens=2_000, history=history, model="gpt-4o", state=state))
    other = (
        TokenBudgetContext(max_tokens=2_000, history=history, model="gpt-4o", state=state)
        if kind == "budget"
        else SummarizingContext(_NamedClient(), max_tokens=2_000, model="gpt-4o", history=history, state=state)
    )
    second = AgentContext(other)
    for i in range(40):
        await first.add_message("s", ChatMessage.user(f"turn {i} " + "hello " * 40))
    count = HeuristicTokenCounter().count_messages
    before = count(await second.get_prompt_window("s"))
    await first.get_prompt_window("s")
    await first.record_usage("s", 7_500)  # the provider counts nearly four times what was counted here
    assert count(await second.get_prompt_window("s")) < before


def test_a_token_budget_context_that_names_its_model_counts_as_that_model() -> None:
    """A model named and no counter: the window is measured as the model counts (an exact count for gpt-4o, a
    conservative one for a model Ravi does not know), not with the rough 4-characters estimate."""
    from ravi.agents.tokens import counter_for_model

    assert TokenBudgetContext(8_000, model="gpt-4o").counter.key == counter_for_model("gpt-4o").key
    unknown = TokenBudgetContext(8_000, model=ModelInfo(name="my-model", context_window=32_000, max_output_tokens=1))
    assert unknown.counter.key == counter_for_model("my-model").key
    assert TokenBudgetContext(8_000).counter.key != counter_for_model("gpt-4o").key
    # a client that names its model but cannot count: counted as the model it names
    assert TokenBudgetContext(8_000, model_client=_NamedClient()).counter.key == counter_for_model("gpt-4o").key


@pytest.mark.parametrize(
    ("arguments", "error", "says"),
    [
        ({"max_tokens": -1}, InvalidArgument, "max_tokens"),
        ({"max_tokens": 0}, InvalidArgument, "max_tokens"),
        ({"llm": "gpt-4o", "max_tokens": 4_000}, ConfigurationError, "LLMClient"),
        ({"llm": _NamedClient(), "model_client": _NamedClient(), "max_tokens": 4_000}, ConfigurationError, "both"),
        ({"model": ""}, ConfigurationError, "model"),
    ],
)
def test_a_summarizing_context_refuses_what_it_cannot_run_with(
    arguments: dict[str, object], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        SummarizingContext(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_tokens", [0, -1, 1.5, True, None, "8000"])
def test_a_token_budget_context_refuses_a_budget_that_is_not_a_positive_integer(max_tokens: object) -> None:
    """A budget of 0 was taken, and every window then held the system messages alone: ``record_usage`` said no
    window had been assembled."""
    with pytest.raises(InvalidArgument, match="max_tokens") as raised:
        TokenBudgetContext(max_tokens, model="gpt-4o")  # type: ignore[arg-type]
    assert raised.value.field == "max_tokens"


@pytest.mark.parametrize("max_messages", [0, -1, 1.5, True, None])
def test_a_sliding_window_context_refuses_a_size_that_is_not_a_positive_integer(max_messages: object) -> None:
    with pytest.raises(InvalidArgument, match="max_messages"):
        SlidingWindowContext(max_messages)  # type: ignore[arg-type]


def test_a_summarizing_context_refuses_a_budget_its_threshold_leaves_nothing_of() -> None:
    with pytest.raises(InvalidArgument, match="max_tokens"):
        SummarizingContext(max_tokens=1, threshold=0.5)


@pytest.mark.parametrize(
    ("context", "arguments", "says"),
    [
        (SummarizingContext, {"state": 1}, "state"),
        (SummarizingContext, {"history": 1}, "history"),
        (SummarizingContext, {"counter": 1}, "counter"),
        (SummarizingContext, {"retention": "run"}, "retention"),
        (SummarizingContext, {"llm": 1}, "llm"),
        (SummarizingContext, {"model_client": 1}, "model_client"),
        (SummarizingContext, {"model": 1}, "model"),
        (SummarizingContext, {"model": ""}, "model"),
        (SummarizingContext, {"model": 1, "history": 1}, "model"),
        (SummarizingContext, {"history": 1, "state": 1}, "history"),
        (TokenBudgetContext, {"max_tokens": 100, "model": 1}, "model"),
        (TokenBudgetContext, {"max_tokens": 100, "model": ""}, "model"),
        (TokenBudgetContext, {"max_tokens": 100, "history": 1, "model_client": 1}, "history"),
        (TokenBudgetContext, {"max_tokens": 100, "counter": 1, "state": 1}, "counter"),
        (TokenBudgetContext, {"max_tokens": 0, "history": 1}, "max_tokens"),
    ],
)
def test_a_model_context_names_the_first_bad_argument_as_given(
    context: type[ModelContext], arguments: dict[str, object], says: str
) -> None:
    """``SummarizingContext(state=1)`` said its budget was missing, and ``model=1`` raised a bare
    ``AttributeError``: every argument's type is checked before the budget is worked out, in the order given."""
    with pytest.raises((ConfigurationError, InvalidArgument)) as raised:
        context(**arguments)
    assert str(raised.value).startswith(f"{says} ") or str(raised.value).startswith(f"{says}: ")


@pytest.mark.parametrize("max_tokens", [0, -1, 8_000.0, "8000", True])
def test_a_token_budget_context_refuses_a_budget_it_cannot_fill_naming_it(max_tokens: object) -> None:
    """003's ``TokenBudgetContext(max_tokens=...)``: 0 was taken (every window empty but its system messages) and
    a bad value was refused as ``token_budget``, a parameter the context does not have."""
    with pytest.raises(InvalidArgument, match="max_tokens"):
        TokenBudgetContext(max_tokens=max_tokens)  # type: ignore[arg-type]


class _AsyncCounting:
    async def count_tokens(self, text: str) -> int:
        return len(text)


class _Counting:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def count_tokens(self, text: str) -> object:
        return self.answer


async def test_a_client_count_that_is_not_a_count_is_refused() -> None:
    """003's ``count_tokens()``: an async one raised a bare ``TypeError`` (and left its coroutine unawaited), and an
    answer that is not a count (``"7"``, ``-1``, ``7.5``) was converted or taken, a negative one making any window
    fit. A window is counted without awaiting, so an async count is refused when the context is built, and a
    count must be a whole number >= 0."""
    with pytest.raises(ConfigurationError, match="count_tokens"):
        TokenBudgetContext(max_tokens=100, model_client=_AsyncCounting())
    context = TokenBudgetContext(max_tokens=100)
    await AgentContext(context).add_messages("s", [ChatMessage.user("hello world")])
    with pytest.raises(ConfigurationError, match="count_tokens"):
        await context.build("s", model_client=_AsyncCounting())
    for answer in ("7", -1, 7.5, True, None):
        with pytest.raises(InvalidArgument, match="count_tokens"):
            await context.build("s", model_client=_Counting(answer))
    assert [m.text for m in await context.build("s", model_client=_Counting(7))] == ["hello world"]


@pytest.mark.parametrize(
    "others",
    [{}, {"counter": "heuristic"}, {"model": "gpt-4o"}, {"counter": "heuristic", "model": "gpt-4o"}],
    ids=["alone", "with-a-counter", "with-a-model", "with-both"],
)
@pytest.mark.parametrize("client", [1, "gpt-4o", object()], ids=["int", "str", "object"])
def test_a_token_budget_context_refuses_a_model_client_that_is_none(client: object, others: dict[str, str]) -> None:
    """``TokenBudgetContext(100, counter=c, model_client=1)`` took the 1 and ignored it (the counter counts, so
    the client was never looked at), as it did beside a model; alone it was refused as "int has no count_tokens"."""
    from ravi.agents.tokens import HeuristicTokenCounter

    arguments: dict[str, object] = {**others}
    if "counter" in arguments:
        arguments["counter"] = HeuristicTokenCounter()
    with pytest.raises(ConfigurationError) as raised:
        TokenBudgetContext(100, model_client=client, **arguments)  # type: ignore[arg-type]
    assert str(raised.value).startswith("model_client "), raised.value
    # what a model client is here: one that counts, one that names its model, an LLMClient (which, naming no model
    # and unable to count, needs a counter or a model beside it)
    goods: list[object] = [WordClient(), _NamedClient(), _Counting(3)]
    goods += [CallableLLMClient(lambda messages: "s")] if others else []
    for good in goods:
        TokenBudgetContext(100, model_client=good, **arguments)  # type: ignore[arg-type]
