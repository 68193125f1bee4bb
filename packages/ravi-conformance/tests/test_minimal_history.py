"""The smallest history backend the conformance page describes passes the history contract.

Six methods of ``HistoryProvider`` over a dict, the kernel's checks, no optional ability, no options model: the
optional abilities' rules skip, naming each missing one, and every other rule holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ravi.conformance import HistoryProviderContract
from ravi.kernel.errors import InvalidArgument, MessageConflict
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import (
    SessionGeneration,
    SessionReplacer,
    TailEditor,
    WindowReader,
    check_append,
    replace_session,
)
from ravi.kernel.storage.history import stored_body
from ravi.kernel.values import check_page, check_scope


class MinimalHistory:
    """The required methods only."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], list[tuple[str, ChatMessage]]] = {}

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        check_append(agent_id, session_id, run_id, messages)
        held = {m.id: stored_body(m) for _, m in self._sessions.get((agent_id, session_id), [])}
        new = []
        for message in messages:
            if message.id in held:
                if held[message.id] != stored_body(message):
                    raise MessageConflict(message.id)  # before anything of the batch is stored
                continue
            new.append((run_id, message))
        self._sessions.setdefault((agent_id, session_id), []).extend(new)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        check_scope(agent_id=agent_id, session_id=session_id)
        check_page(limit, offset)
        rows = [m for _, m in self._sessions.get((agent_id, session_id), [])][offset:]
        return rows if limit is None else rows[:limit]

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        check_scope(agent_id=agent_id, session_id=session_id)
        return len(self._sessions.pop((agent_id, session_id), []))

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        rows = self._sessions.get((agent_id, session_id), [])
        kept = [(r, m) for r, m in rows if r != run_id]
        self._sessions[(agent_id, session_id)] = kept
        return len(rows) - len(kept)

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        check_scope(agent_id=agent_id, session_id=session_id)
        return len(self._sessions.get((agent_id, session_id), []))


def test_the_minimal_backend_has_no_optional_ability() -> None:
    backend = MinimalHistory()
    assert not isinstance(backend, SessionGeneration | SessionReplacer | TailEditor | WindowReader)


async def test_replace_session_on_a_store_without_the_ability_checks_the_batch_first() -> None:
    """``replace_session`` falls back to ``clear`` and ``append_many`` on a store that cannot replace a session
    atomically, and a batch it would refuse changes nothing: it is checked before the session is cleared."""
    backend = MinimalHistory()
    held = [ChatMessage.user("kept", id="m-1")]
    await backend.append_many("a", held, session_id="s")
    twice = [ChatMessage.user("one", id="x"), ChatMessage.user("two", id="x")]
    with pytest.raises(MessageConflict):
        await replace_session(backend, "a", twice, session_id="s")
    with pytest.raises(InvalidArgument):
        await replace_session(backend, "a", [ChatMessage.user("ok"), "not a message"], session_id="s")  # type: ignore[list-item]
    assert await backend.get_messages("a", session_id="s") == held
    loaded = [ChatMessage.user("loaded"), ChatMessage.assistant("back")]
    assert await replace_session(backend, "a", loaded, session_id="s", run_id="r") == 1
    assert await backend.get_messages("a", session_id="s") == loaded


class TestMinimalHistory(HistoryProviderContract):
    @pytest.fixture
    def backend(self) -> MinimalHistory:
        return MinimalHistory()
