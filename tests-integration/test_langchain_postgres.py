"""The LangChain integration on a real Postgres: sync and async calls from different event loops share one
provider, and the agent loop keeps its transcript there."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, HumanMessage, message_to_dict
from servers import Server

from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.integrations.langchain import RaviChatMessageHistory
from ravi.integrations.langchain._loop import run as loop_run


def test_sync_and_async_calls_on_one_postgres_provider(postgres_server: Server, pg_schema: str) -> None:
    """LangChain's interfaces are sync-first; Ravi's stores are async and their pools belong to a loop. The sync
    calls run on the package's loop, the async ones on each caller's, and every one sees the same transcript."""
    provider = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    history = RaviChatMessageHistory(provider, session_id="s")
    first = [HumanMessage("hello", id="h1"), AIMessage("hi there", id="a1")]
    history.add_messages(first)  # sync: the background loop
    assert [message_to_dict(m) for m in history.messages] == [message_to_dict(m) for m in first]

    async def from_a_new_loop() -> list[str]:
        await history.aadd_messages([HumanMessage("again", id="h2")])
        return [str(m.content) for m in await history.aget_messages()]

    assert asyncio.run(from_a_new_loop()) == ["hello", "hi there", "again"]
    # yet another loop, same provider; every add appends, as LangChain's own histories do
    assert asyncio.run(from_a_new_loop()) == ["hello", "hi there", "again", "again"]
    assert [m.id for m in history.messages] == ["h1", "a1", "h2", "h2"]
    history.clear()
    assert history.messages == []
    # the sync calls opened a pool on the package's background loop, which runs on: close it there
    loop_run(provider.aclose())
