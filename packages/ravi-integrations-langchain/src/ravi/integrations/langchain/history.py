"""``RaviChatMessageHistory``: LangChain's chat message history, kept in any Ravi ``HistoryProvider``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from ravi.agents.context.config import check_history
from ravi.integrations.langchain import _loop
from ravi.integrations.langchain.convert import to_langchain, to_ravi
from ravi.kernel.storage import HistoryProvider
from ravi.kernel.values import check_scope


class RaviChatMessageHistory(BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` over a Ravi history store: every message, of every kind, is stored
    and read back exactly, equal to what was added (see :mod:`ravi.integrations.langchain.convert`); every add
    appends, as LangChain's own histories do (a message added twice is there twice, whatever its ``id``); and
    ``clear`` removes the session.

    The async methods run on the caller's event loop. The synchronous ones (``messages``, ``add_messages``,
    ``clear``) run on one background loop that this package keeps, so a store's connection pool is used from one
    loop whichever thread calls, and they work from inside a running event loop too (they block it while they
    wait: prefer the ``a`` methods there).

    Example:
        >>> from ravi.agents.context import InMemoryHistoryProvider
        >>> from langchain_core.messages import HumanMessage
        >>> history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s1")
        >>> history.add_messages([HumanMessage("hi", id="m1")])
        >>> [m.content for m in history.messages]
        ['hi']
    """

    def __init__(self, history: HistoryProvider, *, session_id: str, agent_id: str = "agent") -> None:
        check_scope(agent_id=agent_id, session_id=session_id)
        check_history(history)
        self.history = history
        self.agent_id = agent_id
        self.session_id = session_id

    async def aget_messages(self) -> list[BaseMessage]:
        """The stored messages, oldest first."""
        stored = await self.history.get_messages(self.agent_id, session_id=self.session_id)
        return [to_langchain(m) for m in stored]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` at the end of the session, all or none."""
        converted = [to_ravi(m, ravi_id=uuid.uuid4().hex) for m in messages]  # each add is a new turn
        await self.history.append_many(self.agent_id, converted, session_id=self.session_id)

    async def aclear(self) -> None:
        """Remove the session."""
        await self.history.clear(self.agent_id, session_id=self.session_id)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The stored messages, oldest first."""
        messages: list[BaseMessage] = _loop.run(self.aget_messages())
        return messages

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` at the end of the session, all or none."""
        _loop.run(self.aadd_messages(messages))

    def clear(self) -> None:
        """Remove the session."""
        _loop.run(self.aclear())


__all__ = ["RaviChatMessageHistory"]
