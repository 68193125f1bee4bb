"""Relevant recall's kept rankings on a real PostgreSQL: the windows of one request share the store's ranking, and
a session another process clears and refills (the same shape, the same request: the same offsets) is ranked
again, with nothing of the removed messages in any window."""

from __future__ import annotations

from typing import Any

import pytest
from servers import Server

from ravi.agents.context import (
    CompactionPipeline,
    RelevantRecallStrategy,
    ToolResultCompactionStrategy,
    WindowRequest,
)
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.kernel.messages import ChatMessage, ToolCallBlock

TOPICS = ["walrus", "staging", "invoice", "kettle", "harbour", "lantern", "orchard", "violin"]
REQUEST = "what did we say about the walrus?"


class Searching(PostgresHistoryProvider):
    """The Postgres provider, noting where each search's part ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.searches: list[int] = []

    async def search_hybrid(self, agent_id: str, *, session_id: str, query: str, before: int, **kw: Any) -> Any:
        self.searches.append(before)
        return await super().search_hybrid(agent_id, session_id=session_id, query=query, before=before, **kw)


def _session(tag: str) -> list[ChatMessage]:
    messages = [ChatMessage.system("be brief")]
    for i in range(200):
        topic = TOPICS[i % len(TOPICS)]
        messages += [
            ChatMessage.user(f"{tag} question {i} about the {topic} " + "detail " * 40),
            ChatMessage.assistant(f"{tag} answer {i}: the {topic} is fine " + "more " * 40),
        ]
    return [*messages, ChatMessage.user(REQUEST)]


def _step(i: int) -> list[ChatMessage]:
    call = ToolCallBlock(id=f"loop-{i}", name="read_log", arguments={"page": i})
    return [ChatMessage.assistant(None, tool_calls=[call]), ChatMessage.tool(f"loop-{i}", f"page {i}")]


def _pipeline() -> CompactionPipeline:
    return CompactionPipeline([ToolResultCompactionStrategy(), RelevantRecallStrategy(1_500, meaning=None)])


async def _fresh_window(server: Server, schema: str) -> list[ChatMessage]:
    """The window a pipeline with nothing kept makes of the session, through a provider of its own."""
    fresh = PostgresHistoryProvider(server.address, schema=schema)
    try:
        return (await _pipeline().window(WindowRequest("a", "s", history=fresh))).messages
    finally:
        await fresh.aclose()


async def test_a_session_another_process_clears_and_refills_alike_is_ranked_again(
    postgres_server: Server, pg_schema: str
) -> None:
    mine = Searching(postgres_server.address, schema=pg_schema)
    other = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)  # another process's
    try:
        await other.append_many("a", _session("old"), session_id="s")
        pipeline = _pipeline()
        request = WindowRequest("a", "s", history=mine)
        old: set[str] = set()
        for i in range(8):
            await other.append_many("a", _step(i), session_id="s")
            old |= {m.id for m in (await pipeline.window(request)).messages}
        assert len(mine.searches) < 8, "the windows of the request shared its rankings"
        await other.clear("a", session_id="s")
        await other.append_many("a", [*_session("new"), *_step(0)], session_id="s")
        searched = len(mine.searches)
        window = (await pipeline.window(request)).messages
        assert len(mine.searches) == searched + 1
        assert not old & {m.id for m in window}
        assert not any(m.text.startswith("old ") for m in window)
        assert window == await _fresh_window(postgres_server, pg_schema)
    finally:
        await mine.aclose()
        await other.aclose()


@pytest.mark.parametrize("change", ["replace_last", "clear_run", "forget"])
async def test_a_session_another_process_edits_between_windows_of_one_request_is_ranked_again(
    postgres_server: Server, pg_schema: str, change: str
) -> None:
    """Another process replaces the newest message, removes a run, or forgets the session and stores it again,
    between two windows of one request: the next window holds nothing removed and is a fresh pipeline's window."""
    mine = Searching(postgres_server.address, schema=pg_schema)
    other = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)  # another process's
    try:
        await other.append_many("a", _session("old"), session_id="s", run_id="old")
        pipeline = _pipeline()
        request = WindowRequest("a", "s", history=mine)
        for i in range(4):
            await other.append_many("a", _step(i), session_id="s", run_id="loop")
            await pipeline.window(request)
        stored = await other.get_messages("a", session_id="s")
        if change == "replace_last":
            gone = {stored[-1].id}
            assert await other.replace_last("a", session_id="s", message_id=stored[-1].id, run_id="loop")
        elif change == "clear_run":
            gone = {m.id for m in stored[:-8]}  # all but the four calls and results of the run "loop"
            await other.clear_run("a", session_id="s", run_id="old")
            await other.append_many("a", _session("new")[1:], session_id="s", run_id="new")
        else:
            gone = {m.id for m in stored}
            await other.forget("a", session_id="s")
            await other.append_many("a", _session("new"), session_id="s", run_id="new")
        await other.append_many("a", _step(9), session_id="s", run_id="loop")
        window = (await pipeline.window(request)).messages
        assert not gone & {m.id for m in window}
        assert window == await _fresh_window(postgres_server, pg_schema)
    finally:
        await mine.aclose()
        await other.aclose()
