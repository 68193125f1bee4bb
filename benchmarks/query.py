"""A window whose request is huge: relevant recall with the latest user message as its query, in memory and on
Postgres, when that message is a normal question, 10,000 or 120,000 distinct words, or 1 MB of Chinese.

Each search looks up at most 64 terms of its request (``ravi.kernel.search.query_terms``: those nearest either end
of its first and last 4,000 characters), and each message is indexed under at most 10,000 terms
(``indexed_terms``), so neither a huge request nor a huge message makes every later window slow. Before the
cap, 10,000 distinct words cost about 4 s per window on a busy Postgres index and 120,000 ran past the 30 s
statement timeout on every window.

Each timed window follows a new latest message (appended untimed), so no window reuses the last one's work. The
Postgres table is settled first (VACUUM ANALYZE, as autovacuum does after the bulk write), as in ``window.py``.
Target: a window with a huge request within 2x of one with a normal request.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from _table import console, table, verdict

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.demo import agentic_transcript
from ravi.kernel.messages import ChatMessage

SESSION = 10_000
BUDGET = 600_000  # room for the huge message itself, so every window is a recall window of the same shape
ROUNDS = 9


def requests(round_: int) -> dict[str, str]:
    """The latest user message of each kind, different in every round: the same question, alone or after a
    huge paste (whose words match nothing in the session, so every window recalls the same units)."""
    rng = random.Random(round_)
    question = f"what did the deploy of service {round_} log about the index error?"
    cjk = "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range(350_000))  # about 1 MB in UTF-8
    return {
        "normal question": question,
        "10,000 distinct words": " ".join(f"w{round_}x{i:06d}" for i in range(10_000)) + " " + question,
        "120,000 distinct words": " ".join(f"w{round_}x{i:06d}" for i in range(120_000)) + " " + question,
        "1 MB of Chinese": cjk + " " + question,
    }


async def settle(history: Any) -> None:
    """What autovacuum does soon after a bulk write (Postgres): VACUUM ANALYZE, which also moves the terms index's
    pending entries into the index proper, so every probe no longer reads the whole pending list."""
    db = getattr(history, "db", None)
    if db is not None:
        async with db.connection() as connection:
            for table in ("messages", "sessions"):
                await connection.execute(f"VACUUM ANALYZE {db.table(table)}")


async def windows(make: Callable[[], Any]) -> dict[str, float]:
    """The median time (ms) of a recall window after each kind of request."""
    history = make()
    messages = agentic_transcript(SESSION)
    for i in range(0, SESSION, 1_000):
        await history.append_many("agent", messages[i : i + 1_000], session_id="s")
    context = AgentContext(ContextConfig(history, [ToolResultCompactionStrategy(), RelevantRecallStrategy(BUDGET)]))
    await context.get_prompt_window("s")  # the session's index is built once, as a live session's is
    await settle(history)
    times: dict[str, list[float]] = {}
    for round_ in range(ROUNDS):
        for kind, text in requests(round_).items():
            await history.append("agent", ChatMessage.user(text), session_id="s")
            start = time.perf_counter()
            await context.get_prompt_window("s")
            times.setdefault(kind, []).append((time.perf_counter() - start) * 1000)
            await history.append("agent", ChatMessage.assistant(f"answer {round_}"), session_id="s")
    await history.clear("agent", session_id="s")
    closer = getattr(history, "aclose", None)
    if closer is not None:
        await closer()
    return {kind: statistics.median(values) for kind, values in times.items()}


def report(label: str, figures: dict[str, float]) -> None:
    normal = figures["normal question"]
    rows = [(kind, f"{ms:.1f}", f"{ms / normal:.2f}x") for kind, ms in figures.items()]
    table(
        f"{label}: a relevant-recall window of a {SESSION:,}-message session after each request (median ms)",
        ["latest user message", "window", "vs normal"],
        rows,
    )
    worst = max(ms / normal for ms in figures.values())
    console.print(f"target: a huge request within 2x of a normal one: {worst:.2f}x, {verdict(worst <= 2)}\n")


def main() -> None:
    report("In memory", asyncio.run(windows(InMemoryHistoryProvider)))
    from postgres import server

    from ravi.capabilities.postgres import PostgresHistoryProvider

    with server() as dsn:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        report("Postgres", asyncio.run(windows(lambda: PostgresHistoryProvider(dsn, schema=schema))))


if __name__ == "__main__":
    main()
