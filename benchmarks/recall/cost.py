"""What relevant recall costs: warm windows beside plain ones, and the offline embedding model's size and speed.

* Warm windows of a 10,000-message agent session in the in-memory store (median of 50),
  ``[ToolResultCompactionStrategy(), RelevantRecallStrategy(budget)]`` beside the same pipeline with a plain
  token budget, at 16,000 and 100,000 tokens; recall by words only and by words and meaning, with each
  preference (``prefer="relevance"``, the default, and ``prefer="cache"``). Three cases: a new
  user message before each window (a new request: "follow-up question 7", whose words the session rarely holds),
  one that asks about the past ("what happened with the deploy of service 7?", whose words are common in the
  session: recall ranks many units and takes most of the budget), and a tool call and its result before each
  window (an agent's tool loop: the request, the newest user turn, stays the same). Target: a warm recall window
  within 3x of a plain warm window.
* The same warm windows on Postgres (a local server, or ``RAVI_BENCH_POSTGRES_DSN``), words only, median of 30,
  with the number of messages the windowed read returns.
* What recall keeps in memory for that session: the growth of the process's traced memory over 300 new
  requests' windows at 100,000 tokens (words only), after the first window.
* The ``embeddings`` extra: what it adds to an install of ``ravi-agents`` (the files of the distributions it
  brings that ``ravi-agents`` alone does not; of a workspace package installed editable, its ``src`` tree), and
  how long it takes to embed 1,000 messages of that session
  (median of 5, the model loaded). Targets: at most 50 MB, under a second.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _table import console, table, verdict
from assembly import forget_counts, warm_runs
from postgres import server

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.demo import agentic_transcript
from ravi.agents.embeddings import offline_embedding_client
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.search import message_text

SIZE = 10_000
BUDGETS = (16_000, 100_000)


async def tool_runs(context: AgentContext, n: int) -> list[float]:
    """The times of ``n`` windows, each after a tool call and its result (the request unchanged)."""
    await context.add_message("s", ChatMessage.user("follow-up question on the failing deploy"))
    await context.get_prompt_window("s")
    times = []
    for i in range(n):
        call = ToolCallBlock(id=f"loop-{i}", name="read_log", arguments={"service": "deploy", "page": i})
        await context.add_message("s", ChatMessage.assistant(tool_calls=[call]))
        await context.add_message("s", ChatMessage.tool(f"loop-{i}", f"page {i} of the deploy log: 40 lines, no error"))
        start = time.perf_counter()
        await context.get_prompt_window("s")
        times.append(time.perf_counter() - start)
    return times


QUESTION = "what happened with the deploy of service {i}?"
"""A new request about the past: its words (deploy, service) are common in the session, so recall ranks many units
and takes most of the budget (the costly case)."""


def warm_ms(
    pipeline: list[object],
    messages: list,  # type: ignore[type-arg]
    *,
    loop: bool = False,
    request: str = "follow-up question {i}",
) -> float:
    # what an earlier configuration's windows left in the messages' memos is wiped first; the store then counts
    # each message as it is appended, as every store does (Postgres and Redis read the count back with the row)
    forget_counts(messages)
    history = InMemoryHistoryProvider()
    asyncio.run(history.append_many("agent", messages, session_id="s"))
    context = AgentContext(ContextConfig(history, pipeline))  # type: ignore[arg-type]

    async def run() -> float:
        await context.get_prompt_window("s")  # the first window indexes the session
        times = await (tool_runs(context, 50) if loop else warm_runs(context, 50, request))
        return statistics.median(times) * 1000

    return asyncio.run(run())


def windows() -> dict[str, float]:
    """The warm windows' table; returns the worst ratio to plain of each preference."""
    messages = agentic_transcript(SIZE)
    rows, worst = [], {"relevance": 0.0, "cache": 0.0}
    cases = (
        ("new request", False, "follow-up question {i}"),
        ("new request about the past", False, QUESTION),
        ("tool loop", True, ""),
    )
    for case, loop, request in cases:
        for budget in BUDGETS:
            plain = warm_ms(
                [ToolResultCompactionStrategy(), TokenBudgetComposedStrategy([], budget)],
                messages,
                loop=loop,
                request=request,
            )
            row = [case, f"{budget:,}", f"{plain:.2f}"]
            for prefer in worst:
                for meaning in (None, "auto"):
                    strategy = RelevantRecallStrategy(budget, meaning=meaning, prefer=prefer)  # type: ignore[arg-type]
                    took = warm_ms([ToolResultCompactionStrategy(), strategy], messages, loop=loop, request=request)
                    worst[prefer] = max(worst[prefer], took / plain)
                    row.append(f"{took:.2f} ({took / plain:.1f}x)")
            rows.append(tuple(row))
    table(
        f"Warm windows of a {SIZE:,}-message agent session in memory (ms, median of 50; x: times plain)",
        [
            "each window after",
            "budget",
            "plain",
            "relevance, words",
            "relevance, words + meaning",
            "cache, words",
            "cache, words + meaning",
        ],
        rows,
    )
    return worst


async def _postgres_ms(dsn: str, pipeline: list[object], *, loop: bool) -> tuple[float, float]:
    """The median time of 30 warm windows on Postgres, and the median number of messages each read returned."""
    from ravi.capabilities.postgres import PostgresHistoryProvider

    provider = PostgresHistoryProvider(dsn, schema=f"bench_{uuid.uuid4().hex[:8]}")
    try:
        await provider.append_many("agent", agentic_transcript(SIZE), session_id="s")
        read, reads = provider.read_window, []

        async def counted(*args: object, **kwargs: object) -> object:
            window = await read(*args, **kwargs)  # type: ignore[arg-type]
            reads.append(len(window.messages))
            return window

        provider.read_window = counted  # type: ignore[method-assign]
        context = AgentContext(ContextConfig(provider, pipeline))  # type: ignore[arg-type]
        await context.add_message("s", ChatMessage.user("follow-up question on the failing deploy"))
        await context.get_prompt_window("s")  # the first window indexes the session
        reads.clear()
        times = await (tool_runs(context, 30) if loop else warm_runs(context, 30, QUESTION))
        return statistics.median(times) * 1000, statistics.median(reads or [0])
    finally:
        await provider.aclose()


def postgres_windows() -> None:
    """The warm windows' table on Postgres, words only."""
    rows = []
    with server() as dsn:
        for loop in (False, True):
            for budget in BUDGETS:
                pipelines = {
                    "plain": [ToolResultCompactionStrategy(), TokenBudgetComposedStrategy([], budget)],
                    "relevance": [ToolResultCompactionStrategy(), RelevantRecallStrategy(budget, meaning=None)],
                    "cache": [
                        ToolResultCompactionStrategy(),
                        RelevantRecallStrategy(budget, meaning=None, prefer="cache"),
                    ],
                }
                figures = {name: asyncio.run(_postgres_ms(dsn, p, loop=loop)) for name, p in pipelines.items()}
                plain = figures["plain"][0]
                rows.append(
                    (
                        "tool loop" if loop else "new request",
                        f"{budget:,}",
                        *(
                            f"{ms:.1f} ({ms / plain:.1f}x), read {read:,.0f}"
                            for ms, read in (figures[n] for n in pipelines)
                        ),
                    )
                )
    table(
        f"Warm windows of a {SIZE:,}-message agent session on Postgres, words only (ms, median of 30; x: times "
        "plain; read: messages the windowed read returned)",
        ["each window after", "budget", "plain", "relevance", "cache"],
        rows,
    )


def kept_memory(windows: int = 300) -> float:
    """The MB the process's traced memory grew by over ``windows`` new requests' recall windows."""
    import gc
    import tracemalloc

    history = InMemoryHistoryProvider()
    asyncio.run(history.append_many("agent", agentic_transcript(SIZE), session_id="s"))
    strategy = RelevantRecallStrategy(BUDGETS[-1], meaning=None)
    context = AgentContext(ContextConfig(history, [ToolResultCompactionStrategy(), strategy]))

    async def run() -> float:
        await context.get_prompt_window("s")
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            await warm_runs(context, windows)
            gc.collect()
            return (tracemalloc.get_traced_memory()[0] - start) / 1e6
        finally:
            tracemalloc.stop()

    grew = asyncio.run(run())
    table(
        f"What recall keeps for a {SIZE:,}-message session in memory (traced memory, {windows} new requests' "
        f"windows at {BUDGETS[-1]:,} tokens, words only)",
        ["grew by"],
        [(f"{grew:.1f} MB",)],
    )
    return grew


def _closure(name: str, extras: tuple[str, ...] = ()) -> set[str]:
    """The installed distributions ``name`` (with ``extras``) needs, itself included (markers evaluated)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [(name, extras)]
    while todo:
        dist_name, wanted = todo.pop()
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen and not wanted:
            continue
        seen.add(key)
        for line in dist.requires or []:
            req = Requirement(line)
            environments = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                todo.append((req.name, tuple(req.extras)))
    return seen


def _size_mb(names: set[str]) -> float:
    """The size of the distributions' installed files; for one installed editable from this workspace (a
    ``make setup`` install of ``ravi-embeddings-wordllama``), the files its wheel holds: its ``src`` tree."""
    total = 0
    for name in names:
        dist = metadata.distribution(name)
        source = _editable_source(dist)
        files = (
            [p for p in source.rglob("*") if "__pycache__" not in p.parts]
            if source is not None
            else [Path(str(dist.locate_file(file))) for file in dist.files or []]
        )
        total += sum(path.stat().st_size for path in files if path.is_file())
    return total / 1e6


def _editable_source(dist: metadata.Distribution) -> Path | None:
    import json
    from urllib.parse import unquote, urlparse

    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    if not direct.get("dir_info", {}).get("editable"):
        return None
    source = Path(unquote(urlparse(direct["url"]).path)) / "src"
    return source if source.is_dir() else None


def embeddings() -> tuple[float, float]:
    added = _closure("ravi-agents", ("embeddings",)) - _closure("ravi-agents")
    size = _size_mb(added)
    client = offline_embedding_client()
    if client is None:
        console.print("the embeddings extra is not installed: pip install 'ravi-agents[embeddings]'")
        return size, float("nan")
    texts = [message_text(m) for m in agentic_transcript(1_000)][:1_000]
    texts = [t[:2_000] for t in texts]
    client.embed_now(texts[:10])
    times = []
    for _ in range(5):
        start = time.perf_counter()
        client.embed_now(texts)
        times.append(time.perf_counter() - start)
    took = statistics.median(times)
    biggest = sorted(((round(_size_mb({n}), 1), n) for n in added), reverse=True)
    table(
        "The offline embedding model (pip install 'ravi-agents\\[embeddings]')",
        ["added to an install of ravi-agents", "embed 1,000 agent messages"],
        [(f"{size:.1f} MB ({', '.join(f'{n} {s}' for s, n in biggest[:5])}, ...)", f"{took * 1000:.0f} ms")],
    )
    return size, took


def main() -> None:
    worst = windows()
    postgres_windows()
    kept_memory()
    size, took = embeddings()
    for prefer, ratio in worst.items():
        console.print(
            f'target: a warm recall window (prefer="{prefer}") within 3x of a plain warm window: worst {ratio:.1f}x, '
            f"{verdict(ratio <= 3)}"
        )
    console.print(f"target: the embedding extra adds <= 50 MB: {size:.1f} MB, {verdict(size <= 50)}")
    console.print(f"target: 1,000 messages embedded in under a second: {took:.2f} s, {verdict(took < 1)}\n")


if __name__ == "__main__":
    main()
