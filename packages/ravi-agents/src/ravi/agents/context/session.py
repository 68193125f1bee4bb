"""The engine's home for per-session state, and how strategies are called with their session.

Every cache a strategy keeps about a session (a memo of its last input, a watermark's anchor, a recall index)
lives in the :class:`~ravi.kernel.agent.SessionContext` of that session, which the pipeline builds from its
:class:`SessionStates`: one state per ``(agent_id, session_id)``, bounded, least recently used dropped first.
Nothing is keyed by the messages themselves, so two sessions that share a message (a module-level system
prompt, say) never see each other's state.
"""

from __future__ import annotations

import inspect
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ravi.kernel.agent import CompactionStrategy, SessionContext
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage

T = TypeVar("T")


class SessionStates:
    """The state of each session a pipeline serves, by ``(agent_id, session_id)``; at most ``max_sessions``
    are kept, the least recently used dropped first (dropping only costs the next window of that session some
    speed: strategies rebuild what they need)."""

    def __init__(self, max_sessions: int = 1_024) -> None:
        if not isinstance(max_sessions, int) or max_sessions < 1:
            raise InvalidArgument(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
        self.max_sessions = max_sessions
        self._states: OrderedDict[tuple[str, str], dict[object, Any]] = OrderedDict()

    def get(self, agent_id: str, session_id: str) -> dict[object, Any]:
        """The state of the session, created empty the first time."""
        key = (agent_id, session_id)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = {}
            while len(self._states) > self.max_sessions:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(key)
        return state

    def drop(self, agent_id: str, session_id: str) -> None:
        """Forget the session (after it was cleared, say)."""
        self._states.pop((agent_id, session_id), None)

    def __len__(self) -> int:
        return len(self._states)


_SOLO: weakref.WeakKeyDictionary[object, SessionContext] = weakref.WeakKeyDictionary()


def own_session(owner: object, session: SessionContext | None) -> SessionContext:
    """``session``, or, for a strategy called without one, a session of the strategy's own: all calls without a
    session are then one session to it (pass ``session=`` to serve several)."""
    if session is not None:
        return session
    solo = _SOLO.get(owner)
    if solo is None:
        solo = _SOLO[owner] = SessionContext("", "")
    return solo


def counter_of(own: TokenCounter | None, session: SessionContext | None, default: TokenCounter) -> TokenCounter:
    """The counter a strategy uses: its own when it names one, else the session's (the pipeline's), else
    ``default``."""
    if own is not None:
        return own
    if session is not None and session.counter is not None:
        return session.counter
    return default


_ACCEPTS: dict[Any, bool] = {}


def accepts_session(function: Callable[..., Any]) -> bool:
    """Whether ``function`` takes a ``session`` argument (or ``**kwargs``)."""
    key = getattr(function, "__func__", function)
    known = _ACCEPTS.get(key)
    if known is None:
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):
            parameters = []  # type: ignore[assignment]
        known = _ACCEPTS[key] = any(p.name == "session" or p.kind is p.VAR_KEYWORD for p in parameters)
    return known


async def run_strategy(
    strategy: CompactionStrategy, history: Sequence[ChatMessage], session: SessionContext | None
) -> list[ChatMessage]:
    """``strategy.compact(history)``, with the session when the strategy takes one."""
    if session is not None and accepts_session(strategy.compact):
        return await strategy.compact(history, session=session)  # type: ignore[call-arg]
    return await strategy.compact(history)


__all__ = ["SessionStates", "accepts_session", "counter_of", "own_session", "run_strategy"]
