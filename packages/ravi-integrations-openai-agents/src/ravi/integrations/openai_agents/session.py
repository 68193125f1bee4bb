"""``RaviSession``: the OpenAI Agents SDK's ``Session`` over any Ravi history store."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

from ravi.agents.context import InMemoryHistoryProvider
from ravi.integrations.openai_agents.convert import KEY, group, to_ravi
from ravi.kernel.errors import ConfigurationError, UnknownSetting
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider
from ravi.kernel.values import check_scope, thaw


def _items(message: ChatMessage) -> list[dict[str, Any]]:
    kept = message.metadata.get(KEY)
    if not isinstance(kept, Mapping):
        return []
    return [thaw(i) for i in kept.get("items", [])]


def _batch(message: ChatMessage) -> str | None:
    kept = message.metadata.get(KEY)
    return str(kept.get("batch")) if isinstance(kept, Mapping) and kept.get("batch") else None


def _settings(value: SessionSettings | Mapping[str, Any] | None) -> SessionSettings:
    if value is None:
        return SessionSettings()
    try:
        return coerce_session_settings(dict(value) if isinstance(value, Mapping) else value)
    except TypeError as exc:  # an unknown field: the SDK's own sessions raise TypeError there, and so does this
        raise UnknownSetting(f"session_settings: {exc}", hint="pass agents.SessionSettings(limit=...)") from exc
    except ValueError as exc:
        raise ConfigurationError(f"session_settings: {exc}", hint="pass agents.SessionSettings(limit=...)") from exc


class RaviSession:
    """A ``Session`` of the OpenAI Agents SDK (``Runner.run(..., session=RaviSession("s1", history))``) kept in a
    Ravi history store: in memory by default, Postgres or Redis for production.

    Items are stored exactly as the SDK gives them and returned exactly; each ``add_items`` call is one atomic
    append, grouped into Ravi turns (consecutive assistant items, parallel function calls included, are one
    turn) so the assembly engine keeps calls and results together. ``pop_item`` removes the last item: the last
    ``add_items`` batch is rewritten without it.

    Example:
        >>> import asyncio
        >>> session = RaviSession("s1")
        >>> asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
        >>> asyncio.run(session.get_items())
        [{'role': 'user', 'content': 'hi'}]
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        history: HistoryProvider | None = None,
        *,
        agent_id: str = "agent",
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        check_scope(agent_id=agent_id, session_id=session_id)
        self.session_id = session_id
        self.agent_id = agent_id
        self.history = history if history is not None else InMemoryHistoryProvider()
        self.session_settings = _settings(session_settings)

    async def _messages(self) -> list[ChatMessage]:
        return await self.history.get_messages(self.agent_id, session_id=self.session_id)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first; with ``limit`` (or ``session_settings.limit``), the newest ``limit``."""
        limit = resolve_session_limit(limit, self.session_settings)
        items = [item for message in await self._messages() for item in _items(message)]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    async def add_items(self, items: Sequence[Any]) -> None:
        """Store ``items`` at the end of the session, all or none."""
        if not items:
            return
        batch = uuid.uuid4().hex
        await self._append(list(items), batch)

    async def _append(self, items: list[Any], batch: str) -> None:
        turns = group(items)
        messages = [to_ravi(t, salt=f"{batch}:{i}", extra={"batch": batch}) for i, t in enumerate(turns)]
        await self.history.append_many(self.agent_id, messages, session_id=self.session_id, run_id=batch)

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item (``None`` for an empty session)."""
        messages = await self._messages()
        if not messages:
            return None
        batch = _batch(messages[-1])
        if batch is None:  # not written by a RaviSession: nothing of ours to pop
            return None
        items = [item for m in messages if _batch(m) == batch for item in _items(m)]
        await self.history.clear_run(self.agent_id, session_id=self.session_id, run_id=batch)
        if len(items) > 1:
            await self._append(items[:-1], batch)
        return items[-1]

    async def clear_session(self) -> None:
        """Remove every item of the session."""
        await self.history.clear(self.agent_id, session_id=self.session_id)


__all__ = ["RaviSession"]
