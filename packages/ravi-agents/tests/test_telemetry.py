"""Telemetry: spans and metrics of window assembly and store calls, read back with the OpenTelemetry SDK's
in-memory exporters; off (and OpenTelemetry not even imported) until enabled; a failing summariser logged once."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ravi.agents import telemetry
from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    RelevantRecallStrategy,
    SlidingWindowCompaction,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
)
from ravi.agents.settings import build_store, load_settings
from ravi.kernel.cancel import CancelToken
from ravi.kernel.messages import ChatMessage

sdk = pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


class Collected:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def total(self, name: str, **attributes: str) -> float:
        return sum(p.value for p in self.points(name) if all(p.attributes.get(k) == v for k, v in attributes.items()))


@pytest.fixture
def collected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Collected]:
    for name in [n for n in os.environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    out = Collected()
    telemetry.enable(tracer_provider=out.tracer_provider, meter_provider=out.meter_provider)
    try:
        yield out
    finally:
        telemetry.disable()


def turns(n: int, size: int = 200) -> list[ChatMessage]:
    out = [ChatMessage.system("rules")]
    for i in range(n):
        out += [ChatMessage.user(f"question {i} " + "x" * size), ChatMessage.assistant(f"answer {i} " + "y" * size)]
    return out


async def test_a_window_is_a_span_with_its_counts_and_metrics(collected: Collected) -> None:
    history = build_store("history", load_settings())  # built from settings while enabled: its calls are traced
    context = AgentContext(
        ContextConfig(history, [TokenBudgetComposedStrategy([], token_budget=400)]), agent_id="support"
    )
    messages = turns(10)
    await context.add_messages("s1", messages)
    first = await context.get_prompt_window("s1")
    await context.add_messages("s1", [ChatMessage.user("one more")])
    await context.get_prompt_window("s1")

    windows = [s for s in collected.spans.get_finished_spans() if s.name == "assemble_window support"]
    assert len(windows) == 2
    attributes = windows[0].attributes
    assert attributes["gen_ai.operation.name"] == "assemble_window"
    assert attributes["gen_ai.agent.id"] == "support" and attributes["gen_ai.conversation.id"] == "s1"
    assert attributes["ravi.window.messages"] == len(first)
    assert 0 < attributes["gen_ai.usage.input_tokens"] <= 400
    assert attributes["ravi.window.dropped"] == attributes["ravi.window.source_messages"] - len(first) > 0

    stores = [s for s in collected.spans.get_finished_spans() if s.attributes.get("db.collection.name") == "history"]
    operations = {s.attributes["db.operation.name"] for s in stores}
    assert "append_many" in operations
    assert {s.attributes["db.system.name"] for s in stores} == {"ravi.memory"}
    assert all(s.name == f"{s.attributes['db.operation.name']} history" for s in stores)

    [tokens] = collected.points("ravi.window.tokens")
    assert tokens.count == 2 and tokens.sum == sum(w.attributes["gen_ai.usage.input_tokens"] for w in windows)
    assert collected.total("ravi.window.messages.removed", **{"ravi.removal": "dropped"}) > 0
    assert sum(p.count for p in collected.points("db.client.operation.duration")) == len(stores)


async def test_the_prefix_cache_metric_says_whether_the_last_window_is_kept(collected: Collected) -> None:
    context = AgentContext(ContextConfig(build_store("history", load_settings()), SlidingWindowCompaction(100)))
    await context.add_messages("s", turns(3))
    await context.get_prompt_window("s")
    await context.add_messages("s", [ChatMessage.user("next")])
    await context.get_prompt_window("s")  # the whole previous window, and one more message: a hit
    context.config.pipeline.strategies[:] = [SlidingWindowCompaction(2)]
    await context.get_prompt_window("s")  # the window slid: a miss
    assert collected.total("ravi.window.prefix_cache", **{"ravi.prefix_cache.result": "hit"}) == 1
    assert collected.total("ravi.window.prefix_cache", **{"ravi.prefix_cache.result": "miss"}) == 1


async def test_the_prefix_cache_metric_takes_no_window_of_a_session_cleared_elsewhere_for_the_last(
    collected: Collected,
) -> None:
    """Another process cleared the session and wrote it again under the same ids: the window of the removed
    messages the provider cached is not this window's prefix, whatever the ids say (it was counted a hit)."""
    store = build_store("history", load_settings())
    mine = AgentContext(ContextConfig(store, SlidingWindowCompaction(100)))
    theirs = AgentContext(ContextConfig(store, SlidingWindowCompaction(100)))
    messages = [ChatMessage.user(f"turn {i}", id=f"m-{i}") for i in range(3)]
    await theirs.add_messages("s", messages)
    await mine.get_prompt_window("s")
    await theirs.clear("s")
    await theirs.add_messages("s", [ChatMessage.user(f"new turn {i}", id=f"m-{i}") for i in range(3)])
    await mine.get_prompt_window("s")
    assert collected.total("ravi.window.prefix_cache", **{"ravi.prefix_cache.result": "hit"}) == 0
    # no window before it in this generation: like a session's first window, neither a hit nor a miss
    assert collected.total("ravi.window.prefix_cache", **{"ravi.prefix_cache.result": "miss"}) == 0


async def test_summarised_and_recalled_messages_are_counted(collected: Collected) -> None:
    summarising = AgentContext(
        ContextConfig(build_store("history", load_settings()), SummarizationCompaction(None, 300, min_old_tokens=0))
    )
    await summarising.add_messages("s", turns(12))
    await summarising.get_prompt_window("s")
    assert collected.total("ravi.window.messages.removed", **{"ravi.removal": "summarised"}) > 0

    recalling = AgentContext(ContextConfig(build_store("history", load_settings()), RelevantRecallStrategy(600)))
    messages = [ChatMessage.system("rules"), ChatMessage.user("the zanzibar code is 4411")]
    messages += [*turns(15)[1:], ChatMessage.user("what was the zanzibar code?")]
    await recalling.add_messages("s", messages)
    window = await recalling.get_prompt_window("s")
    assert messages[1] in window  # brought back from before the recent turns
    assert collected.total("ravi.window.recalled") >= 1


async def test_a_failing_store_call_is_a_span_with_its_error(collected: Collected) -> None:
    history = build_store("history", load_settings())
    with pytest.raises(Exception, match="agent_id"):
        await history.append("", ChatMessage.user("x"), session_id="s")
    [span] = collected.spans.get_finished_spans()  # append, not also the append_many it calls
    assert span.name == "append history"
    assert span.attributes["error.type"] == "InvalidArgument"
    [point] = collected.points("db.client.operation.duration")
    assert point.attributes["error.type"] == "InvalidArgument"


async def test_off_by_default_it_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert not telemetry.enabled()
    out = Collected()
    history = build_store("history", load_settings())
    assert "append" not in vars(history)  # not wrapped
    await AgentContext(ContextConfig(history)).add_messages("s", turns(2))
    assert out.spans.get_finished_spans() == ()


def test_opentelemetry_is_not_imported_unless_enabled(tmp_path: Path) -> None:
    """Free when off: the engine and the stores run without importing OpenTelemetry at all."""
    script = (
        "import asyncio, sys\n"
        "from ravi.agents.context import AgentContext, ChatMessage, ContextConfig\n"
        "async def main():\n"
        "    async with ContextConfig.from_settings() as config:\n"
        "        context = AgentContext(config)\n"
        "        await context.add_messages('s', [ChatMessage.user('hi')])\n"
        "        await context.get_prompt_window('s')\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_enabling_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from ravi.kernel.errors import ConfigurationError

    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    with pytest.raises(ConfigurationError, match=r"pip install 'ravi-agents\[otel\]'"):
        telemetry.enable()
    assert not telemetry.enabled()


class Unreachable:
    """A model whose endpoint is down."""

    calls = 0

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None, cancel: CancelToken | None = None
    ) -> str:
        Unreachable.calls += 1
        raise ConnectionError("connection refused: llm.internal:443")


async def test_a_summariser_that_cannot_reach_its_model_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """It used to emit only a ``summarization_failed`` event: nothing logged at any level, no summary."""
    from ravi.agents.context import InMemoryHistoryProvider

    context = AgentContext(
        ContextConfig(InMemoryHistoryProvider(), SummarizationCompaction(Unreachable(), 300, min_old_tokens=0))
    )
    await context.add_messages("s", turns(12))
    with caplog.at_level(logging.WARNING, logger="ravi"):
        for _ in range(3):
            await context.add_messages("s", [ChatMessage.user("more")])
            await context.get_prompt_window("s")
    assert Unreachable.calls >= 3
    failures = [r for r in caplog.records if "connection refused: llm.internal:443" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].levelno == logging.WARNING and "summariser" in failures[0].getMessage()
