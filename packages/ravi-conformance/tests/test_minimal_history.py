"""The smallest history backend the conformance page describes passes the history contract.

Six methods of ``HistoryProvider`` over a dict, the kernel's checks, no optional ability, no options model: the
optional abilities' rules skip, naming each missing one, and every other rule holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ravi.conformance import HistoryProviderContract
from ravi.kernel.errors import MessageConflict
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import SessionGeneration, TailEditor, WindowReader, check_append
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
    assert not isinstance(backend, SessionGeneration | TailEditor | WindowReader)


class TestMinimalHistory(HistoryProviderContract):
    @pytest.fixture
    def backend(self) -> MinimalHistory:
        return MinimalHistory()
