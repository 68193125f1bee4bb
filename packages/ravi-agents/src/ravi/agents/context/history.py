"""``InMemoryHistoryProvider``: the whole ``HistoryProvider`` contract in process memory."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from ravi.kernel.closing import Closeable
from ravi.kernel.messages import ChatMessage
from ravi.kernel.options import NoOptions
from ravi.kernel.search import Bm25, UnitMatch, match_units
from ravi.kernel.storage.history import HistoryWindow, check_append, check_search
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_page, check_scope


@dataclass
class _Session:
    messages: list[ChatMessage] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    before: list[int] = field(default_factory=lambda: [0])  # stored tokens before each position (and the total)
    systems: list[int] = field(default_factory=list)  # positions of the system messages
    index: Bm25 | None = None  # built on the first search, extended by later ones

    def add(self, message: ChatMessage, run_id: str) -> None:
        if message.role == "system":
            self.systems.append(len(self.messages))
        self.ids.add(message.id)
        self.messages.append(message)
        self.runs.append(run_id)
        self.before.append(self.before[-1] + stored_tokens(message))


class InMemoryHistoryProvider(Closeable):
    """Transcripts in a dict, keyed by ``(agent_id, session_id)``; each message tagged with its ``run_id``.

    Messages are immutable, so readers get the stored objects in a fresh list: changing the list changes
    nothing here, and the messages themselves cannot be changed. Operations never await, so each is atomic
    with respect to other tasks on the event loop. Not shared between processes: use the Redis or Postgres
    provider for that.

    Example:
        >>> import asyncio
        >>> history = InMemoryHistoryProvider()
        >>> asyncio.run(history.append("agent", ChatMessage.user("hi"), session_id="s1"))
        >>> asyncio.run(history.count_messages("agent", session_id="s1"))
        1
    """

    Options = NoOptions
    """The store's options model, for configuration."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], _Session] = {}

    def _session(self, agent_id: str, session_id: str) -> _Session | None:
        check_scope(agent_id=agent_id, session_id=session_id)
        return self._sessions.get((agent_id, session_id))

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session (a message id already there is ignored)."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        """Add messages at the end of the session, all or none."""
        check_append(agent_id, session_id, run_id, messages)
        session = self._sessions.setdefault((agent_id, session_id), _Session())
        for message in messages:
            if message.id not in session.ids:
                session.add(message, run_id)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, from ``offset``, at most ``limit``."""
        check_page(limit, offset)
        session = self._session(agent_id, session_id)
        if session is None:
            return []
        end = None if limit is None else offset + limit
        return session.messages[offset:end]

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the session; returns how many messages it held."""
        check_scope(agent_id=agent_id, session_id=session_id)
        session = self._sessions.pop((agent_id, session_id), None)
        return 0 if session is None else len(session.messages)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove the messages ``run_id`` wrote to the session; returns how many."""
        check_scope(run_id=run_id)
        session = self._session(agent_id, session_id)
        if session is None:
            return 0
        removed = session.runs.count(run_id)
        if removed:
            kept = _Session()
            for m, r in zip(session.messages, session.runs, strict=True):
                if r != run_id:
                    kept.add(m, r)
            self._sessions[(agent_id, session_id)] = kept
        return removed

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        """The newest messages past ``tokens`` stored tokens and the system messages before them
        (``WindowReader``): O(log n) to find the start, then O(window)."""
        check_page(tokens, 0)
        session = self._session(agent_id, session_id)
        if session is None:
            return HistoryWindow([], 0, True)
        before, messages = session.before, session.messages
        # the latest start whose tail passes ``tokens``: before[start] < total - tokens
        start = max(0, bisect_left(before, before[-1] - tokens) - 1)
        while start > 0 and messages[start].role in ("tool", "system"):
            start -= 1
        systems = session.systems[: bisect_left(session.systems, start)]
        head = [messages[i] for i in systems]
        return HistoryWindow([*head, *messages[start:]], len(head), len(head) == start, before[start])

    async def search_units(
        self, agent_id: str, *, session_id: str, query: str, before: int, limit: int
    ) -> list[UnitMatch]:
        """The units before offset ``before`` that best match ``query`` by BM25 (``HistorySearcher``). The
        session's index is built on its first search and then extended with what was appended since."""
        check_search(query, before, limit)
        session = self._session(agent_id, session_id)
        if session is None or not limit:
            return []
        if session.index is None:
            session.index = Bm25()
        session.index.extend(session.messages)
        stop = bisect_left(session.before, before, hi=len(session.messages))
        scores = session.index.scores(query)
        return match_units(
            session.messages, scores, before=session.before, systems=session.systems, stop=stop, limit=limit
        )

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted."""
        check_scope(agent_id=agent_id)
        check_page(limit, 0)
        return sorted(s for (a, s), session in self._sessions.items() if a == agent_id and session.messages)[:limit]

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds."""
        session = self._session(agent_id, session_id)
        return 0 if session is None else len(session.messages)


__all__ = ["InMemoryHistoryProvider", "check_page", "check_scope"]
