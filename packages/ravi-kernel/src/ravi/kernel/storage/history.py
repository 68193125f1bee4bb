"""The history Protocol (004): the full transcript of every session, append-only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ravi.kernel.messages import ChatMessage


@runtime_checkable
class HistoryProvider(Protocol):
    """The full transcript of every session: append-only, ordered, never compacted.

    Messages are kept per ``(agent_id, session_id)`` in the order they were appended, each tagged with the
    ``run_id`` that wrote it. Appending a message whose ``id`` the session already holds does nothing, so a
    retried append is stored once.
    """

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session."""
        ...

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        """Add messages at the end of the session, all or none, keeping their order."""
        ...

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, skipping the first ``offset`` and at most ``limit`` of them."""
        ...

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the whole session; returns how many messages were removed."""
        ...

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages one run wrote to the session; returns how many."""
        ...

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds."""
        ...


def check_append(agent_id: str, session_id: str, run_id: str, messages: Sequence[ChatMessage]) -> None:
    """What every ``append_many`` checks first: the scope, and that each item is a ``ChatMessage``
    (``InvalidArgument`` naming the first that is not, so nothing of the batch is stored)."""
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.values import check_scope

    check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
    for i, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            raise InvalidArgument(
                f"messages[{i}] is a {type(message).__name__}, not a ChatMessage",
                hint="build it with ChatMessage(...) or ChatMessage.from_openai(...)",
            )


@runtime_checkable
class SessionLister(Protocol):
    """An optional ability of a history provider: say which sessions an agent has (for tools and the CLI)."""

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted."""
        ...


__all__ = ["HistoryProvider", "SessionLister", "check_append"]
