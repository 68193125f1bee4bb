"""What each process of ``test_hybrid_processes.py`` runs (a module of its own, so that a spawned process
imports it by name)."""

from __future__ import annotations

import asyncio
from typing import Any

from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider
from ravi.kernel.messages import ChatMessage

ROUNDS = 25
"""How many batches of two messages each process appends."""

AGENT = "agent"
FINISH = 120.0
"""Seconds after which a process that has not finished counts as hung: a guard, not a measure of speed."""


def message(writer: int, k: int) -> ChatMessage:
    """Writer ``writer``'s ``k``-th message."""
    make = ChatMessage.user if k % 2 else ChatMessage.assistant
    return make(f"writer{writer} says {k}" + " more" * (k % 5), id=f"w{writer}-m{k}")


def write(writer: int, redis_url: str, prefix: str, dsn: str, schema: str, start: Any) -> None:
    """One process's work: wait for the others, then append ``ROUNDS`` batches of two messages to session ``s``
    through a hybrid provider of its own, reading the session back after each."""
    from ravi.agents.context.hybrid import HybridHistoryProvider

    async def work() -> None:
        history = HybridHistoryProvider(
            RedisHistoryProvider(redis_url, prefix=prefix), PostgresHistoryProvider(dsn, schema=schema)
        )
        try:
            await history.count_messages(AGENT, session_id="s")  # connected before the others start
            start.wait(timeout=FINISH)
            for k in range(ROUNDS):
                batch = [message(writer, 2 * k), message(writer, 2 * k + 1)]
                await history.append_many(AGENT, batch, session_id="s", run_id=f"run-{writer}")
                held = {m.id for m in await history.get_messages(AGENT, session_id="s")}
                assert {m.id for m in batch} <= held, "a batch just appended is not read back"
        finally:
            await history.aclose()

    asyncio.run(work())


def batch_of(writer: int, k: int) -> list[ChatMessage]:
    """Writer ``writer``'s ``k``-th conversation to load: three messages, ids of its own."""
    return [ChatMessage.user(f"writer{writer} load {k} turn {i}", id=f"w{writer}-l{k}-{i}") for i in range(3)]


def replace(writer: int, redis_url: str, prefix: str, dsn: str, schema: str, start: Any) -> None:
    """One process's work: wait for the others, then replace session ``s`` with ``ROUNDS`` conversations of its
    own through a hybrid provider of its own, reading the session back after each: every read must be one
    writer's whole conversation."""
    from ravi.agents.context.hybrid import HybridHistoryProvider

    async def work() -> None:
        history = HybridHistoryProvider(
            RedisHistoryProvider(redis_url, prefix=prefix), PostgresHistoryProvider(dsn, schema=schema)
        )
        try:
            await history.count_messages(AGENT, session_id="s")
            start.wait(timeout=FINISH)
            for k in range(ROUNDS):
                await history.replace_session(AGENT, batch_of(writer, k), session_id="s", run_id=f"run-{writer}")
                read = await history.get_messages(AGENT, session_id="s")
                ids = [m.id for m in read]
                assert len(ids) == 3, f"a read of a replaced session holds {ids}"
                owner, load = ids[0].split("-")[:2]
                assert ids == [f"{owner}-{load}-{i}" for i in range(3)], f"a read mixes conversations: {ids}"
        finally:
            await history.aclose()

    asyncio.run(work())
