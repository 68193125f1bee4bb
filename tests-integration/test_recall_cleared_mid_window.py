"""Relevant recall on a real PostgreSQL, with the session changed by another process between a window's read of
the history and the store search the window makes (a spawned process with a provider of its own does the change,
and the search waits for it, so the change lands there on every run): the window holds nothing the change
removed, no unit of the old generation, and the next window is a fresh pipeline's."""

from __future__ import annotations

from typing import Any

import pytest
from servers import Server
from session_editors import conversation, edit_in_another_process

from ravi.agents.context import CompactionPipeline, RelevantRecallStrategy, WindowRequest
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.kernel.messages import ChatMessage


class EditedBeforeSearch(PostgresHistoryProvider):
    """The Postgres provider whose next search first has another process change the session, and waits for it."""

    def __init__(self, address: str, *, schema: str) -> None:
        super().__init__(address, schema=schema)
        self.address, self.schema = address, schema
        self.change: str | None = None

    async def search_hybrid(self, agent_id: str, *, session_id: str, **kw: Any) -> Any:
        change, self.change = self.change, None
        if change is not None:
            edit_in_another_process(self.address, self.schema, agent_id, session_id, change)
        return await super().search_hybrid(agent_id, session_id=session_id, **kw)


def _pipeline() -> CompactionPipeline:
    return CompactionPipeline([RelevantRecallStrategy(1_500, meaning=None)])


@pytest.mark.parametrize("change", ["clear", "refill", "clear_run", "replace_last"])
async def test_a_change_from_another_process_between_the_read_and_the_search_is_not_in_the_window(
    postgres_server: Server, pg_schema: str, change: str
) -> None:
    """``refill``: the other process clears the session and stores another conversation under the same ids. Before
    the fix, the window held the old read's newest turns beside units the search found in the new session (or
    none, after a clear): 17 removed messages after a clear."""
    mine = EditedBeforeSearch(postgres_server.address, schema=pg_schema)
    fresh = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    try:
        old = conversation("old")
        await mine.append_many("a", old, session_id="s", run_id="old")
        pipeline = _pipeline()
        request = WindowRequest("a", "s", history=mine)
        await pipeline.window(request)  # the request's rankings are kept: the next window searches only anew
        later = ChatMessage.user("and what about the walrus then?", id="later")
        await mine.append_many("a", [later], session_id="s", run_id="old")
        mine.change = change
        window = (await pipeline.window(request)).messages
        assert mine.change is None, "the window made no store search"
        stored = await fresh.get_messages("a", session_id="s")
        removed = [m for m in [*old, later] if m not in stored]  # compared whole: a message under a reused id too
        assert removed, "the change removed nothing"
        held = [m.id for m in window if m in removed]
        assert not held, f"the window holds {len(held)} removed messages: {held[:5]}"
        if change != "replace_last":  # every message of the old conversation is gone (a recalled unit is annotated)
            assert not [m.id for m in window if "old question" in m.text or "old answer" in m.text]
        assert window == (await _pipeline().window(WindowRequest("a", "s", history=fresh))).messages
        again = (await pipeline.window(request)).messages
        assert again == (await _pipeline().window(WindowRequest("a", "s", history=fresh))).messages
    finally:
        await mine.aclose()
        await fresh.aclose()
