"""What telemetry costs a window: the engine's entry with no instrumentation at all, with tracing off (the
default: one check of a module variable), and with tracing on (spans and metrics into the SDK, exported nowhere).

Each figure is the fastest of eleven alternating rounds of 3,000 warm windows of one session (the fastest, as
timeit reports: on a shared machine the slower rounds measure the neighbours; the in-memory store, so that the
instrumentation is not hidden behind a server's round trip): a window of 1,000 stored messages under a 4,000-token
budget, and a window of 10 messages with no strategy. The entry's own fixed cost, tracing off, is measured apart
on an entry that does nothing (200,000 calls a round). Target: tracing off costs under 1% of the realistic window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from _table import console, table, verdict

from ravi.agents import telemetry
from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, TokenBudgetComposedStrategy
from ravi.agents.demo import agentic_transcript
from ravi.kernel.messages import ChatMessage

ROUNDS, WINDOWS = 11, 3_000


async def _session(pipeline: CompactionPipeline, messages: list[ChatMessage]) -> tuple[Any, Any]:
    history = InMemoryHistoryProvider()
    await history.append_many("bench", messages, session_id="s")
    return history, pipeline.session("bench", "s", history=history)


def _per_window(call: Callable[[], Awaitable[Any]]) -> float:
    async def rounds() -> float:
        started = time.perf_counter()
        for _ in range(WINDOWS):
            await call()
        return (time.perf_counter() - started) / WINDOWS * 1e6

    return asyncio.run(rounds())


def measure(pipeline: CompactionPipeline, messages: list[ChatMessage]) -> dict[str, float]:
    """Microseconds per window, each way, the median of alternating rounds."""
    history, session = asyncio.run(_session(pipeline, messages))
    bare = CompactionPipeline.assemble.__wrapped__  # type: ignore[attr-defined]
    ways: dict[str, Callable[[], Awaitable[Any]]] = {
        "no instrumentation": lambda: bare(pipeline, history, session),
        "tracing off": lambda: pipeline.assemble(history, session),
        "tracing on": lambda: pipeline.assemble(history, session),
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
    """An engine entry that does nothing, bare and behind the telemetry decorator."""

    strategies: ClassVar[list[Any]] = []

    async def bare(self, source: Any, session: Any = None) -> Any:
        return source

    decorated = telemetry.window_assembly(bare)


def fixed_cost_ns(calls: int = 200_000) -> tuple[float, float]:
    """Nanoseconds per call of the entry that does nothing, bare and decorated (tracing off): fastest round."""
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
    bare_ns, decorated_ns = fixed_cost_ns()
    fixed = (decorated_ns - bare_ns) / 1000
    rows.append(
        ("an entry that does nothing", f"{bare_ns / 1000:.3f}", f"{decorated_ns / 1000:.3f} ({fixed:+.3f})", "-")
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
