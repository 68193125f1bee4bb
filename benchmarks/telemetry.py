"""What telemetry costs a window: the engine's entry with no instrumentation at all, with tracing off (the
default: one check of a module variable), and with tracing on (spans and metrics into the SDK, exported nowhere).

Each figure is the fastest of eleven alternating rounds of 3,000 warm windows of one session (the fastest, as
timeit reports: on a shared machine the slower rounds measure the neighbours; the in-memory store, so that the
instrumentation is not hidden behind a server's round trip): a window of 1,000 stored messages under a 4,000-token
budget, and a window of 10 messages with no strategy. The decorators' own fixed cost, tracing off, is measured
apart on an entry and a pass of the strategies that do nothing (200,000 windows a round). Target: tracing off
costs under 1% of the realistic window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from _table import console, table, verdict

from ravi.agents import telemetry
from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, TokenBudgetComposedStrategy
from ravi.agents.context.pipeline import WindowRequest
from ravi.agents.demo import agentic_transcript
from ravi.kernel.messages import ChatMessage

ROUNDS, WINDOWS = 11, 3_000


async def _stored(messages: list[ChatMessage]) -> InMemoryHistoryProvider:
    history = InMemoryHistoryProvider()
    await history.append_many("bench", messages, session_id="s")
    return history


def _per_window(call: Callable[[], Awaitable[Any]]) -> float:
    async def rounds() -> float:
        started = time.perf_counter()
        for _ in range(WINDOWS):
            await call()
        return (time.perf_counter() - started) / WINDOWS * 1e6

    return asyncio.run(rounds())


def measure(pipeline: CompactionPipeline, messages: list[ChatMessage]) -> dict[str, float]:
    """Microseconds per window, each way, the median of alternating rounds."""
    request = WindowRequest(agent_id="bench", session_id="s", history=asyncio.run(_stored(messages)))
    bare = CompactionPipeline.window.__wrapped__  # type: ignore[attr-defined]
    ways: dict[str, Callable[[], Awaitable[Any]]] = {
        "no instrumentation": lambda: bare(pipeline, request),
        "tracing off": lambda: pipeline.window(request),
        "tracing on": lambda: pipeline.window(request),
    }
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    providers = {"tracer_provider": TracerProvider(), "meter_provider": MeterProvider()}
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(ROUNDS):
        for way, call in ways.items():
            if way == "tracing on":
                telemetry.enable(**providers)
            try:
                _per_window(call)  # warm
                times[way].append(_per_window(call))
            finally:
                telemetry.disable()
    return {way: min(values) for way, values in times.items()}


class _Nothing:
    """The engine's entry and its pass of the strategies, doing nothing, bare and behind the telemetry
    decorators."""

    strategies: ClassVar[list[Any]] = []

    async def bare(self, request: Any) -> Any:
        return await self.bare_pass((), None, False)

    async def decorated(self, request: Any) -> Any:
        return await self.decorated_pass((), None, False)

    async def bare_pass(self, history: Any, session: Any, explain: bool) -> Any:
        return history

    decorated_pass = telemetry.traced_pass(bare_pass)


_Nothing.decorated = telemetry.traced_window(_Nothing.decorated)  # type: ignore[method-assign]


def fixed_cost_ns(calls: int = 200_000) -> tuple[float, float]:
    """Nanoseconds per window of an entry and a pass that do nothing, bare and decorated (tracing off): the
    fastest round."""
    nothing = _Nothing()

    async def per_call(entry: Callable[..., Awaitable[Any]]) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            await entry(nothing, None)
        return (time.perf_counter() - started) / calls * 1e9

    bare, decorated = [], []
    for _ in range(ROUNDS):
        bare.append(asyncio.run(per_call(_Nothing.bare)))
        decorated.append(asyncio.run(per_call(_Nothing.decorated)))
    return min(bare), min(decorated)


def main() -> None:
    bare_ns, decorated_ns = fixed_cost_ns()  # first, before the windows fill the heap (its figures drift after)
    transcript = list(agentic_transcript(1_000, seed=3))
    cases = [
        (
            "1,000 messages, 4,000-token budget",
            CompactionPipeline([TokenBudgetComposedStrategy([], 4_000)]),
            transcript,
        ),
        ("10 messages, no strategy", CompactionPipeline([]), [ChatMessage.user(f"m{i}") for i in range(10)]),
    ]
    rows, overheads, rows_base = [], [], []
    for label, pipeline, messages in cases:
        figures = measure(pipeline, messages)
        base = figures["no instrumentation"]
        off = figures["tracing off"] - base
        overheads.append(off / base)
        rows_base.append(base)
        rows.append(
            (
                label,
                f"{base:.1f}",
                f"{figures['tracing off']:.1f} ({off:+.2f})",
                f"{figures['tracing on']:.1f} ({figures['tracing on'] - base:+.1f})",
            )
        )
    fixed = (decorated_ns - bare_ns) / 1000
    rows.append(
        (
            "an entry and a pass that do nothing",
            f"{bare_ns / 1000:.3f}",
            f"{decorated_ns / 1000:.3f} ({fixed:+.3f})",
            "-",
        )
    )
    share = fixed / rows_base[0]
    table(
        f"Telemetry per window, µs (fastest of {ROUNDS} alternating rounds of {WINDOWS:,} warm windows, in memory)",
        ["window", "no instrumentation", "tracing off (difference)", "tracing on (difference)"],
        rows,
        note=f"tracing off costs the entry {fixed * 1000:+.0f} ns a window, {share:.2%} of the 1,000-message window: "
        f"{verdict(share < 0.01)} (target: under 1%); the window rows' differences are within this machine's noise",
    )
    console.print()


if __name__ == "__main__":
    main()
