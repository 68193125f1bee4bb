"""``RaviSession``: the OpenAI Agents SDK's ``Session`` over any Ravi history store."""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

from ravi.agents.adapters import as_context
from ravi.agents.context.config import check_history
from ravi.integrations.openai_agents.convert import KEY, group, to_ravi
from ravi.kernel.errors import ConfigurationError, InvalidArgument, UnknownSetting
from ravi.kernel.loops import KeyedLocks
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider, TailEditor, WindowReader
from ravi.kernel.values import check_scope, thaw


def _items(message: ChatMessage) -> list[dict[str, Any]]:
    kept = message.metadata.get(KEY)
    if not isinstance(kept, Mapping):
        return []
    return [thaw(i) for i in kept.get("items", [])]


def _batch(message: ChatMessage) -> str | None:
    kept = message.metadata.get(KEY)
    return str(kept.get("batch")) if isinstance(kept, Mapping) and kept.get("batch") else None


_POP_LOCKS: weakref.WeakKeyDictionary[Any, KeyedLocks[tuple[str, str]]] = weakref.WeakKeyDictionary()
"""Per history store, session and event loop: the lock that serialises this loop's pops on a store without
``TailEditor``."""


_POP_LOCKS_BY_ID: dict[int, KeyedLocks[tuple[str, str]]] = {}
"""The same, for a store that cannot be weakly referenced or hashed: kept by identity for the life of the process
(a later store given a dead one's identity shares its locks: its pops may wait for nothing, never race)."""


def _pop_lock(history: Any, agent_id: str, session_id: str) -> asyncio.Lock:
    try:
        locks = _POP_LOCKS.get(history)
        if locks is None:
            locks = _POP_LOCKS[history] = KeyedLocks()
    except TypeError:  # a third party's store with __slots__, or __eq__ without __hash__
        locks = _POP_LOCKS_BY_ID.setdefault(id(history), KeyedLocks())
    return locks((agent_id, session_id))


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
    Ravi history store: the one given, else the one settings name (``ravi.toml``, ``RAVI_*``; in memory when they
    name none, as every face's default is), Postgres or Redis for production.

    Items are stored exactly as the SDK gives them and returned exactly; each ``add_items`` call is one atomic
    append, grouped into Ravi turns (consecutive assistant items, parallel function calls included, are one
    turn) so the assembly engine keeps calls and results together. ``pop_item`` removes the last item: the newest
    message is replaced, atomically, by the same turn without it.

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
        if history is not None:
            check_history(history)
        self.history = history if history is not None else as_context(None).config.history
        self.session_settings = _settings(session_settings)

    async def _messages(self) -> list[ChatMessage]:
        return await self.history.get_messages(self.agent_id, session_id=self.session_id)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first; with ``limit`` (or ``session_settings.limit``), the newest ``limit``.

        Raises:
            InvalidArgument: ``limit`` is not an integer (nor ``None``).
        """
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise InvalidArgument(f"limit must be an integer or None, got {type(limit).__name__}", field="limit")
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
        """Remove and return the newest item (``None`` for an empty session, or one whose newest message was not
        written by a ``RaviSession``).

        On a store that replaces its newest message atomically (``TailEditor``, as every history store Ravi
        ships does), this is a compare-and-replace loop: read the newest message, then replace it (if it is
        still the newest) with nothing when it holds one item, else with the same turn less its last item under
        a new id; read again when another writer got there first. Concurrent pops return different items, a
        pop never moves another writer's items, and a failure loses nothing. On a store without it, pops of one
        session are serialised within this event loop only: a pop racing a writer, or a pop on another loop or in
        another process, may move or lose items of the batch it rewrites.
        """
        history = self.history
        if not isinstance(history, TailEditor):
            async with _pop_lock(history, self.agent_id, self.session_id):
                return await self._pop_rewriting()
        while True:
            last = await self._newest()
            if last is None:
                return None
            items, batch = _items(last), _batch(last)
            if batch is None or not items:  # not written by a RaviSession: nothing of ours to pop
                return None
            rest = []
            if len(items) > 1:
                rest = [to_ravi(items[:-1], salt=f"{batch}:pop:{uuid.uuid4().hex}", extra={"batch": batch})]
            if await history.replace_last(
                self.agent_id, session_id=self.session_id, message_id=last.id, messages=rest, run_id=batch
            ):
                return items[-1]

    async def _newest(self) -> ChatMessage | None:
        """The session's newest message, or ``None``; read without reading the session when the store can."""
        history = self.history
        if isinstance(history, WindowReader):
            view = await history.read_window(self.agent_id, session_id=self.session_id, tokens=0)
            return view.messages[-1] if view.messages else None
        count = await history.count_messages(self.agent_id, session_id=self.session_id)
        if not count:
            return None
        newest = await history.get_messages(self.agent_id, session_id=self.session_id, offset=count - 1)
        return newest[-1] if newest else None

    async def _pop_rewriting(self) -> Any | None:
        """``pop_item`` on a store without ``TailEditor``: the last batch removed and written again without its
        last item (not atomic on the store: callers hold this process's lock for the session)."""
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
