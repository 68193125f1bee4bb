"""What the stores keep about a transcript's life on real servers: shared pools, typed errors at the edges, the
terms index across removals, bounded searches, and ``RaviSession.pop_item`` on every history store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from servers import Server, closing

from ravi.capabilities.postgres import PgLongTermMemory, PgVectorStore, PostgresHistoryProvider
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import Document


async def test_a_store_joining_a_shared_pool_gets_its_connection_hook(postgres_server: Server, pg_schema: str) -> None:
    """Stores with the same DSN and pool options share one pool. A store that needs a connection hook (the
    pgvector codec) and joins a pool another store opened first gets connections with its hook: the pool's
    connections are replaced when a hook is added (``expire_connections`` is a coroutine in asyncpg 0.32; left
    unawaited, the old connections stayed, and every save failed with "expected str, got ndarray")."""
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append("a", ChatMessage.user("opens the pool"), session_id="s")
        async for memory in closing(PgLongTermMemory(postgres_server.address, schema=pg_schema)):
            for _ in range(3):  # every pooled connection, not only a new one
                await memory.save("a", "the user prefers tea")
            assert [m.content for m in await memory.search("a", "tea")][:1] == ["the user prefers tea"]
        async for vectors in closing(PgVectorStore(postgres_server.address, schema=pg_schema, command_timeout=30.0)):
            await vectors.upsert([Document(id="d1", content="x", embedding=[1.0, 0.0, 0.0])], collection="c")
            [hit] = await vectors.search([1.0, 0.0, 0.0], collection="c", limit=1)
            assert hit.id == "d1"


async def test_recall_by_meaning_works_on_a_pool_that_has_the_pgvector_codec(
    postgres_server: Server, pg_schema: str
) -> None:
    """The history's search by meaning on a pool a ``PgLongTermMemory`` joined (the pool's connections then carry
    the pgvector codec) sends the query's embedding as text cast to ``vector``: sent as a bare ``$4::vector``,
    the codec took it and every search failed with ``InvalidArgument ... could not convert string to float``."""
    from ravi.kernel.embeddings import HashingEmbeddingClient

    embedder = HashingEmbeddingClient()
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        for session in ("s1", "s2"):
            await history.append_many(
                "a", [ChatMessage.user("the zebra account"), ChatMessage.assistant("ok")], session_id=session
            )
            found = await history.search_hybrid(
                "a", session_id=session, query="zebra", before=10**9, limit=5, embedder=embedder, model="hash"
            )
            assert found.meaning, "no match by meaning"
            async for memory in closing(PgLongTermMemory(postgres_server.address, schema=pg_schema)):
                await memory.save("a", "the user prefers tea")  # joins the history's pool with the codec


async def test_postgres_edges_raise_typed_errors(postgres_server: Server, pg_schema: str) -> None:
    """``append_many(None)``, ``upsert(None)`` and a search filter holding a set or an object raise
    ``InvalidArgument``, never a ``TypeError`` from the driver."""
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        with pytest.raises(InvalidArgument):
            await history.append_many("a", None, session_id="s")  # type: ignore[arg-type]
    async for vectors in closing(PgVectorStore(postgres_server.address, schema=pg_schema)):
        with pytest.raises(InvalidArgument):
            await vectors.upsert(None, collection="c")  # type: ignore[arg-type]
        await vectors.upsert([Document(id="d1", content="x", embedding=[1.0, 0.0])], collection="c")
        for bad in ({"tag": {"a", "b"}}, {"tag": object()}, {"tag": {"$in": {"a"}}}):
            with pytest.raises(InvalidArgument):
                await vectors.search([1.0, 0.0], collection="c", limit=1, filter=bad)  # type: ignore[arg-type]


async def test_concurrent_clear_runs_never_deadlock(postgres_server: Server, pg_schema: str) -> None:
    """Concurrent ``clear_run`` calls of one session on separate connections serialise on the session's lock:
    none fails with a deadlock (7 of 8 did), and the running totals add up afterwards."""
    from ravi.kernel.storage import window_of

    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema, max_size=12)):
        for round_ in range(3):
            s = f"s{round_}"
            for i in range(8):
                batch = [ChatMessage.user(f"{i}.{k} " + "x" * (k * 37 % 300)) for k in range(40)]
                await history.append_many("a", batch, session_id=s, run_id=f"r{i % 4}")
            await asyncio.gather(*(history.clear_run("a", session_id=s, run_id=f"r{i}") for i in range(3)))
            kept = await history.get_messages("a", session_id=s)
            assert len(kept) == 80
            for tokens in (0, 500, 5_000):
                assert await history.read_window("a", session_id=s, tokens=tokens) == window_of(
                    kept, tokens, await history.generation("a", session_id=s)
                )


@pytest.fixture(params=["postgres", "redis"])
async def server_history(
    request: pytest.FixtureRequest, postgres_server: Server, pg_schema: str, redis_server: Server, redis_prefix: str
) -> AsyncIterator[Any]:
    """A history provider on a real server: Postgres or Redis."""
    from ravi.capabilities.redis import RedisHistoryProvider

    if request.param == "postgres":
        store: Any = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    else:
        store = RedisHistoryProvider(redis_server.address, prefix=redis_prefix)
    async for opened in closing(store):
        yield opened


def _said(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _answered(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg-{text}",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


async def test_concurrent_pops_return_different_items(server_history: Any) -> None:
    """Concurrent ``pop_item`` calls on one session return different items (two used to return the same one in
    9 of 10 trials, though only one was removed), and together remove exactly the session's items."""
    from ravi.integrations.openai_agents import RaviSession

    for trial in range(5):
        session = RaviSession(f"s{trial}", server_history)
        items = [_said("first"), *(_answered(f"part {i}") for i in range(8)), _said("last")]
        await session.add_items(items[:5])
        await session.add_items(items[5:])
        popped = await asyncio.gather(*(session.pop_item() for _ in range(10)))
        assert sorted(map(str, popped)) == sorted(map(str, items)), "two pops returned the same item"
        assert await session.get_items() == []


async def test_a_pop_racing_add_items_moves_nothing(server_history: Any) -> None:
    """A pop racing ``add_items`` removes one item and moves none: the rest of its batch stays before the new
    items (it used to be written again after them)."""
    from ravi.integrations.openai_agents import RaviSession

    for trial in range(8):
        session = RaviSession(f"s{trial}", server_history)
        first = [_said("question"), _answered("one"), _answered("two"), _answered("three")]
        await session.add_items(first)
        later = [_said("follow-up"), _answered("reply")]
        popped, _ = await asyncio.gather(session.pop_item(), session.add_items(later))
        got = await session.get_items()
        if popped == first[-1]:
            assert got == [*first[:-1], *later], "the batch the pop rewrote moved after the new items"
        else:
            assert (popped, got) == (later[-1], [*first, *later[:-1]])


async def test_a_search_after_a_window_read_takes_the_newest_rows_from_it(
    postgres_server: Server, pg_schema: str
) -> None:
    """The rows a search indexes first are usually the newest, which the window read before it has just parsed:
    they are not sent again (a 1 MB latest message used to cross the wire twice per window), and the search
    finds them as it would have."""
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", [ChatMessage.user(f"turn {i} quokka{i}") for i in range(30)], session_id="s")
        await history.search_units("a", session_id="s", query="turn", before=10**9, limit=1)
        newest = [ChatMessage.user("the walrus sleeps " + "z" * 50_000), ChatMessage.assistant("noted")]
        await history.append_many("a", newest, session_id="s")
        await history.read_window("a", session_id="s", tokens=100)
        states: list[Any] = []
        fetchrow = history.db.fetchrow

        async def spy(query: str, *args: Any) -> Any:
            row = await fetchrow(query, *args)  # noqa: B023 - the loop runs once
            states.append(row)  # noqa: B023
            return row

        history.db.fetchrow = spy  # type: ignore[method-assign]
        matches = await history.search_units("a", session_id="s", query="walrus", before=10**9, limit=3)
        assert [list(m.messages) for m in matches] == [[newest[0]]]
        [state] = states
        assert list(state["pending"]) and all(body is None for body in state["bodies"]), "the held rows came again"
        other = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)  # holds nothing: reads them
        async for fresh in closing(other):
            await fresh.append("a", ChatMessage.user("a narwhal too"), session_id="s")
            assert len(await fresh.search_units("a", session_id="s", query="narwhal", before=10**9, limit=3)) == 1


async def test_a_session_removed_whole_never_serves_a_cached_copy(postgres_server: Server, pg_schema: str) -> None:
    """A session whose rows are deleted outright (as erasing a person's data does) and then written again with the
    same ids and length is read fresh by a provider that cached the old one: its generation is a random token, so
    the new session never has the old one's (an epoch counter started again at 0, and the cached copy was served)."""
    async for writer in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for reader in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            old = [ChatMessage.user(f"old {i}", id=str(i)) for i in range(5)]
            await writer.append_many("a", old, session_id="s")
            assert await reader.get_messages("a", session_id="s") == old
            assert (await reader.read_window("a", session_id="s", tokens=10**6)).messages == old
            for table in ("messages", "sessions"):
                await writer.db.execute(
                    f"DELETE FROM {writer.db.table(table)} WHERE agent_id = 'a' AND session_id = 's'"
                )
            new = [ChatMessage.user(f"new {i}", id=str(i)) for i in range(5)]
            await writer.append_many("a", new, session_id="s")
            assert await reader.get_messages("a", session_id="s") == new
            assert (await reader.read_window("a", session_id="s", tokens=10**6)).messages == new
