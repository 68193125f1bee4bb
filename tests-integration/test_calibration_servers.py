"""The provider's corrections (``Calibration``) kept in a session-state store on a real server: reports made at
once, by one worker or by several, all count."""

from __future__ import annotations

import asyncio

import pytest
from servers import Server

from ravi.agents.context.calibration import Calibration
from ravi.capabilities.postgres import PostgresMemoryStore
from ravi.capabilities.redis import RedisSessionStore


@pytest.fixture(params=["redis", "postgres"])
def state_store(request: pytest.FixtureRequest) -> object:
    if request.param == "redis":
        server: Server = request.getfixturevalue("redis_server")
        return RedisSessionStore(server.address, prefix=request.getfixturevalue("redis_prefix"))
    server = request.getfixturevalue("postgres_server")
    return PostgresMemoryStore(server.address, schema=request.getfixturevalue("pg_schema"))


async def test_reports_made_at_once_by_one_worker_all_count(state_store: object) -> None:
    """Reports of one worker made at once, before it ever read the store, are all kept: the largest is the
    correction, in the store too (each report read the store and replaced the list the others had started)."""
    calibration = Calibration(state_store, keep=50)  # type: ignore[arg-type]
    ratios = [1.0 + i / 10 for i in range(1, 21)]
    await asyncio.gather(*(calibration.observe("m", counted=1_000, reported=round(r * 1_000)) for r in ratios))
    assert await calibration.factor("m") == max(ratios)
    assert await Calibration(state_store).factor("m") == max(ratios)  # type: ignore[arg-type]
    await state_store.aclose()  # type: ignore[attr-defined]


async def test_a_worker_sees_the_corrections_another_reported_after_it_read(state_store: object) -> None:
    """A worker that read the store before another reported uses that report's correction from its next window,
    and its own smaller report does not erase it."""
    a, b = Calibration(state_store), Calibration(state_store)  # type: ignore[arg-type]
    assert await b.factor("m") == 1.0
    await a.observe("m", counted=1_000, reported=3_000)
    assert await b.factor("m") == 3.0
    await b.observe("m", counted=1_000, reported=1_200)
    assert await a.factor("m") == 3.0
    assert await Calibration(state_store).factor("m") == 3.0  # type: ignore[arg-type]
    await state_store.aclose()  # type: ignore[attr-defined]
