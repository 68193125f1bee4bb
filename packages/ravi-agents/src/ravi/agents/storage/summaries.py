"""``InMemorySummaryStore``: summaries as derived records of a session, in process memory."""

from __future__ import annotations

import threading
from collections import OrderedDict

from ravi.agents.storage.options import InMemorySummaryOptions
from ravi.kernel.closing import Closeable
from ravi.kernel.scope import Scope
from ravi.kernel.storage.summaries import check_summary_scope
from ravi.kernel.values import check_scope, check_span, check_summary


class InMemorySummaryStore(Closeable):
    """Up to ``max_entries`` summaries, the least recently used dropped first; the first text of a span wins.

    A store on its own, beside any history: it cannot see a session's generation, so it keeps what it is given
    under the full scope (a summary of another generation is never returned, since its scope differs).
    ``InMemoryHistoryProvider`` keeps the summaries of its own sessions and drops them when a session is cleared.
    Each call holds a ``threading.Lock`` and never awaits, so tasks of any event loop, in any thread, may share it.
    """

    Options = InMemorySummaryOptions
    """The store's options model, for configuration."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._texts: OrderedDict[tuple[str, str, str | None, str], str] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The summary of the span in ``scope``, or ``None``."""
        check_summary_scope(scope)
        check_span(span_id)
        key = (scope.agent_id, scope.session_id, scope.generation, span_id)
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
        return text

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep ``text`` as the span's summary in ``scope`` unless it has one."""
        check_summary_scope(scope)
        check_span(span_id)
        check_summary(text)
        key = (scope.agent_id, scope.session_id, scope.generation, span_id)
        with self._lock:
            self._texts.setdefault(key, text)
            self._texts.move_to_end(key)
            while len(self._texts) > self._max:
                self._texts.popitem(last=False)
        return True

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove the session's summaries (every session's of the agent when ``session_id`` is ``None``)."""
        check_scope(agent_id=agent_id)
        if session_id is not None:
            check_scope(session_id=session_id)
        with self._lock:
            doomed = [k for k in self._texts if k[0] == agent_id and (session_id is None or k[1] == session_id)]
            for key in doomed:
                del self._texts[key]
        return len(doomed)


__all__ = ["InMemorySummaryStore", "check_span", "check_summary_scope"]
