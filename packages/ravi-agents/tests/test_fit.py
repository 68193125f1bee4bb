"""Windows that fit the model they are sent to: per-model counters, the conservative estimate, reserves."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.agents.context import TokenBudgetComposedStrategy
from ravi.agents.context.calibration import MAX_RATIO
from ravi.agents.context.models import model_info
from ravi.agents.tokens import (
    DEFAULT_COUNTER,
    ConservativeTokenCounter,
    ExactTokenCounter,
    counter_for_model,
    tool_tokens,
)
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.messages import ChatMessage, ToolCallBlock

O200K = ExactTokenCounter("o200k_base")
CL100K = ExactTokenCounter("cl100k_base")


def json_tool_session(turns: int, seed: int = 3) -> list[ChatMessage]:
    """The case that matters: an agent reading JSON tool output, which the heuristic undercounts by almost half."""
    rng = random.Random(seed)
    out = [ChatMessage.system("You are an operations agent.")]
    for i in range(turns):
        out.append(ChatMessage.user(f"check service {i}"))
        call = ToolCallBlock(id=f"c{i}", name="describe", arguments={"service": f"svc-{i}"})
        out.append(ChatMessage.assistant(None, tool_calls=[call]))
        rows = [
            {"id": rng.getrandbits(48), "ok": rng.random() < 0.9, "p99_ms": round(rng.random() * 900, 2),
             "region": rng.choice(["eu-west-1", "us-east-2"]), "tags": [f"t{rng.randint(0, 99)}" for _ in range(3)]}
            for _ in range(40)
        ]  # fmt: skip
        out.append(ChatMessage.tool(f"c{i}", json.dumps(rows)))
        out.append(ChatMessage.assistant(f"service {i} looks fine"))
    return out


def test_openai_models_count_with_their_own_encoding() -> None:
    assert counter_for_model("gpt-4o").key == "tokens:exact:o200k_base"
    assert counter_for_model("openai/gpt-4.1-mini-2025-04-14").key == "tokens:exact:o200k_base"
    assert counter_for_model("gpt-4-turbo").key == "tokens:exact:cl100k_base"


@pytest.mark.parametrize("name", ["gpt-4o-banana", "gpt-4-banana", "o1x", "o100", "gpt-4.6"])
def test_a_name_that_merely_starts_with_an_openai_model_is_counted_as_an_unknown_one(name: str) -> None:
    """``gpt-4o-banana`` was counted with ``gpt-4o``'s encoding (and ``o100`` with ``o1``'s), which may not be its
    own: an unknown model gets the conservative estimate with the unknown margin."""
    counter = counter_for_model(name)
    assert isinstance(counter, ConservativeTokenCounter) and counter.scale == 1.30


@pytest.mark.parametrize(
    ("name", "encoding"),
    [
        ("gpt-4o-2024-08-06", "o200k_base"),
        ("azure/gpt-4o-mini_eastus2", "o200k_base"),
        ("o3-mini-2025-01-31", "o200k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("gpt-4-turbo-preview", "cl100k_base"),
    ],
)
def test_variants_of_an_openai_model_count_with_its_encoding(name: str, encoding: str) -> None:
    assert counter_for_model(name).key == f"tokens:exact:{encoding}"


def test_other_families_get_the_estimate_with_their_margin() -> None:
    assert isinstance(counter_for_model("claude-sonnet-4-5"), ConservativeTokenCounter)
    assert counter_for_model("claude-sonnet-4-5").scale == 1.30
    assert counter_for_model("gemini-2.5-pro").scale == 1.10
    assert counter_for_model("llama-3.1-8b-instruct").scale == 1.05
    assert counter_for_model("some-new-model").scale == 1.30


def test_without_bpe_openai_an_openai_model_is_estimated_and_the_log_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ravi.agents.tokens as tokens

    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # import fails as if not installed
    monkeypatch.setattr(tokens, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="ravi.tokens"):
        counter = counter_for_model("gpt-4o")
    assert isinstance(counter, ConservativeTokenCounter)
    assert "pip install 'ravi-agents[exact]'" in caplog.text


def test_an_exact_counter_that_cannot_load_raises_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="unknown encoding"):
        ExactTokenCounter("p50k_nonsense")
    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    with pytest.raises(ConfigurationError) as raised:
        ExactTokenCounter("o200k_base")
    assert raised.value.hint == (
        "pip install 'ravi-agents[exact]'; from a clone of Ravi, at its root: "
        "pip install './packages/ravi-agents[exact]'"
    )


def test_from_model_windows_of_json_tool_output_fit_gpt_4o() -> None:
    """With the heuristic, a gpt-4o window of JSON tool output is over the model's room; with the default
    counter (gpt-4o's own encoding) it fits, and uses most of the budget."""
    history = json_tool_session(260)
    room = model_info("gpt-4o").context_window - model_info("gpt-4o").max_output_tokens
    before = TokenBudgetComposedStrategy.from_model("gpt-4o", counter=DEFAULT_COUNTER)
    window = asyncio.run(before.compact(history))
    assert O200K.count_messages(window) > room  # the heuristic undercounts JSON: the provider would refuse it
    strategy = TokenBudgetComposedStrategy.from_model("gpt-4o")
    window = asyncio.run(strategy.compact(history))
    used = O200K.count_messages(window)
    assert used <= strategy.token_budget < room
    assert used >= 0.95 * strategy.token_budget


def test_the_estimate_does_not_undercount_whole_windows() -> None:
    """On JSON, CJK, Cyrillic, code and logs, a window the estimate fits is within both OpenAI encodings."""
    rng = random.Random(5)
    texts = [
        json.dumps({"k": [rng.random() for _ in range(30)], "name": "ünïcode ✓"}),
        "東京都の天気は晴れ、気温は二十度です。" * 20,
        "Привет, как дела? Всё хорошо, спасибо. " * 20,
        "def f(x):\n    return {k: v for k, v in x.items() if v is not None}\n" * 15,
        "\n".join(f"2026-01-0{i % 9 + 1}T10:00:00Z ERROR [db/pool.py:{i}] timeout after {i * 7}ms" for i in range(30)),
    ]
    window = [ChatMessage.user(t) for t in texts for _ in range(3)]
    estimate = ConservativeTokenCounter()
    assert estimate.count_messages(window) >= max(O200K.count_messages(window), CL100K.count_messages(window))


def test_the_budget_reserves_output_tools_and_margin() -> None:
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 400}} for i in range(10)]
    plain = TokenBudgetComposedStrategy.from_model("gpt-4o", trigger_ratio=1.0)
    counter = counter_for_model("gpt-4o")
    with_tools = TokenBudgetComposedStrategy.from_model("gpt-4o", trigger_ratio=1.0, tools=tools)
    assert plain.token_budget - with_tools.token_budget == tool_tokens(tools, counter) > 1_000
    smaller_output = TokenBudgetComposedStrategy.from_model("gpt-4o", trigger_ratio=1.0, output_reserve=1_000)
    assert smaller_output.token_budget == 128_000 - 1_000 - 1_024
    reserved = TokenBudgetComposedStrategy.from_model("gpt-4o", trigger_ratio=1.0, reserve=500, safety_margin=0)
    assert reserved.token_budget == 128_000 - 16_384 - 500
    with pytest.raises(InvalidArgument):
        TokenBudgetComposedStrategy.from_model("gpt-4o", output_reserve=-1)
    with pytest.raises(InvalidArgument):
        TokenBudgetComposedStrategy.from_model("gpt-4o", tools=[{"bad": object()}])


def test_reserves_that_leave_no_room_are_a_configuration_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An output reserve (or tools, reserve and margin) as large as the model's window made a budget of 0 tokens,
    silently: every window then held the system messages alone, and the user's newest turn was left out."""
    from ravi.agents.context import ContextConfig

    for kwargs in ({"output_reserve": 128_000}, {"output_reserve": 10**23}, {"reserve": 111_616, "safety_margin": 0}):
        with pytest.raises(ConfigurationError, match="leaves no room for messages"):
            TokenBudgetComposedStrategy.from_model("gpt-4o", **kwargs)  # type: ignore[arg-type]
    assert TokenBudgetComposedStrategy.from_model("gpt-4o", trigger_ratio=1.0, reserve=110_591).token_budget == 1
    path = tmp_path / "ravi.toml"
    path.write_text('[context]\nmodel = "gpt-4o"\noutput_reserve = 200000\n')
    with pytest.raises(ConfigurationError, match="leaves no room for messages"):
        ContextConfig.from_settings(path=path)


def test_the_settings_reserve_too(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ravi.agents.context.build import build_pipeline
    from ravi.agents.settings import load_settings

    path = tmp_path / "ravi.toml"
    path.write_text('[context]\nmodel = "gpt-4o"\ntrigger_ratio = 1.0\noutput_reserve = 4000\ntools_reserve = 3000\n')
    budget = build_pipeline(load_settings(path).context)[-1]  # type: ignore[index]
    assert budget.token_budget == 128_000 - 4_000 - 3_000 - 1_024
    assert budget.own_counter.key == "tokens:exact:o200k_base"


class HalfCounter:
    """A counter that reports half of the heuristic: it undercounts, as the heuristic does on JSON."""

    key = "tokens:test-half"

    def count_text(self, text: str) -> int:
        return DEFAULT_COUNTER.count_text(text) // 2

    def count_message(self, message: ChatMessage) -> int:
        return DEFAULT_COUNTER.count_message(message) // 2

    def count_messages(self, messages: list[ChatMessage]) -> int:
        return sum(map(self.count_message, messages))


def test_a_window_assembled_after_calibration_fits() -> None:
    """The counter undercounts by half; once the provider's count of one window is reported, the next window
    (by the provider's count, here the heuristic) fits the budget, and the correction is kept in the state store."""
    from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider
    from ravi.agents.storage import InMemoryStateStore

    async def main() -> None:
        state = InMemoryStateStore()
        budget = TokenBudgetComposedStrategy([], token_budget=2_000, counter=HalfCounter())  # type: ignore[arg-type]
        config = ContextConfig(InMemoryHistoryProvider(), [budget], model="my-model", state=state)
        context = AgentContext(config)
        await context.add_messages("s", [ChatMessage.user(f"turn {i} " + "x" * 300) for i in range(100)])
        window = await context.get_prompt_window("s")
        reported = DEFAULT_COUNTER.count_messages(window)
        assert reported > 2_000  # the provider sees more than the budget
        factor = await context.record_usage("s", reported)
        assert factor >= 1.9
        window = await context.get_prompt_window("s")
        assert DEFAULT_COUNTER.count_messages(window) <= 2_000
        other = AgentContext(ContextConfig(InMemoryHistoryProvider(), [budget], model="my-model", state=state))
        assert await other.config.calibration.factor("my-model") == factor  # shared through the store
        with pytest.raises(InvalidArgument):
            await other.record_usage("never-assembled", 100)
        with pytest.raises(InvalidArgument):
            await context.record_usage("s", 0)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("model", "reported"),
    [("gpt-4o", 128_001), ("gpt-4o-2024-08-06", 128_001), ("my-model", 10**30), ("my-model", 10**400)],
    ids=["past-the-window", "dated-name", "1e30", "1e400"],
)
def test_a_prompt_size_no_model_takes_is_refused_and_the_correction_kept(model: str, reported: int) -> None:
    """A reported prompt larger than the model's window (or than any model's in the table, for a model it does
    not know) cannot be one call's prompt: 10**30 was kept as a correction of 1e29, which the state store shared
    with every process and which shrank every window of the model to nothing; 10**400 raised OverflowError."""
    from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider

    async def main() -> None:
        config = ContextConfig(InMemoryHistoryProvider(), [TokenBudgetComposedStrategy([], 2_000)], model=model)
        context = AgentContext(config)
        await context.add_messages("s", [ChatMessage.user(f"turn {i} " + "x" * 300) for i in range(20)])
        window = await context.get_prompt_window("s")
        with pytest.raises(InvalidArgument, match="prompt"):
            await context.record_usage("s", reported)
        assert await config.calibration.factor(model) == 1.0
        assert await context.get_prompt_window("s") == window

    asyncio.run(main())


def test_the_lean_install_warning_gives_its_hint_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without ``bpe-openai`` the warning used to repeat "pip install 'ravi-agents[exact]'" twice in one line."""
    import sys

    from ravi.agents import tokens

    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # as in a lean install
    monkeypatch.setattr(tokens, "_WARNED", set())
    with caplog.at_level("WARNING", logger="ravi.tokens"):
        counter = tokens.counter_for_model("gpt-4o")
    assert type(counter).__name__ == "ConservativeTokenCounter"
    [record] = caplog.records
    assert record.getMessage().count("pip install 'ravi-agents[exact]'") == 1, record.getMessage()


async def test_a_newest_message_larger_than_the_budget_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A request larger than the whole budget is left out like any message that does not fit (the window still
    fits), and the pipeline warns, naming it, so the missing request is not silent; a window that holds the
    newest message warns nothing, whether read whole or by windowed reads from a store."""
    from ravi.agents.context import (
        AgentContext,
        ContextConfig,
        InMemoryHistoryProvider,
        RelevantRecallStrategy,
        ToolResultCompactionStrategy,
    )
    from ravi.kernel.messages import ChatMessage

    for strategy in (TokenBudgetComposedStrategy([], 300), RelevantRecallStrategy(300, meaning=None)):
        context = AgentContext(ContextConfig(InMemoryHistoryProvider(), [ToolResultCompactionStrategy(), strategy]))
        with caplog.at_level(logging.WARNING, logger="ravi.agents.context.pipeline"):
            for k in range(40):
                await context.add_message("s", ChatMessage.user(f"question {k} about the deploy"))
                await context.add_message("s", ChatMessage.assistant(f"answer {k}"))
                await context.get_prompt_window("s")
            assert caplog.records == []
            huge = ChatMessage.user("log line " * 2_000, id="pasted")
            await context.add_message("s", huge)
            window = await context.get_prompt_window("s")
        assert "pasted" not in [m.id for m in window]
        assert len(caplog.records) == 1 and "'pasted'" in caplog.records[0].getMessage()
        caplog.clear()


def test_workers_sharing_a_state_store_see_and_keep_each_others_corrections() -> None:
    """Two workers (two ``Calibration`` objects) on one state store: a correction one reports is the other's
    from its next window on, even when the other read the store before, and the other's smaller report never
    erases it (each worker read the store once and then wrote its own list over the other's)."""
    from ravi.agents.context.calibration import Calibration
    from ravi.agents.storage import InMemoryStateStore

    async def main() -> None:
        state = InMemoryStateStore()
        a, b = Calibration(state), Calibration(state)
        assert await b.factor("m") == 1.0  # b has read the store
        assert await a.observe("m", counted=1_000, reported=2_000) == 2.0
        assert await b.factor("m") == 2.0
        assert await b.observe("m", counted=1_000, reported=1_100) == 2.0
        assert await a.factor("m") == 2.0
        assert await Calibration(state).factor("m") == 2.0

    asyncio.run(main())


async def test_a_report_that_includes_the_tool_definitions_gives_an_exact_counter_no_correction() -> None:
    """The provider bills the tool definitions with the window; the budget left room for them, so the report is
    compared with both. A first turn of "hi" and ten tools once gave a correction of 651, which shrank every window
    of the model (and, through the state store, of every process) to a hundred tokens."""
    from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider

    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "d " * 300}} for i in range(10)]
    counter = counter_for_model("gpt-4o")
    budget = TokenBudgetComposedStrategy.from_model("gpt-4o", tools=tools)
    assert budget.traits.prompt_overhead == tool_tokens(tools, counter) > 3_000
    context = AgentContext(ContextConfig(InMemoryHistoryProvider(), [budget], model="gpt-4o"))
    for i in range(400):
        await context.add_message("long", ChatMessage.user(f"turn {i}: " + "words " * 100))
    before = counter.count_messages(await context.get_prompt_window("long"))
    await context.add_message("new", ChatMessage.user("hi"))
    window = counter.count_messages(await context.get_prompt_window("new"))
    assert await context.record_usage("new", window + tool_tokens(tools, counter)) == 1.0
    assert counter.count_messages(await context.get_prompt_window("long")) == before
    # an undercount of the window itself is still corrected
    assert await context.record_usage("new", int((window + tool_tokens(tools, counter)) * 1.2)) > 1.1


async def test_a_report_without_a_configured_model_is_refused_and_names_prompt_tokens() -> None:
    """With no model configured no window applies a correction: record_usage returned one (10.1) that did
    nothing. A bad count is named as the caller passed it, ``prompt_tokens`` (it was called ``reported``)."""
    from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider

    context = AgentContext(ContextConfig(InMemoryHistoryProvider(), [TokenBudgetComposedStrategy([], 500)]))
    await context.add_message("s", ChatMessage.user("hi"))
    await context.get_prompt_window("s")
    with pytest.raises(ConfigurationError, match="none is configured") as raised:
        await context.record_usage("s", 5_000)
    assert "model=" in (raised.value.hint or "")
    named = AgentContext(
        ContextConfig(InMemoryHistoryProvider(), [TokenBudgetComposedStrategy([], 500)], model="gpt-4o")
    )
    for bad in (0, -3, True, 2.5, "100"):
        with pytest.raises(InvalidArgument, match="prompt_tokens must be a positive integer"):
            await named.record_usage("s", bad)  # type: ignore[arg-type]


async def test_a_report_of_a_tiny_window_or_of_far_more_than_the_window_leaves_the_correction() -> None:
    """A window of just "hi" reported at 1,500 tokens (the application's own system prompt beside it) gave a
    correction of 300, which emptied every later window of the model, for good: no window was left to report on.
    A tiny window's report is not kept; a ratio no counter's error reaches is refused."""
    from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider
    from ravi.agents.context.calibration import MAX_RATIO, MIN_COUNTED

    context = AgentContext(
        ContextConfig(InMemoryHistoryProvider(), [TokenBudgetComposedStrategy([], 8_000)], model="gpt-4o")
    )
    await context.add_message("s", ChatMessage.user("hi"))
    await context.get_prompt_window("s")
    assert await context.record_usage("s", 1_500) == 1.0
    await context.add_messages("s", [ChatMessage.user(f"turn {i}: " + "words " * 100) for i in range(200)])
    window = await context.get_prompt_window("s")
    counted = DEFAULT_COUNTER.count_messages(window)
    assert counted >= MIN_COUNTED
    with pytest.raises(InvalidArgument, match="more than the window"):
        await context.record_usage("s", int(counted * (MAX_RATIO + 0.5)))
    assert await context.get_prompt_window("s") == window
    assert await context.record_usage("s", int(counted * 1.25)) >= 1.2  # an undercount is still corrected


@pytest.mark.parametrize("stored", [300.0, 1e308, MAX_RATIO + 0.01, -2.0, 0])
async def test_a_ratio_past_the_cap_in_the_state_store_corrects_no_window(stored: float) -> None:
    """A state store shared with workers that kept uncapped ratios (or written before the cap) held a correction
    of 300: it emptied every window of the model until enough new reports pushed it out. Only the ratios a report
    may give are read back."""
    from ravi.agents.context import AgentContext, TokenBudgetContext
    from ravi.agents.context.calibration import SCOPE
    from ravi.agents.storage.state import InMemoryStateStore

    state = InMemoryStateStore()
    await state.reserved().update_state(SCOPE, {"gpt-4o": [stored, 1.1]})
    context = TokenBudgetContext(2_000, model="gpt-4o", state=state)
    assert await context.calibration.factor("gpt-4o") == 1.1
    await AgentContext(context).add_messages("s", [ChatMessage.user(f"turn {i}: " + "word " * 100) for i in range(20)])
    assert len(await context.build("s")) >= 10


def test_a_fixed_budget_beside_a_model_counts_as_that_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``[context] model = "gpt-4o"`` with ``token_budget = 5000`` (what ``ravi window --budget`` gives on such a
    configuration), and a pipeline's ``token_budget`` strategy given both a ``model`` and a ``token_budget``,
    counted with the heuristic: the model was dropped without a word, so a window of 5,000 heuristic tokens could
    hold more of the model's own."""
    from ravi.agents.context.build import build_pipeline
    from ravi.agents.settings import load_settings

    path = tmp_path / "ravi.toml"
    path.write_text('[context]\nmodel = "gpt-4o"\ntoken_budget = 5000\n')
    budget = build_pipeline(load_settings(path).context)[-1]  # type: ignore[index]
    assert budget.token_budget == 5_000
    assert budget.own_counter.key == "tokens:exact:o200k_base"
    path.write_text('[[context.pipeline]]\nstrategy = "token_budget"\nmodel = "gpt-4o"\ntoken_budget = 5000\n')
    (budget,) = build_pipeline(load_settings(path).context)  # type: ignore[misc]
    assert budget.token_budget == 5_000
    assert budget.own_counter.key == "tokens:exact:o200k_base"


class _Together:
    """A state store whose first two calls of a round wait for each other: two workers' reports made at once."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.round()

    def round(self) -> None:
        self.waiting, self.both = 0, asyncio.Event()

    async def _meet(self) -> None:
        if not self.both.is_set():
            self.waiting += 1
            if self.waiting == 2:
                self.both.set()
            await self.both.wait()

    async def get_state(self, session_id: str) -> dict[str, object]:
        state = await self.inner.get_state(session_id)  # type: ignore[attr-defined]
        await self._meet()  # each has read before either writes
        return state  # type: ignore[no-any-return]

    async def set_state(self, session_id: str, state: dict[str, object]) -> None:
        await self._meet()
        await self.inner.set_state(session_id, state)  # type: ignore[attr-defined]

    async def update_state(self, session_id: str, patch: dict[str, object]) -> dict[str, object]:
        await self._meet()
        return await self.inner.update_state(session_id, patch)  # type: ignore[attr-defined,no-any-return]

    async def clear(self, session_id: str) -> None:
        await self.inner.clear(session_id)  # type: ignore[attr-defined]

    def reserved(self) -> _Together:
        return self


async def test_two_workers_reporting_at_once_on_one_state_store_lose_no_report() -> None:
    """Two workers report on one model at the same instant: each read the list of ratios, added its own and wrote
    the list back, so the later write dropped the other's report, the larger one half the time."""
    from ravi.agents.context.calibration import Calibration
    from ravi.agents.storage import InMemoryStateStore

    inner = InMemoryStateStore()
    together = _Together(inner.reserved())  # the corrections' place, its calls met in pairs
    a, b = Calibration(together), Calibration(together)  # type: ignore[arg-type]
    for round_ in range(6):
        together.round()
        high, low = (a, b) if round_ % 2 else (b, a)
        await asyncio.gather(  # the smaller report reads first, so it is the later to write
            low.observe("m", counted=1_000, reported=1_100),
            high.observe("m", counted=1_000, reported=2_000 + round_),
        )
        assert await Calibration(inner).factor("m") == (2_000 + round_) / 1_000, round_


async def test_the_corrections_keep_the_newest_writers_entries_and_restore_one_emptied_as_it_was_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each writer has a key of its own; a report empties the keys of writers older than the newest
    ``instances``, and a writer whose key was emptied while it was one of the newest writes it again."""
    import itertools
    import types

    from ravi.agents.context import calibration
    from ravi.agents.context.calibration import SCOPE, SEPARATOR, Calibration
    from ravi.agents.storage import InMemoryStateStore

    ticks = itertools.count(1)  # each report later than the one before, whatever the clock's resolution
    monkeypatch.setattr(calibration, "time", types.SimpleNamespace(time=lambda: float(next(ticks))))

    state = InMemoryStateStore()
    a, b, c = (Calibration(state, instances=2) for _ in range(3))
    await a.observe("m", counted=1_000, reported=3_000)
    await b.observe("m", counted=1_000, reported=1_100)
    assert await Calibration(state, instances=2).factor("m") == 3.0
    await c.observe("m", counted=1_000, reported=1_200)  # a is now older than the newest two
    stored = await state.reserved().get_state(SCOPE)
    assert stored[f"m{SEPARATOR}{a.id}"] is None and stored[f"m{SEPARATOR}{c.id}"] == {
        "ratios": [1.2],
        "at": stored[f"m{SEPARATOR}{c.id}"]["at"],  # type: ignore[index]
    }
    assert await a.factor("m") == 1.2  # pruned as it should be: not written again
    assert (await state.reserved().get_state(SCOPE))[f"m{SEPARATOR}{a.id}"] is None
    # emptied by a pruner that read before c wrote
    await state.reserved().update_state(SCOPE, {f"m{SEPARATOR}{c.id}": None})
    assert await Calibration(state, instances=2).factor("m") == 1.1
    assert await c.factor("m") == 1.2  # c writes its entry again
    assert await Calibration(state, instances=2).factor("m") == 1.2
    with pytest.raises(InvalidArgument, match="instances"):
        Calibration(state, instances=0)


async def test_a_writers_entry_is_read_only_under_its_own_model_and_only_as_a_report_gives_it() -> None:
    """Keys per writer: a model whose name holds the separator ("a\\x1fb") is not read as a writer of "a", and an
    entry that is not one (no time, ratios past the cap, not a list) corrects nothing."""
    from ravi.agents.context.calibration import SCOPE, SEPARATOR, Calibration
    from ravi.agents.storage import InMemoryStateStore

    state = InMemoryStateStore()
    other = Calibration(state)
    await other.observe(f"a{SEPARATOR}b", counted=1_000, reported=3_000)
    writer = "0" * 32
    await state.reserved().update_state(
        SCOPE,
        {
            f"a{SEPARATOR}{writer}": {"ratios": [300.0, 1.1], "at": 1},
            f"a{SEPARATOR}{'1' * 32}": {"ratios": [2.5]},
            f"a{SEPARATOR}{'2' * 32}": {"ratios": "2.5", "at": 1},
            f"a{SEPARATOR}{'3' * 32}": {"ratios": [2.5], "at": True},
            f"a{SEPARATOR}x": {"ratios": [2.5], "at": 1},
        },
    )
    assert await Calibration(state).factor("a") == 1.1
    assert await Calibration(state).factor(f"a{SEPARATOR}b") == 3.0


async def test_the_emptied_keys_of_writers_long_gone_are_dropped_and_the_newest_entries_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each process that reports leaves a key, emptied once it is no longer among the newest writers; without a
    bound, a state read by every window grows with every process that ever ran."""
    import itertools
    import types

    from ravi.agents.context import calibration
    from ravi.agents.context.calibration import DEAD_KEYS, SCOPE, SEPARATOR, Calibration
    from ravi.agents.storage import InMemoryStateStore

    ticks = itertools.count(1)
    monkeypatch.setattr(calibration, "time", types.SimpleNamespace(time=lambda: float(next(ticks))))
    state = InMemoryStateStore()
    writers = [Calibration(state, instances=2) for _ in range(DEAD_KEYS + 40)]
    for n, writer in enumerate(writers):
        await writer.observe("m", counted=1_000, reported=1_000 + n)
        assert len(await state.reserved().get_state(SCOPE)) <= DEAD_KEYS + 3
    stored = await state.reserved().get_state(SCOPE)
    newest = [f"m{SEPARATOR}{w.id}" for w in writers[-2:]]
    assert all(stored[key] is not None for key in newest)
    assert await Calibration(state, instances=2).factor("m") == (1_000 + len(writers) - 1) / 1_000


async def _no_session_reaches_the_corrections(state: object, session_id: str) -> None:
    """A report kept in ``state``; then the application's session ``session_id`` is read, written with an entry of
    the corrections' own form, and cleared: it held none of the corrections, and the correction stays the
    report's."""
    from ravi.agents.context.calibration import SEPARATOR, Calibration

    calibration = Calibration(state)  # type: ignore[arg-type]
    await calibration.observe("m", counted=1_000, reported=2_000)
    before = await state.get_state(session_id)  # type: ignore[attr-defined]
    assert not any(key.startswith("m" + SEPARATOR) for key in before)
    forged = {f"m{SEPARATOR}{'0' * 32}": {"ratios": [3.5], "at": 4e9}, "m": [3.5]}
    await state.update_state(session_id, forged)  # type: ignore[attr-defined]
    assert await Calibration(state).factor("m") == 2.0  # type: ignore[arg-type]
    await state.clear(session_id)  # type: ignore[attr-defined]
    assert await Calibration(state).factor("m") == 2.0  # type: ignore[arg-type]


async def test_no_application_session_reads_writes_or_clears_the_corrections() -> None:
    """The corrections were kept in the state of the session ``ravi.calibration``: an application session of that
    name read them, a write to it changed every window of the model, and its clear (or a forget) erased them."""
    from ravi.agents.context.calibration import SCOPE
    from ravi.agents.storage import InMemoryStateStore

    await _no_session_reaches_the_corrections(InMemoryStateStore(), SCOPE)


@given(
    session_id=st.just("ravi.calibration")
    | st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=120)
)
@settings(max_examples=50, deadline=None)
def test_no_session_id_reaches_the_corrections(session_id: str) -> None:
    """Whatever the application's session id, its state is not the corrections'."""
    from ravi.agents.storage import InMemoryStateStore

    asyncio.run(_no_session_reaches_the_corrections(InMemoryStateStore(), session_id))
