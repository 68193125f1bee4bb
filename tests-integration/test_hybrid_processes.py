"""Processes that share no lock append to one session of a hybrid history provider (Redis in front of Postgres).

Each process builds its own provider over the same two servers, the way several workers of one application do,
and appends batches to one session while reading it back through the provider. Afterwards the hot tier holds
exactly what the cold tier holds, in the cold tier's order, with its run ids: reads served by the hot tier are the
durable transcript.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from typing import Any

import pytest
from hybrid_writers import AGENT, FINISH, ROUNDS, batch_of, message, replace, write
from servers import Server

from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider

PROCESSES = 4


def test_hybrid_history_appended_from_several_processes_keeps_one_order_in_both_tiers(
    request: pytest.FixtureRequest,
) -> None:
    """Several processes (spawned, each its own provider and event loop) append to one session of a hybrid
    provider at once: both tiers hold every message once, each process's in its order, and the hot tier holds
    exactly the cold tier's messages in its order, with its run ids."""

    async def check(hot: RedisHistoryProvider, cold: PostgresHistoryProvider) -> None:
        hot_stored = await hot.get_stored(AGENT, session_id="s")
        cold_stored = await cold.get_stored(AGENT, session_id="s")
        assert len(cold_stored) == PROCESSES * ROUNDS * 2
        assert len({s.message.id for s in cold_stored}) == len(cold_stored), "a message is stored twice"
        for writer in range(PROCESSES):
            mine = [s.message.id for s in cold_stored if s.run_id == f"run-{writer}"]
            assert mine == [message(writer, k).id for k in range(2 * ROUNDS)]
        assert len(hot_stored) == len(cold_stored)
        differ = [i for i, (a, b) in enumerate(zip(hot_stored, cold_stored, strict=True)) if a != b]
        assert not differ, f"{len(differ)} of {len(cold_stored)} positions differ between the tiers"

    run_processes(request, write, check)


def test_hybrid_history_replaced_from_several_processes_serves_one_whole_conversation(
    request: pytest.FixtureRequest,
) -> None:
    """Several processes replace one session of a hybrid provider at once, each with conversations of its own,
    reading it back after each: every read is one whole conversation (``hybrid_writers.replace``), the cold tier
    ends holding one, and the hot tier holds the same or a different number of messages (so that reads go to
    the cold tier), never another conversation as long."""

    async def check(hot: RedisHistoryProvider, cold: PostgresHistoryProvider) -> None:
        cold_stored = await cold.get_stored(AGENT, session_id="s")
        loads = {tuple(m.id for m in batch_of(w, k)) for w in range(PROCESSES) for k in range(ROUNDS)}
        assert tuple(s.message.id for s in cold_stored) in loads
        hot_stored = await hot.get_stored(AGENT, session_id="s")
        if len(hot_stored) == len(cold_stored):
            assert hot_stored == cold_stored, "the hot tier serves another conversation than the cold tier holds"

    run_processes(request, replace, check)


def run_processes(request: pytest.FixtureRequest, target: Any, check: Any) -> None:
    """Run ``target`` in ``PROCESSES`` spawned processes over fresh tiers on the session's servers, then
    ``check(hot, cold)``."""
    redis_server: Server = request.getfixturevalue("redis_server")
    postgres_server: Server = request.getfixturevalue("postgres_server")
    prefix, schema = f"t{uuid.uuid4().hex[:16]}", f"t_{uuid.uuid4().hex[:16]}"
    hot = RedisHistoryProvider(redis_server.address, prefix=prefix)
    cold = PostgresHistoryProvider(postgres_server.address, schema=schema)
    asyncio.run(cold.count_messages(AGENT, session_id="s"))  # the schema made once, before the processes start
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    processes = [
        context.Process(
            target=target,
            args=(writer, redis_server.address, prefix, postgres_server.address, schema, start),
            name=f"writer-{writer}",
        )
        for writer in range(PROCESSES)
    ]
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.join(FINISH)
        hung = [p.name for p in processes if p.is_alive()]
        assert not hung, f"{hung} did not finish within {FINISH} s"
        failed = [(p.name, p.exitcode) for p in processes if p.exitcode != 0]
        assert not failed, f"processes failed (their tracebacks are on stderr): {failed}"

        asyncio.run(check(hot, cold))
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()

        async def remove() -> None:
            for store in (hot, cold):
                await store.destroy()
                await store.close()

        asyncio.run(remove())
