"""What an append costs the hybrid history (Redis in front of Postgres), beside writing the two tiers in turn.

The hybrid provider writes the cold tier, then copies what the hot tier lacks in the cold tier's order (decision
78): more round trips than writing each tier once, the way it did before. Measured on one session, one writer:
appends of one message and of batches of ten (median per append), a re-warm of a 10,000-message session whose
hot copy expired (the next append copies it whole), and a whole read through the provider (unchanged by the
copy). The servers are ``RAVI_BENCH_REDIS_URL`` and ``RAVI_BENCH_POSTGRES_DSN`` if set, else local ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
import uuid
from collections.abc import Iterator

from _table import console, table

from ravi.agents.context.hybrid import HybridHistoryProvider
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider
from ravi.kernel.messages import ChatMessage

APPENDS = 300
"""Appends timed for each figure."""


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str]]:
    url, dsn = os.environ.get("RAVI_BENCH_REDIS_URL"), os.environ.get("RAVI_BENCH_POSTGRES_DSN")
    with contextlib.ExitStack() as stack:
        if not url:
            from ravi.capabilities.redis.local import LocalRedis

            url = stack.enter_context(LocalRedis()).url
        if not dsn:
            from ravi.capabilities.postgres.local import LocalPostgres

            dsn = stack.enter_context(LocalPostgres()).dsn
        yield url, dsn


def batch(k: int, size: int) -> list[ChatMessage]:
    return [ChatMessage.user(f"message {k}.{i} about invoices and refunds") for i in range(size)]


async def figures(url: str, dsn: str) -> dict[str, float]:
    hot = RedisHistoryProvider(url, prefix=f"bench{uuid.uuid4().hex[:8]}")
    cold = PostgresHistoryProvider(dsn, schema=f"bench_{uuid.uuid4().hex[:8]}")
    hybrid = HybridHistoryProvider(hot, cold)
    out: dict[str, float] = {}

    async def timed(append: object, name: str, size: int) -> None:
        session = f"{name}-{size}"
        await append(session, batch(-1, size))  # type: ignore[operator]  # the session exists, the pools are warm
        took = []
        for k in range(APPENDS):
            start = time.perf_counter()
            await append(session, batch(k, size))  # type: ignore[operator]
            took.append(time.perf_counter() - start)
        out[f"{name} {size}"] = statistics.median(took) * 1000

    async def tiers_in_turn(session: str, messages: list[ChatMessage]) -> None:
        await cold.append_many("a", messages, session_id=session)
        await hot.append_many("a", messages, session_id=session)

    async def through_hybrid(session: str, messages: list[ChatMessage]) -> None:
        await hybrid.append_many("a", messages, session_id=session)

    try:
        for size in (1, 10):
            await timed(tiers_in_turn, "tiers", size)
            await timed(through_hybrid, "hybrid", size)
        for k in range(10):
            await hybrid.append_many("a", batch(k, 1000), session_id="big")
        reads = []
        for _ in range(5):
            start = time.perf_counter()
            await hybrid.get_messages("a", session_id="big")
            reads.append(time.perf_counter() - start)
        out["read"] = statistics.median(reads) * 1000
        await hot.clear("a", session_id="big")
        start = time.perf_counter()
        await hybrid.append_many("a", batch(10, 1), session_id="big")
        out["rewarm"] = (time.perf_counter() - start) * 1000
        assert await hot.count_messages("a", session_id="big") == 10_001
    finally:
        for store in (hot, cold):
            await store.destroy()
        await hybrid.aclose()
    return out


def main() -> None:
    with servers() as (url, dsn):
        got = asyncio.run(figures(url, dsn))
    rows = [
        (
            f"append {size} message{'s' if size > 1 else ''}",
            f"{got[f'tiers {size}']:.2f}",
            f"{got[f'hybrid {size}']:.2f}",
        )
        for size in (1, 10)
    ]
    table(
        "Hybrid history (Redis hot, Postgres cold): median ms per append, one writer",
        ["append", "each tier in turn", "hybrid (copy in the cold order)"],
        rows,
    )
    console.print(f"re-warm of a 10,000-message session (one append): {got['rewarm']:.0f} ms")
    console.print(f"whole read of it through the hybrid: {got['read']:.1f} ms")


if __name__ == "__main__":
    main()
