"""Loading a saved conversation back replaces the stored transcript in one step on real servers: a reader racing
the replacement reads the old conversation or the new one, never an empty session or a mix.

Amplifier's ``ContextManager.set_messages`` and AutoGen's ``load_state`` used to clear the session and then append
the saved messages, two round trips: a reader in between found the session empty, and a server failure in
between lost the stored conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from servers import Server

from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider

pytestmark = pytest.mark.asyncio

ROUNDS = 6
READERS = 6


@pytest.fixture(params=["postgres", "redis"])
def history(request: pytest.FixtureRequest) -> HistoryProvider:
    """A store on a real server, fresh for the test (the test closes it)."""
    if request.param == "postgres":
        from ravi.capabilities.postgres import PostgresHistoryProvider

        server: Server = request.getfixturevalue("postgres_server")
        return PostgresHistoryProvider(server.address, schema=request.getfixturevalue("pg_schema"))
    from ravi.capabilities.redis import RedisHistoryProvider

    server = request.getfixturevalue("redis_server")
    return RedisHistoryProvider(server.address, prefix=request.getfixturevalue("redis_prefix"))


def conversation(version: int) -> list[str]:
    return [f"v{version} turn {i}" for i in range(8)]


async def race(load: Callable[[int], Awaitable[Any]], read: Callable[[], Awaitable[list[str]]]) -> None:
    """Load versions 1 to ROUNDS of the conversation over version 0, each with readers before and after it in one
    gather; every reader must see a whole version, the one before or the one loaded."""
    await load(0)
    for version in range(1, ROUNDS + 1):
        reads = await asyncio.gather(read(), load(version), *(read() for _ in range(READERS)))
        for seen in (reads[0], *reads[2:]):
            assert seen in (conversation(version - 1), conversation(version)), (
                f"a reader saw {seen} while version {version} was being loaded"
            )


async def test_set_messages_is_never_seen_half_done(history: HistoryProvider) -> None:
    from ravi.agents.context.manager import ContextManager

    context = ContextManager(history=history, session_id="resumed")

    async def load(version: int) -> None:
        roles = ("user", "assistant")
        await context.set_messages([{"role": roles[i % 2], "content": t} for i, t in enumerate(conversation(version))])

    async def read() -> list[str]:
        return [m["content"] for m in await context.get_messages()]

    async with history:  # type: ignore[attr-defined]
        await race(load, read)


async def test_autogen_load_state_is_never_seen_half_done(history: HistoryProvider) -> None:
    from autogen_core.models import AssistantMessage, UserMessage

    from ravi.agents.context import ContextConfig
    from ravi.integrations.autogen import RaviChatCompletionContext

    context = RaviChatCompletionContext(ContextConfig(history), session_id="loaded")

    async def load(version: int) -> None:
        said = [
            UserMessage(content=t, source="user") if i % 2 == 0 else AssistantMessage(content=t, source="assistant")
            for i, t in enumerate(conversation(version))
        ]
        await context.load_state({"messages": [m.model_dump() for m in said]})

    async def read() -> list[str]:
        return [str(m.content) for m in await context.get_messages()]

    async with history:  # type: ignore[attr-defined]
        await race(load, read)


async def test_postgres_replacement_of_a_new_session_waits_for_an_append_creating_it(
    postgres_server: Server, pg_schema: str
) -> None:
    """A replacement of a session that has no record yet takes the session's lock as an append does. An append
    that created the session was still uncommitted when the replacement looked for the record: the replacement
    cleared nothing, then waited on the record for its own append, and put its batch after the appended message
    (neither "append, then replace" nor "replace, then append")."""
    import asyncpg

    from ravi.capabilities.postgres import PostgresHistoryProvider
    from ravi.capabilities.postgres.history import _rows

    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    async with history:
        await history.count_messages("a", session_id="warm")  # the tables exist
        new = [ChatMessage.user(f"loaded {i}") for i in range(3)]
        appender = await asyncpg.connect(postgres_server.address)
        watcher = await asyncpg.connect(postgres_server.address)
        try:
            transaction = appender.transaction()
            await transaction.start()  # the append creates the session's record and holds it, uncommitted
            await appender.fetchval(
                f"SELECT {history._append}($1, $2, '', $3, $4, $5, $6)", "a", "s", *_rows([ChatMessage.user("x")])
            )
            replacing = asyncio.ensure_future(history.replace_session("a", new, session_id="s"))
            waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1"
            while not await watcher.fetchval(waiting, "%replace_session%"):  # until it waits on the appender
                assert not replacing.done(), "the replacement did not wait for the append"
            await transaction.commit()
            assert await replacing == 1, "the replacement did not take the appended message"
        finally:
            await appender.close()
            await watcher.close()
        assert await history.get_messages("a", session_id="s") == new
