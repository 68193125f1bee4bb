"""The engine's home for per-session state.

Every cache a strategy keeps about a session (a memo of its last input, a watermark's anchor, a recall index)
lives in the :class:`~ravi.kernel.agent.SessionState` of that session, which the pipeline keeps in its
:class:`SessionStates`: one state per ``(agent_id, session_id)``, bounded, least recently used dropped first.
Nothing is keyed by the messages themselves, so two sessions that share a message (a module-level system
prompt, say) never see each other's state.
"""

from __future__ import annotations

from collections import OrderedDict

from ravi.kernel.agent import SessionContext, SessionState
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import TokenCounter


class SessionStates:
    """The state of each session a pipeline serves, by ``(agent_id, session_id)``; at most ``max_sessions``
    are kept, the least recently used dropped first (dropping only costs the next window of that session some
    speed: strategies rebuild what they need)."""

    def __init__(self, max_sessions: int = 1_024) -> None:
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise InvalidArgument(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
        self.max_sessions = max_sessions
        self._states: OrderedDict[tuple[str, str], SessionState] = OrderedDict()

    def get(self, agent_id: str, session_id: str) -> SessionState:
        """The state of the session, created empty the first time."""
        key = (agent_id, session_id)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = SessionState()
            while len(self._states) > self.max_sessions:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(key)
        return state

    def find(self, agent_id: str, session_id: str) -> SessionState | None:
        """The state of the session, or ``None`` when none is kept."""
        return self._states.get((agent_id, session_id))

    def renew(self, agent_id: str, session_id: str) -> SessionState:
        """A new, empty state for the session in place of the one kept (whoever holds the old one may go on
        writing into it: nothing reads it here again)."""
        self._states.pop((agent_id, session_id), None)
        return self.get(agent_id, session_id)

    def drop(self, agent_id: str, session_id: str) -> None:
        """Forget the session (after it was cleared, say)."""
        self._states.pop((agent_id, session_id), None)

    def __len__(self) -> int:
        return len(self._states)


def counter_of(own: TokenCounter | None, session: SessionContext | None, default: TokenCounter) -> TokenCounter:
    """The counter a strategy uses: its own when it names one, else the session's (the pipeline's), else
    ``default``."""
    if own is not None:
        return own
    if session is not None and session.counter is not None:
        return session.counter
    return default


__all__ = ["SessionStates", "counter_of"]
