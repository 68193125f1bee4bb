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


async def test_a_correction_read_before_the_state_server_went_away_still_sizes_windows(
    redis_server: Server, redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The state store is read for each correction; while it cannot be reached, the worker goes on with the
    correction it read last (the history may live on another server), and reads the store again once it is back."""
    if redis_server.process is None:
        pytest.skip(f"the server comes from {redis_server.origin}; only a harness-started one can be restarted")
    store = RedisSessionStore(redis_server.address, prefix=redis_prefix, socket_timeout=2)
    calibration, other = Calibration(store), Calibration(store)
    try:
        await calibration.observe("m", counted=1_000, reported=1_500)
        assert await other.factor("m") == 1.5
        redis_server.stop()
        try:
            with caplog.at_level("WARNING", logger="ravi.agents.context.calibration"):
                assert [await other.factor("m") for _ in range(3)] == [1.5] * 3
            assert len(caplog.records) == 1  # once an outage, not once a window
            assert await Calibration(store).factor("m") == 1.0  # nothing read yet: no correction
        finally:
            redis_server.start()
        await calibration.observe("m", counted=1_000, reported=2_000)
        assert await other.factor("m") == 2.0
    finally:
        await store.aclose()
