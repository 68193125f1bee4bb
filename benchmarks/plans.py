"""Warm Postgres windows whatever the table's statistics say.

A 100,000-message agent session in a table of its own, in each state a server passes through after a bulk write:

* before statistics: written in batches of 1,000 and never analysed;
* mid-burst: imported in one transaction, with ANALYZE run while it was uncommitted (autovacuum's ANALYZE during
  an import sees pages full of rows no one may read yet, so the statistics say the table holds none);
* early in the burst: written in batches of 1,000, with ANALYZE run after the first (the statistics say the
  session holds 1,000 rows, its seqs below 1,000);
* skewed: 2,000 small sessions of 200 other agents beside it, then VACUUM ANALYZE;
* after VACUUM ANALYZE: what autovacuum leaves soon after a bulk write.

Autovacuum is off for these tables, so each state holds while it is measured. Warm = append one message and
assemble the window again, the agent loop's steady state, with the window benchmark's pipeline, by a worker of its
own (empty caches) for each turn; the states take turns. Target: before statistics within 1.5x of after VACUUM
ANALYZE (every state is shown beside it).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from _table import console, table, verdict
from window import pipeline

from ravi.agents.context import AgentContext, ContextConfig
from ravi.agents.demo import agentic_transcript
from ravi.kernel.messages import ChatMessage
from ravi.kernel.tokens import stored_tokens

SIZE = 100_000
BATCH = 1_000
ROUNDS = 5
"""Turns of each state."""
ROUNDS_OF = 30
"""Warm windows a turn."""


async def warm_window(history: Any, rounds: int) -> float:
    """Median ms of a window after one appended message, ``rounds`` times."""
    context = AgentContext(ContextConfig(history, pipeline()))
    await context.get_prompt_window("s")
    times = []
    for i in range(rounds):
        await context.add_message("s", ChatMessage.user(f"follow-up {i}"))
        start = time.perf_counter()
        await context.get_prompt_window("s")
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def batches(history: Any, messages: list[ChatMessage]) -> None:
    for i in range(0, len(messages), BATCH):
        await history.append_many("agent", messages[i : i + BATCH], session_id="s")


async def analysed_mid_burst(history: Any, messages: list[ChatMessage]) -> None:
    """The session imported in one transaction (the provider's append statement, a batch at a time), with
    ANALYZE run before it commits."""
    async with history.db.connection() as importer, importer.transaction():
        for i in range(0, len(messages), BATCH):
            part = messages[i : i + BATCH]
            await importer.fetchval(
                f"SELECT {history._append}($1, $2, '', $3, $4, $5, $6)",
                "agent",
                "s",
                [m.id for m in part],
                [m.model_dump_json() for m in part],
                [m.role for m in part],
                [stored_tokens(m) for m in part],
            )
        await history.db.execute(f"ANALYZE {history._messages}")
        await history.db.execute(f"ANALYZE {history._sessions}")


async def analysed_early(history: Any, messages: list[ChatMessage]) -> None:
    await batches(history, messages[:BATCH])
    await history.db.execute(f"ANALYZE {history._messages}")
    await history.db.execute(f"ANALYZE {history._sessions}")
    await batches(history, messages[BATCH:])


async def settled(history: Any) -> None:
    async with history.db.connection() as connection:
        await connection.execute(f"VACUUM ANALYZE {history._messages}")
        await connection.execute(f"VACUUM ANALYZE {history._sessions}")


async def skewed(history: Any, messages: list[ChatMessage]) -> None:
    for k in range(2_000):
        small = [ChatMessage.user(f"hello {k}.{j}") for j in range(10)]
        await history.append_many(f"tenant{k % 200}", small, session_id=f"t{k}")
    await batches(history, messages)
    await settled(history)


async def after_vacuum(history: Any, messages: list[ChatMessage]) -> None:
    await batches(history, messages)
    await settled(history)


STATES: dict[str, Callable[[Any, list[ChatMessage]], Awaitable[None]]] = {
    "before statistics": batches,
    "mid-burst": analysed_mid_burst,
    "early in the burst": analysed_early,
    "skewed": skewed,
    "after VACUUM ANALYZE": after_vacuum,
}


async def write_state(dsn: str, write: Callable[[Any, list[ChatMessage]], Awaitable[None]]) -> tuple[str, float]:
    """A schema of its own holding the session, written by ``write``, and the table's row count as its statistics
    say (-1: never analysed)."""
    from ravi.capabilities.postgres import PostgresHistoryProvider

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    history = PostgresHistoryProvider(dsn, schema=schema)
    try:
        await history.count_messages("agent", session_id="warmup")  # the tables exist
        for name in (history._messages, history._sessions):
            await history.db.execute(f"ALTER TABLE {name} SET (autovacuum_enabled = false)")
        await write(history, agentic_transcript(SIZE))
        believed = await history.db.fetchval(
            f"SELECT reltuples FROM pg_class WHERE oid = '{history._messages}'::regclass"
        )
    finally:
        await history.close()
    gc.collect()
    return schema, float(believed)


async def warm_in(dsn: str, schema: str) -> float:
    """The warm window of a worker of its own (empty caches) on ``schema``."""
    from ravi.capabilities.postgres import PostgresHistoryProvider

    reader = PostgresHistoryProvider(dsn, schema=schema)
    try:
        return await warm_window(reader, ROUNDS_OF)
    finally:
        await reader.close()


async def drop(dsn: str, schemas: list[str]) -> None:
    import asyncpg

    connection = await asyncpg.connect(dsn)
    try:
        for schema in schemas:
            await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await connection.close()


def main() -> None:
    from postgres import server

    with server() as dsn:
        written = {label: asyncio.run(write_state(dsn, write)) for label, write in STATES.items()}
        try:
            # the states take turns, so a busy moment of the machine falls on each of them alike
            times: dict[str, list[float]] = {label: [] for label in STATES}
            for _ in range(ROUNDS):
                for label, (schema, _) in written.items():
                    times[label].append(asyncio.run(warm_in(dsn, schema)))
        finally:
            asyncio.run(drop(dsn, [schema for schema, _ in written.values()]))
    figures = {label: statistics.median(found) for label, found in times.items()}
    base = figures["after VACUUM ANALYZE"]
    rows = [
        (label, f"{written[label][1]:,.0f}", f"{figures[label]:.2f}", f"{figures[label] / base:.2f}x")
        for label in STATES
    ]
    table(
        f"Postgres: warm window of a {SIZE:,}-message session (ms; median of {ROUNDS} turns of {ROUNDS_OF} windows "
        "each) in each statistics state",
        ["state", "rows the statistics say", "warm window", "vs after VACUUM ANALYZE"],
        rows,
    )
    ratio = figures["before statistics"] / base
    console.print(
        f"target: before statistics within 1.5x of after VACUUM ANALYZE: {ratio:.2f}x, {verdict(ratio <= 1.5)}"
    )
    worst = max(figures.values()) / base
    console.print(f"every state against after VACUUM ANALYZE: at most {worst:.2f}x\n")


if __name__ == "__main__":
    main()
