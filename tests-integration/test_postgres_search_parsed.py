"""The messages a Postgres provider's searches returned are kept parsed for the session: a later search of the
session in the same generation is sent none of their bodies again, and nothing kept is ever served after the
session was cleared, cut, edited or forgotten, by this provider or another (a second process's stand-in)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from servers import Server, closing

from ravi.capabilities.postgres import PostgresHistoryProvider, hybrid
from ravi.kernel.embeddings import HashingEmbeddingClient
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage.history import HybridMatches


def session(word: str) -> list[ChatMessage]:
    """A system message, then 30 exchanges about a ``word`` fern; the same ids whatever the word."""
    messages = [ChatMessage.system("be brief", id="m-sys")]
    for i in range(30):
        messages += [
            ChatMessage.user(f"turn {i} about the {word} fern", id=f"m-u{i}"),
            ChatMessage.assistant(f"noted {i}, the {word} fern", id=f"m-a{i}"),
        ]
    return messages


class SentBodies:
    """Counts the bodies the server sends in the rows of units a search asks for (a wrapper of the provider's
    connection)."""

    def __init__(self, history: PostgresHistoryProvider) -> None:
        self.count = 0
        fetch = history.db.fetch

        async def counting(query: str, *args: Any) -> Any:
            rows = await fetch(query, *args)
            if "ELSE r.body END AS body" in query:  # a statement returning the rows of units
                self.count += sum(1 for r in rows if r["body"] is not None)
            return rows

        history.db.fetch = counting


async def search(history: PostgresHistoryProvider, agent_id: str = "a", session_id: str = "s") -> HybridMatches:
    """Words with neighbours and meaning: every path that returns units."""
    return await history.search_hybrid(
        agent_id, session_id=session_id, query="what about the fern", before=10**9, limit=80, spread=0.5,
        embedder=HashingEmbeddingClient(dimension=64), model="hashing-64",
    )  # fmt: skip


def texts(found: HybridMatches) -> dict[str, str]:
    """The text of every message the search returned, by id."""
    units = [*found.lexical, *found.meaning]
    return {m.id: m.text for u in units for m in u.messages if m.role != "system"}


async def test_a_second_search_of_a_session_is_sent_no_body_again(postgres_server: Server, pg_schema: str) -> None:
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", session("green"), session_id="s")
        sent = SentBodies(history)
        first = await search(history)
        assert first.lexical and first.meaning
        assert sent.count >= 60  # every message of the session, at least once

        before = sent.count
        again = await search(history)
        assert sent.count == before  # all of them kept parsed
        assert again == first  # the same units, messages and order

        await history.append_many("a", [ChatMessage.user("and the fern today?", id="m-new")], session_id="s")
        grown = await search(history)
        assert sent.count == before + 1  # only the new message
        assert texts(grown)["m-new"] == "and the fern today?"


async def test_what_is_kept_is_bounded(
    postgres_server: Server, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for 4 messages, a second search is sent the bodies of every message but 4, and finds the same."""
    monkeypatch.setattr(hybrid, "KEPT_MESSAGES", 4)
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", session("green"), session_id="s")
        sent = SentBodies(history)
        found = await history.search_units("a", session_id="s", query="fern", before=10**9, limit=80)
        first = sent.count
        again = await history.search_units("a", session_id="s", query="fern", before=10**9, limit=80)
        assert again == found
        assert sent.count - first == first - 4


async def clear(mine: PostgresHistoryProvider, theirs: PostgresHistoryProvider) -> None:
    await theirs.clear("a", session_id="s")
    await theirs.append_many("a", session("purple"), session_id="s", run_id="r2")


async def clear_run(mine: PostgresHistoryProvider, theirs: PostgresHistoryProvider) -> None:
    assert await theirs.clear_run("a", session_id="s", run_id="r1") == 60  # all but the system message
    await theirs.append_many("a", session("purple")[1:], session_id="s", run_id="r2")


async def forget(mine: PostgresHistoryProvider, theirs: PostgresHistoryProvider) -> None:
    await theirs.forget("a", session_id="s")
    await theirs.append_many("a", session("purple"), session_id="s", run_id="r2")


async def forget_here(mine: PostgresHistoryProvider, theirs: PostgresHistoryProvider) -> None:
    await mine.forget("a")
    await theirs.append_many("a", session("purple"), session_id="s", run_id="r2")


@pytest.mark.parametrize("change", [clear, clear_run, forget, forget_here], ids=lambda f: f.__name__)
async def test_nothing_kept_is_served_after_the_session_is_written_again(
    postgres_server: Server,
    pg_schema: str,
    change: Callable[[PostgresHistoryProvider, PostgresHistoryProvider], Awaitable[None]],
) -> None:
    """The session is written again with other words under the same ids and seqs: the provider that searched it
    before finds only the new words."""
    async for mine in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for theirs in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            green = session("green")
            await theirs.append("a", green[0], session_id="s")
            await theirs.append_many("a", green[1:], session_id="s", run_id="r1")
            assert all("green" in t for t in texts(await search(mine)).values())

            await change(mine, theirs)
            found = texts(await search(mine))
            assert len(found) == 60
            assert all("purple" in t for t in found.values()), found


async def test_nothing_kept_is_served_after_the_last_message_is_replaced(
    postgres_server: Server, pg_schema: str
) -> None:
    async for mine in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for theirs in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            await theirs.append_many("a", session("green"), session_id="s")
            assert texts(await search(mine))["m-a29"] == "noted 29, the green fern"

            edited = ChatMessage.assistant("noted 29, the purple fern", id="m-a29")
            assert await theirs.replace_last("a", session_id="s", message_id="m-a29", messages=[edited])
            found = texts(await search(mine))
            assert found["m-a29"] == "noted 29, the purple fern"
            assert found["m-a28"] == "noted 28, the green fern"


async def test_sessions_and_agents_sharing_message_ids_see_only_their_own(
    postgres_server: Server, pg_schema: str
) -> None:
    scopes = {("a", "s"): "green", ("a", "t"): "purple", ("b", "s"): "orange"}
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        for (agent_id, session_id), word in scopes.items():
            await history.append_many(agent_id, session(word), session_id=session_id)
        for _ in range(2):  # the second time, each from what was kept
            for (agent_id, session_id), word in scopes.items():
                found = texts(await search(history, agent_id, session_id))
                assert len(found) == 60
                assert all(word in t for t in found.values()), (agent_id, session_id, found)


async def rewrite(history: PostgresHistoryProvider, words: list[str]) -> None:
    """Clear the session and write it again with each of ``words`` in turn."""
    for word in words:
        await history.clear("a", session_id="s")
        await history.append_many("a", session(word), session_id="s")


async def test_concurrent_searches_while_another_provider_rewrites_the_session(
    postgres_server: Server, pg_schema: str
) -> None:
    """Searches of one provider run at once, with another provider clearing the session and writing it again with
    other words meanwhile: every unit a search returns is of one writing (its messages all say one word), and
    once the writing is done every search finds only its words, whatever was kept meanwhile."""
    colours = ("green", "purple", "orange")
    words = ["purple", "orange", "green", "purple"]
    async for mine in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for theirs in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
            await theirs.append_many("a", session("green"), session_id="s")
            await search(mine)  # something kept before the writing starts
            results = await asyncio.gather(rewrite(theirs, words), *(search(mine) for _ in range(12)))
            for found in results[1:]:
                assert isinstance(found, HybridMatches)
                for unit in [*found.lexical, *found.meaning]:
                    said = {c for m in unit.messages if m.role != "system" for c in colours if c in m.text}
                    assert len(said) <= 1, unit
            for _ in range(2):  # the second time, from what the first kept
                last = texts(await search(mine))
                assert len(last) == 60
                assert all(words[-1] in t for t in last.values()), last
