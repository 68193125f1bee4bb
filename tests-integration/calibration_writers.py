"""What each process of ``test_calibration_servers.py``'s cross-process test runs (a module of its own, so that a
spawned process imports it by name)."""

from __future__ import annotations

import asyncio
from typing import Any

REPORTS = 20
"""How many reports each process makes, all at once."""
FINISH = 120.0
"""Seconds after which a process that has not finished counts as hung: a guard, not a measure of speed."""


def reported(writer: int, k: int) -> int:
    """The prompt tokens writer ``writer`` reports in its ``k``-th report, for 10,000 counted (each one distinct)."""
    return 10_000 + 1_000 * writer + 10 * (k + 1)


def report(writer: int, kind: str, address: str, place: str, start: Any) -> None:
    """One worker's reports: its own state-store client and ``Calibration``, waiting for the others, then
    ``REPORTS`` reports on model ``m`` at once."""
    from ravi.agents.context.calibration import Calibration
    from ravi.capabilities.postgres import PostgresMemoryStore
    from ravi.capabilities.redis import RedisSessionStore

    async def work() -> None:
        store: Any = (
            RedisSessionStore(address, prefix=place) if kind == "redis" else PostgresMemoryStore(address, schema=place)
        )
        try:
            calibration = Calibration(store, keep=50)
            await calibration.factor("m")  # connected before the others start
            start.wait(timeout=FINISH)
            await asyncio.gather(
                *(calibration.observe("m", counted=10_000, reported=reported(writer, k)) for k in range(REPORTS))
            )
        finally:
            await store.aclose()

    asyncio.run(work())
