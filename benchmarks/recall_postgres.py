"""A warm relevant-recall window on Postgres beside a plain token-budget window, and what the search costs.

A 10,000-message agent session (``agentic_transcript``) on one real server (a local one from the wheel, or
``RAVI_BENCH_POSTGRES_DSN``), its terms index built by a first window, then settled as autovacuum settles it after
the bulk write (VACUUM ANALYZE). Warm = a new user turn appended, then the window assembled again; the request asks
about the past ("what happened with the deploy of service 7?", whose words are common in the session, so recall
ranks many units and its search has many borders to look up). Pipelines:

* plain: ``[ToolResultCompactionStrategy(), TokenBudgetComposedStrategy([], budget)]``;
* recall: ``[ToolResultCompactionStrategy(), RelevantRecallStrategy(budget, meaning=None, spread=...)]`` (words
  only: no embedding model in the figures).

Both at 16,000 and 100,000 tokens, ``ROUNDS`` windows each, the pipelines taking turns window by window (one
round's figures swing on a shared machine). Printed: ms per window (median and min) and the statements each window
sends (round trips), and the server's own time for the search's statements (each window's, run again under
EXPLAIN ANALYZE, median).
Target: a warm recall window within 3x of a plain one.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from typing import Any

from _table import console, table, verdict
from postgres import server

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.demo import agentic_transcript
from ravi.kernel.messages import ChatMessage

SIZE = 10_000
BUDGETS = (16_000, 100_000)
ROUNDS = 40
QUESTION = "what happened with the deploy of service {i}?"


class Counted:
    """The provider's statements, counted (every statement goes through ``Database._statement``), and those its
    searches sent kept."""

    def __init__(self, provider: Any) -> None:
        self.count = 0
        self.searching = False
        self.statements: list[tuple[str, tuple[Any, ...]]] = []
        db = provider.db
        inner = db._statement
        search = provider.search_hybrid

        async def counted(method: str, query: str, args: tuple[Any, ...]) -> Any:
            self.count += 1
            if self.searching:
                self.statements.append((query, args))
            return await inner(method, query, args)

        async def searched(*args: Any, **kwargs: Any) -> Any:
            self.searching = True
            try:
                return await search(*args, **kwargs)
            finally:
                self.searching = False

        db._statement = counted
        provider.search_hybrid = searched


async def settle(provider: Any) -> None:
    """VACUUM ANALYZE, what autovacuum does soon after a bulk write."""
    async with provider.db.connection() as connection:
        for name in ("messages", "sessions"):
            await connection.execute(f"VACUUM ANALYZE {provider.db.table(name)}")


async def server_ms(provider: Any, statements: list[tuple[str, tuple[Any, ...]]]) -> float:
    """The server's execution time (ms) of ``statements`` (run again under EXPLAIN ANALYZE, in a transaction rolled
    back: a search may index rows)."""
    total = 0.0
    async with provider.db.connection() as connection:
        for query, args in statements:
            tx = connection.transaction()
            await tx.start()
            try:
                plan = await connection.fetchval(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {query}", *args)
            finally:
                await tx.rollback()
            total += json.loads(plan)[0]["Execution Time"]
    return total


async def measure(dsn: str, budget: int) -> dict[str, dict[str, float]]:
    from ravi.capabilities.postgres import PostgresHistoryProvider

    provider = PostgresHistoryProvider(dsn, schema=f"bench_{uuid.uuid4().hex[:8]}")
    counter = Counted(provider)
    try:
        messages = agentic_transcript(SIZE)
        for i in range(0, SIZE, 1_000):
            await provider.append_many("agent", messages[i : i + 1_000], session_id="s")
        pipelines = {
            "plain": [ToolResultCompactionStrategy(), TokenBudgetComposedStrategy([], budget)],
            "recall": [ToolResultCompactionStrategy(), RelevantRecallStrategy(budget, meaning=None)],
        }
        contexts = {name: AgentContext(ContextConfig(provider, p)) for name, p in pipelines.items()}  # type: ignore[arg-type]
        for context in contexts.values():
            await context.get_prompt_window("s")  # the first window indexes the session
        await settle(provider)
        times: dict[str, list[float]] = {name: [] for name in contexts}
        trips: dict[str, list[int]] = {name: [] for name in contexts}
        searches: list[list[tuple[str, tuple[Any, ...]]]] = []
        for i in range(ROUNDS):
            for name, context in contexts.items():
                await context.add_message("s", ChatMessage.user(QUESTION.format(i=f"{i}-{name}")))
                counter.count, counter.statements = 0, []
                start = time.perf_counter()
                await context.get_prompt_window("s")
                times[name].append((time.perf_counter() - start) * 1000)
                trips[name].append(counter.count)
                if name == "recall":
                    searches.append(counter.statements)
        server = [await server_ms(provider, s) for s in searches]
        return {
            name: {
                "median": statistics.median(times[name]),
                "min": min(times[name]),
                "trips": statistics.median(trips[name]),
                "server": statistics.median(server) if name == "recall" else 0.0,
            }
            for name in contexts
        }
    finally:
        await provider.destroy()
        await provider.aclose()


def main() -> None:
    rows = []
    worst = 0.0
    with server() as dsn:
        for budget in BUDGETS:
            figures = asyncio.run(measure(dsn, budget))
            plain, recall = figures["plain"], figures["recall"]
            worst = max(worst, recall["median"] / plain["median"])
            rows.append(
                (
                    f"{budget:,}",
                    f"{plain['median']:.2f} / {plain['min']:.2f}",
                    f"{plain['trips']:.0f}",
                    f"{recall['median']:.2f} / {recall['min']:.2f}",
                    f"{recall['trips']:.0f}",
                    f"{recall['server']:.2f}",
                    f"{recall['median'] / plain['median']:.1f}x",
                )
            )
    table(
        f"Warm windows of a {SIZE:,}-message agent session on Postgres, words only, a new request about the past "
        f"before each ({ROUNDS} windows each, taking turns)",
        [
            "budget",
            "plain ms (median / min)",
            "plain statements",
            "recall ms (median / min)",
            "recall statements",
            "search on the server (ms)",
            "recall vs plain",
        ],
        rows,
    )
    console.print(f"target: a warm recall window within 3x of a plain one: {worst:.1f}x, {verdict(worst <= 3)}\n")


if __name__ == "__main__":
    main()
