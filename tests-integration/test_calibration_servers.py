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


@pytest.fixture(params=["redis", "postgres"])
def two_stores(request: pytest.FixtureRequest) -> tuple[object, object]:
    """Two clients of one state store (two workers' connections to one server)."""
    if request.param == "redis":
        server: Server = request.getfixturevalue("redis_server")
        prefix = request.getfixturevalue("redis_prefix")
        return RedisSessionStore(server.address, prefix=prefix), RedisSessionStore(server.address, prefix=prefix)
    server = request.getfixturevalue("postgres_server")
    schema = request.getfixturevalue("pg_schema")
    return PostgresMemoryStore(server.address, schema=schema), PostgresMemoryStore(server.address, schema=schema)


def stored_ratios(state: dict[str, object]) -> list[float]:
    """Every ratio the calibration scope holds, whatever key it is under."""
    found: list[float] = []
    for value in state.values():
        ratios = value.get("ratios") if isinstance(value, dict) else value
        found += ratios if isinstance(ratios, list) else []
    return found


async def test_two_workers_reporting_at_once_lose_no_report(two_stores: tuple[object, object]) -> None:
    """Two workers, each with its own connection, report on one model at the same instant, again and again: the
    larger report of each round is the correction, and every report is in the store. Each report read the list
    of ratios and wrote it back whole, so one of two reports made at once replaced the other."""
    from ravi.agents.context.calibration import SCOPE

    first, second = two_stores
    a, b = Calibration(first, keep=50), Calibration(second, keep=50)  # type: ignore[arg-type]
    try:
        for round_ in range(10):  # the larger report from either worker
            high, low = (a, b) if round_ % 2 else (b, a)
            await asyncio.gather(
                high.observe(f"m{round_}", counted=1_000, reported=2_000),
                low.observe(f"m{round_}", counted=1_000, reported=1_100),
            )
            assert await Calibration(first).factor(f"m{round_}") == 2.0, round_  # type: ignore[arg-type]
        tokens = [10_000 + 100 * i for i in range(1, 51)]  # 25 reports each, all at once
        await asyncio.gather(
            *((a if i % 2 else b).observe("many", counted=10_000, reported=t) for i, t in enumerate(tokens))
        )
        reported = [round(t / 10_000, 4) for t in tokens]
        state = await first.reserved().get_state(SCOPE)  # type: ignore[attr-defined]
        many = {k: v for k, v in state.items() if k == "many" or k.startswith("many\x1f")}
        assert sorted(stored_ratios(many)) == reported
        assert await Calibration(second).factor("many") == max(reported)  # type: ignore[arg-type]
        writes: list[object] = []
        place = a._store  # where a keeps the corrections: the first store's reserved place
        update = place.update_state  # type: ignore[union-attr]

        async def counted_update(session_id: str, patch: dict[str, object]) -> object:
            writes.append(patch)
            return await update(session_id, patch)

        place.update_state = counted_update  # type: ignore[method-assign,union-attr]
        assert await a.factor("many") == max(reported)
        assert writes == []  # its entry read back as written: a window writes nothing
    finally:
        for store in two_stores:
            await store.aclose()  # type: ignore[attr-defined]


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


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_workers_in_separate_processes_reporting_at_once_lose_no_report(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """Three worker processes, each with its own client, make their reports on one model at once: every report is
    in the store afterwards, and the correction any worker reads is the largest."""
    import multiprocessing

    from calibration_writers import FINISH, REPORTS, report, reported

    from ravi.agents.context.calibration import SCOPE

    server: Server = request.getfixturevalue(f"{kind}_server")
    place = request.getfixturevalue("redis_prefix" if kind == "redis" else "pg_schema")
    writers = 3
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(writers)
    processes = [
        context.Process(target=report, args=(w, kind, server.address, place, start), name=f"worker-{w}")
        for w in range(writers)
    ]
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.join(FINISH)
        assert not [p.name for p in processes if p.is_alive()], "a worker did not finish"
        assert not [(p.name, p.exitcode) for p in processes if p.exitcode], "a worker failed (see stderr)"
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()

    async def check() -> None:
        store: object = (
            RedisSessionStore(server.address, prefix=place)
            if kind == "redis"
            else PostgresMemoryStore(server.address, schema=place)
        )
        try:
            state = await store.reserved().get_state(SCOPE)  # type: ignore[attr-defined]
            m = {k: v for k, v in state.items() if k == "m" or k.startswith("m\x1f")}
            expected = sorted(round(reported(w, k) / 10_000, 4) for w in range(writers) for k in range(REPORTS))
            assert sorted(stored_ratios(m)) == expected
            assert await Calibration(store).factor("m") == max(expected)  # type: ignore[arg-type]
        finally:
            await store.aclose()  # type: ignore[attr-defined]

    asyncio.run(check())


async def test_no_application_session_reads_writes_or_clears_the_corrections(state_store: object) -> None:
    """The corrections were kept in the state of the session ``ravi.calibration``: an application session of that
    name read them, a write to it changed every window of the model, and its clear (or a forget) erased them."""
    from ravi.agents.context.calibration import SCOPE, SEPARATOR

    try:
        for session_id in (SCOPE, "calibration", "reserved"):
            calibration = Calibration(state_store)  # type: ignore[arg-type]
            await calibration.observe(session_id, counted=1_000, reported=2_000)
            assert not any(
                key.startswith(session_id + SEPARATOR)
                for key in await state_store.get_state(session_id)  # type: ignore[attr-defined]
            )
            forged = {f"{session_id}{SEPARATOR}{'0' * 32}": {"ratios": [3.5], "at": 4e9}, session_id: [3.5]}
            await state_store.update_state(session_id, forged)  # type: ignore[attr-defined]
            assert await Calibration(state_store).factor(session_id) == 2.0  # type: ignore[arg-type]
            await state_store.clear(session_id)  # type: ignore[attr-defined]
            assert await Calibration(state_store).factor(session_id) == 2.0  # type: ignore[arg-type]
    finally:
        await state_store.aclose()  # type: ignore[attr-defined]
