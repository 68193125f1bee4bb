"""Windows read from the newest part of a session: the cost of a window follows the window, not the
session.

* In memory, the pipeline ``[ToolResultCompactionStrategy(), TokenBudgetComposedStrategy([], 100_000)]``
  through ``AgentContext.get_prompt_window``. Warm: append one message, assemble again. Cold: a fresh context and
  messages without cached counts. References, measured here: a plain-Python suffix over cached counts (the least
  any window costs: walk back summing counts, slice) and LangChain's ``trim_messages``.
* Postgres and Redis: a fresh worker's first window (a new provider, empty caches) of a 1,000- and a
  100,000-message session, beside one round trip that reads the newest rows the window needs and parses them.
* Memory: what a provider holds after serving the first window of 1,000 sessions of 10,000 messages each (one
  session written, then copied on the server; ``RAVI_BENCH_MEMORY=200x2000`` for a smaller run).

Targets: warm flat in the session's length and within 20x of the suffix at each size, >= 100x faster than
trim_messages at 100,000; cold at 100,000 faster than trim_messages at 10,000; a fresh worker within 2x of one
read of the newest rows and within 2x between 1,000 and 100,000 messages.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from _table import console, median_ms, table, verdict
from assembly import forget_counts, to_langchain, warm_runs
from langchain_core.messages import trim_messages

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.demo import agentic_transcript
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistorySearcher, HybridSearcher

BUDGET = 100_000
SIZES = (1_000, 10_000, 100_000)


def pipeline() -> list[Any]:
    return [ToolResultCompactionStrategy(), TokenBudgetComposedStrategy([], token_budget=BUDGET)]


def suffix(messages: list[ChatMessage], counts: list[int]) -> list[ChatMessage]:
    """The reference: the newest messages whose cached counts fit the budget."""
    total, i = 0, len(counts)
    while i > 0 and total + counts[i - 1] <= BUDGET:
        i -= 1
        total += counts[i]
    return messages[i:]


def chart_windows(figures: dict[int, tuple[float, float, float, float]]) -> None:
    from _charts import figure, save

    fig, ax = figure("Window time against session length (100k-token budget)")
    sizes = sorted(figures)
    for index, label, style in ((1, "Ravi, warm", "o-"), (0, "Ravi, cold", "s--"), (3, "trim_messages", "^-"),
                                (2, "plain-Python suffix (floor)", "x:")):  # fmt: skip
        ax.plot(sizes, [figures[s][index] for s in sizes], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("messages in the session")
    ax.set_ylabel("ms per window")
    ax.legend()
    save(fig, "window-time")


async def warm(context: AgentContext, n: int = 100) -> float:
    await context.get_prompt_window("s")
    return statistics.median(await warm_runs(context, n)) * 1000


def in_memory() -> dict[str, float]:
    rows, figures = [], {}
    for size in SIZES:
        messages = agentic_transcript(size)
        history = InMemoryHistoryProvider()
        asyncio.run(history.append_many("agent", messages, session_id="s"))
        forget_counts(messages)
        context = AgentContext(ContextConfig(history, pipeline()))
        start = time.perf_counter()
        window = asyncio.run(context.get_prompt_window("s"))
        cold = (time.perf_counter() - start) * 1000
        warm_ms = asyncio.run(warm(context))
        counts = [DEFAULT_COUNTER.count_message(m) for m in messages]
        reference = median_ms(lambda messages=messages, counts=counts: suffix(messages, counts), repeat=50)
        lc = to_langchain(messages)
        trim = median_ms(
            lambda lc=lc: trim_messages(
                lc, max_tokens=BUDGET, token_counter="approximate", strategy="last", include_system=True
            ),
            repeat=3,
        )
        figures[size] = (cold, warm_ms, reference, trim)
        rows.append(
            (
                f"{size:,}",
                len(window),
                f"{cold:.1f}",
                f"{warm_ms:.3f}",
                f"{reference:.3f}",
                f"{warm_ms / reference:.0f}x",
                f"{trim:.1f}",
                f"{trim / warm_ms:.0f}x",
            )
        )
    table(
        "In memory (ms): get_prompt_window, cold and warm, beside a plain suffix over cached counts and trim_messages",
        ["messages", "window", "cold", "warm", "suffix", "warm / suffix", "trim_messages", "trim / warm"],
        rows,
    )
    chart_windows(figures)
    flat = figures[100_000][1] / figures[1_000][1]
    console.print(
        f"target: warm within 20x of the suffix at each size: "
        f"{', '.join(f'{f[1] / f[2]:.0f}x' for f in figures.values())}, "
        f"{verdict(all(f[1] / f[2] <= 20 for f in figures.values()))}"
    )
    console.print(f"target: warm flat in the session's length: 100,000 / 1,000 = {flat:.1f}x, {verdict(flat <= 2)}")
    speed = figures[100_000][3] / figures[100_000][1]
    console.print(f"target: >= 100x faster than trim_messages at 100,000: {speed:.0f}x, {verdict(speed >= 100)}")
    cold, trim10 = figures[100_000][0], figures[10_000][3]
    console.print(
        f"target: cold at 100,000 ({cold:.0f} ms) faster than trim_messages at 10,000 ({trim10:.0f} ms): "
        f"{verdict(cold < trim10)}\n"
    )
    return {}


class WholeReads:
    """A provider seen without its windowed read: every window reads the whole session (the reference)."""

    def __init__(self, provider: InMemoryHistoryProvider) -> None:
        self.provider = provider

    def __getattr__(self, name: str) -> Any:
        if name == "read_window":
            raise AttributeError(name)
        return getattr(self.provider, name)


def summarising() -> None:
    """A summarising pipeline's warm window: read through ``read_window`` (the summary found by key) beside the
    same pipeline reading the whole session every window; and how many summaries the model wrote."""
    from ravi.agents.context import SummarizationCompaction
    from ravi.agents.llm.extractive import ExtractiveSummarizer

    class Counting(ExtractiveSummarizer):
        calls = 0

        async def complete(self, *args: Any, **kwargs: Any) -> str:
            Counting.calls += 1
            return await super().complete(*args, **kwargs)

    rows = []
    for size in SIZES[1:]:
        figures = []
        for whole in (False, True):
            history = InMemoryHistoryProvider()
            asyncio.run(history.append_many("agent", agentic_transcript(size), session_id="s"))
            Counting.calls = 0
            summarizer = SummarizationCompaction(Counting(), recent_token_budget=BUDGET // 2, min_old_tokens=0)
            strategy = TokenBudgetComposedStrategy([summarizer], token_budget=BUDGET)
            provider: Any = WholeReads(history) if whole else history
            context = AgentContext(ContextConfig(provider, [strategy]))
            figures.append((asyncio.run(warm(context, 50)), Counting.calls))
        (windowed, calls), (whole_ms, whole_calls) = figures
        rows.append(
            (f"{size:,}", f"{windowed:.2f}", f"{whole_ms:.1f}", f"{whole_ms / windowed:.0f}x", calls, whole_calls)
        )
    table(
        "Summarising pipeline (ms), 50 warm windows: the newest part and the summary by key, beside whole reads",
        ["messages", "windowed", "whole read", "whole / windowed", "summaries written", "(whole)"],
        rows,
    )


def record_reads(provider: Any) -> list[int]:
    """How many rows each windowed read of ``provider`` returns, in order."""
    sizes: list[int] = []
    read = provider.read_window

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        view = await read(*args, **kwargs)
        sizes.append(len(view.messages))
        return view

    provider.read_window = recorded
    return sizes


async def first_window(make: Callable[[], Any], strategies: Callable[[], list[Any]]) -> tuple[float, int, int, int]:
    """A fresh worker's first window of session ``s`` (ms), its size, and the rows of the read it was made from
    and how many reads it took."""
    provider = make()  # a new worker: empty caches
    await provider.count_messages("agent", session_id="warmup")  # the pool is up, as in a running worker
    context = AgentContext(ContextConfig(provider, strategies()))
    views = record_reads(provider)
    start = time.perf_counter()
    window = await context.get_prompt_window("s")
    elapsed = (time.perf_counter() - start) * 1000
    await provider.close()
    return elapsed, len(window), views[-1] if views else 0, len(views)


def recall_pipeline() -> list[Any]:
    return [ToolResultCompactionStrategy(), RelevantRecallStrategy(BUDGET)]


async def fresh_worker(
    make: Callable[[], Any],
    newest: Callable[[Any, int], Any],
    label: str,
    settle: Callable[[Any], Any] | None = None,
) -> None:
    """``settle(writer)``, when given, runs after the session is written (and indexed) and before anything is
    timed: the state a server reaches on its own soon after a bulk write (Postgres: autovacuum's VACUUM ANALYZE),
    so the figures do not depend on when background work happens to run."""
    rows, firsts, recalls, indexing = [], {}, {}, {}
    searches = isinstance(make(), HistorySearcher)
    for size in (1_000, 100_000):
        messages = agentic_transcript(size)
        writer = make()
        for i in range(0, size, 1_000):
            await writer.append_many("agent", messages[i : i + 1_000], session_id="s")
        # a fresh worker does not hold the session: 100,000 live messages would make every garbage collection
        # during the timed windows walk them
        del messages
        gc.collect()
        timings, reference, recall = [], [], []
        if searches:  # the session's first search indexes it, once for every worker (an agent's windows search
            # every turn, so a live session is indexed as it grows): its terms, and the embeddings recall's
            # default meaning ranking keeps in the store
            start = time.perf_counter()
            meaning = RelevantRecallStrategy(BUDGET).meaning
            if isinstance(writer, HybridSearcher) and meaning is not None and meaning.client is not None:
                await writer.search_hybrid(
                    "agent", session_id="s", query="index", before=0, limit=1, embedder=meaning.client,
                    model=meaning.model,
                )  # fmt: skip
            else:
                await writer.search_units("agent", session_id="s", query="index", before=0, limit=1)
            indexing[size] = time.perf_counter() - start
        if settle is not None:
            await settle(writer)
        for _ in range(5):
            elapsed, window, read, reads = await first_window(make, pipeline)
            timings.append(elapsed)
            provider = make()
            await provider.count_messages("agent", session_id="warmup")
            start = time.perf_counter()
            await newest(provider, read)
            reference.append((time.perf_counter() - start) * 1000)
            await provider.close()
            if searches:
                recall.append((await first_window(make, recall_pipeline))[0])
        first, ref = statistics.median(timings), statistics.median(reference)
        firsts[size] = (first, ref)
        row = [f"{size:,}", window, f"{read} in {reads}", f"{first:.1f}", f"{ref:.1f}", f"{first / ref:.1f}x"]
        if searches:
            recalls[size] = statistics.median(recall)
            row += [f"{recalls[size]:.1f}", f"{recalls[size] / first:.1f}x"]
        rows.append(tuple(row))
        await writer.clear("agent", session_id="s")
        await writer.close()
    headers = ["messages", "window", "rows in reads", "first window", "newest rows", "ratio"]
    if searches:
        headers += ["first recall window", "recall / plain"]
    table(f"{label}: a fresh worker's first window (ms) beside one read of the newest rows it needs", headers, rows)
    ratios = [f / r for f, r in firsts.values()]
    flat = firsts[100_000][0] / firsts[1_000][0]
    console.print(
        f"target: within 2x of reading the newest rows: {', '.join(f'{r:.1f}x' for r in ratios)}, "
        f"{verdict(all(r <= 2 for r in ratios))}"
    )
    console.print(f"target: flat, 100,000 / 1,000 within 2x: {flat:.1f}x, {verdict(flat <= 2)}")
    if searches:
        # relevant recall ([ToolResultCompactionStrategy(), RelevantRecallStrategy(100_000)]) asks the store's
        # search for the older units: its first window should cost about what the plain one costs
        worst = max(recalls[size] / firsts[size][0] for size in recalls)
        console.print(f"target: a first recall window within 2x of a plain one: {worst:.1f}x, {verdict(worst <= 2)}")
        console.print(
            "the first search of a session written without one indexes it once, for every worker: "
            + ", ".join(f"{seconds:.1f} s at {size:,} messages" for size, seconds in indexing.items())
        )


def memory_scale() -> tuple[int, int]:
    """Sessions and messages per session of the memory figure: ``RAVI_BENCH_MEMORY`` (``"200x2000"``), else the
    target's 1,000 sessions of 10,000 messages."""
    sessions, size = os.environ.get("RAVI_BENCH_MEMORY", "1000x10000").lower().split("x")
    return int(sessions), int(size)


def chat_session(size: int) -> list[ChatMessage]:
    """A chat of ``size`` messages of about 60 stored tokens, a system message first."""
    out = [ChatMessage.system("You are a helpful assistant. Answer briefly.")]
    for i in range(1, size):
        text = f"turn {i}: " + "lorem ipsum dolor sit amet " * 8
        out.append(ChatMessage.user(text) if i % 2 else ChatMessage.assistant(text))
    return out


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - Linux only


async def provider_memory(make: Callable[[], Any], clone: Callable[[Any, int], Any], label: str) -> None:
    """The memory of a provider that has served the first window of every session, and the growth of the
    process's resident memory while it did (one session is written, then copied on the server)."""
    sessions, size = memory_scale()
    writer = make()
    await writer.append_many("agent", chat_session(size), session_id="m0")
    start = time.perf_counter()
    await clone(writer, sessions)
    loaded = time.perf_counter() - start
    provider = make()
    await provider.count_messages("agent", session_id="m0")  # the pool is up
    gc.collect()
    rss = rss_mib()
    start = time.perf_counter()
    for s in range(sessions):
        await provider.read_window("agent", session_id=f"m{s}", tokens=BUDGET * 3 // 2)
    served = time.perf_counter() - start
    gc.collect()
    grown = rss_mib() - rss
    kept = list(provider._windows.values())
    held = sum(len(w.messages) for w in kept)
    console.print(
        f"{label}: {sessions:,} sessions of {size:,} messages ({sessions * size:,} rows, copied on the server in "
        f"{loaded:.0f} s). A provider read the first window of each ({served / sessions * 1000:.0f} ms a window): "
        f"its resident memory grew {grown:.0f} MiB, and it keeps {len(kept)} windows ({held:,} messages; "
        f"cache_sessions bounds them), never a whole session\n"
    )
    await provider.close()
    await writer.close()


def postgres(fresh: bool = True) -> None:
    from postgres import server

    from ravi.capabilities.postgres import PostgresHistoryProvider

    async def newest(provider: Any, n: int) -> None:
        rows = await provider.db.fetch(
            f"SELECT body FROM {provider.db.table('messages')} WHERE agent_id = 'agent' AND session_id = 's' "
            "ORDER BY seq DESC LIMIT $1",
            n,
        )
        [ChatMessage.model_validate_json(r["body"]) for r in rows]

    async def clone(provider: Any, sessions: int) -> None:
        """Copy session m0 to m1 .. m<sessions - 1>, rows and session records, on the server."""
        db = provider.db
        for kind in ("sessions", "messages"):
            name = db.table(kind)
            columns = [
                r["column_name"]
                for r in await db.fetch(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 "
                    "ORDER BY ordinal_position",
                    db.schema,
                    f"{db.prefix}{kind}",
                )
            ]
            # a copy's terms carry the digest of m0: left out, the copy is indexed on its first search
            fill = {"session_id": "'m' || n", "terms": "NULL", "indexed_seq": "0"}
            picked = ", ".join(fill.get(c, c) for c in columns)
            for first in range(1, sessions, 50):  # 50 sessions a statement, well within the statement timeout
                await db.execute(
                    f"INSERT INTO {name} ({', '.join(columns)}) SELECT {picked} FROM {name}, "
                    "generate_series($1::int, $2::int) n WHERE agent_id = 'agent' AND session_id = 'm0'",
                    first,
                    min(first + 49, sessions - 1),
                )

    async def settle(provider: Any) -> None:
        """What autovacuum does soon after a bulk write: the rows rewritten by indexing leave dead versions that
        every read would step over until it runs."""
        async with provider.db.connection() as connection:
            await connection.execute(f"VACUUM ANALYZE {provider.db.table('messages')}")
            await connection.execute(f"VACUUM ANALYZE {provider.db.table('sessions')}")

    async def drop_schema(dsn: str, schema: str) -> None:
        import asyncpg

        connection = await asyncpg.connect(dsn)
        await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await connection.close()

    with server() as dsn:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        make = lambda: PostgresHistoryProvider(dsn, schema=schema)  # noqa: E731
        if fresh:
            asyncio.run(fresh_worker(make, newest, "Postgres", settle))
        asyncio.run(provider_memory(make, clone, "Postgres"))
        asyncio.run(drop_schema(dsn, schema))


def redis(fresh: bool = True) -> None:
    from redis_tier import server

    from ravi.capabilities.redis import RedisHistoryProvider

    async def newest(provider: Any, n: int) -> None:
        key = provider._keys("agent", "s")[0]
        [ChatMessage.model_validate_json(b) for b in await provider.redis.client.lrange(key, -n, -1)]

    async def clone(provider: Any, sessions: int) -> None:
        """Copy session m0's keys to m1 .. m<sessions - 1> on the server (COPY), a pipeline per 100 sessions."""
        client = provider.redis.client
        source = provider._keys("agent", "m0")
        for first in range(1, sessions, 100):
            async with client.pipeline(transaction=False) as pipe:
                for s in range(first, min(first + 100, sessions)):
                    for key, copy in zip(source, provider._keys("agent", f"m{s}"), strict=True):
                        pipe.copy(key, copy)
                await pipe.execute()

    with server() as url:
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        make = lambda: RedisHistoryProvider(url, prefix=prefix)  # noqa: E731
        if fresh:
            asyncio.run(fresh_worker(make, newest, "Redis"))
        asyncio.run(provider_memory(make, clone, "Redis"))


def main() -> None:
    in_memory()
    summarising()
    postgres()
    redis()


if __name__ == "__main__":
    main()
