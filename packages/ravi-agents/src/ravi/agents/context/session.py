"""The engine's home for per-session state.

Every cache a strategy keeps about a session (a memo of its last input, a watermark's anchor, a recall index)
lives in the :class:`~ravi.kernel.agent.SessionState` of that session, which the pipeline keeps in its
:class:`SessionStates`: one state per ``(agent_id, session_id)``, bounded, least recently used dropped first.
Nothing is keyed by the messages themselves, so two sessions that share a message (a module-level system
prompt, say) never see each other's state.

A window takes its session's state for itself while it is assembled (:meth:`SessionStates.take`) and gives it
back when it is done: the memos in a state are updated field by field, and one shared by two windows at once
(threads of a web server's pool, each with its own event loop, or two tasks of one loop) could pair one window's
kept messages with the other's cost. A second window of the session meanwhile starts from an empty state, which
only costs it speed.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ravi.kernel.agent import SessionContext, SessionState
from ravi.kernel.errors import CompactionError, InvalidArgument
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage


class SessionRewritten(CompactionError):
    """A window's session changed generation after its read: a store search made for the window
    (:func:`~ravi.agents.context.recall_ranking.store_rankings`) may be of the new session, whose units do not go
    with the messages read. The pipeline reads the session again (``CompactionPipeline.window``); a strategy
    called on its own with such a session raises it (a ``CompactionError``)."""

    def __init__(self, agent_id: str, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} of agent {agent_id!r} changed (a clear, clear_run, replace_last or forget) "
            "after its messages were read: a store search found another session than the one read"
        )


class Lease:
    """A session's state taken by one window (:meth:`SessionStates.take`); give it back with
    :meth:`SessionStates.give_back`."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key


class SessionStates:
    """The state of each session a pipeline serves, by ``(agent_id, session_id)``; at most ``max_sessions``
    are kept, the least recently used dropped first (dropping only costs the next window of that session some
    speed: strategies rebuild what they need). Also the last window assembled of each session, with the
    generation it was assembled in.

    Safe to share between threads and event loops: every change is made under a lock held for no ``await``."""

    def __init__(self, max_sessions: int = 1_024) -> None:
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise InvalidArgument(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._states: OrderedDict[tuple[str, str], SessionState] = OrderedDict()  # those no window holds
        self._leases: dict[tuple[str, str], set[Lease]] = {}  # the windows under way, by session
        # the last window of each session, per generation it was assembled in (the last few): a window of a
        # generation since cleared elsewhere that ends after one of the new generation does not hide it
        self._windows: OrderedDict[tuple[str, str], dict[str | None, list[ChatMessage]]] = OrderedDict()
        # the epoch of each session dropped lately: a number of one count for all sessions. A session with no
        # entry (never dropped, or its entry trimmed) reads the highest epoch trimmed: a session's epoch never
        # comes back to one a caller read before its drop (a trim only makes a window keep nothing, never more)
        self._drops = itertools.count(1)
        self._dropped: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._trimmed = 0

    def get(self, agent_id: str, session_id: str) -> SessionState:
        """The state of the session, created empty the first time (a window under way meanwhile holds a state of
        its own, and the last one to finish is the one kept)."""
        key = (agent_id, session_id)
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = SessionState()
                self._trim(self._states)
            else:
                self._states.move_to_end(key)
            return state

    def take(self, agent_id: str, session_id: str, epoch: int | None = None) -> tuple[SessionState, Lease]:
        """The session's state for one window alone: the one kept (no longer kept while the window holds it), or
        an empty one when none is kept or another window holds it. With ``epoch`` (:meth:`epoch`, read when the
        caller read what the window is made of), a session dropped since gives an empty state under a lease that
        keeps nothing: the window is of a transcript that is gone."""
        key = (agent_id, session_id)
        lease = Lease(key)
        with self._lock:
            if epoch is not None and self._dropped.get(key, self._trimmed) != epoch:
                return SessionState(), lease  # never held: give_back keeps nothing of it
            state = self._states.pop(key, None)
            self._leases.setdefault(key, set()).add(lease)
        return (state if state is not None else SessionState()), lease

    def epoch(self, agent_id: str, session_id: str) -> int:
        """Which drop of the session (:meth:`drop`) the states kept now follow: a number that changes at every
        drop (and may change when many other sessions are dropped). A caller that reads a session's turns itself
        reads it with them and gives it to :meth:`take` (``WindowRequest.epoch``): a clear between the two keeps
        nothing of the window."""
        with self._lock:
            return self._dropped.get((agent_id, session_id), self._trimmed)

    def give_back(
        self,
        lease: Lease,
        state: SessionState | None,
        window: Sequence[ChatMessage] | None = None,
        generation: str | None = None,
    ) -> None:
        """End ``lease``: ``state`` (what the window's state is now) is kept as the session's, and ``window`` as
        its last of ``generation`` (:meth:`note_window`), unless the session was dropped since the window took it
        (its state and window came from a transcript that is gone, even when a window taken after the drop is
        under way); ``None`` keeps nothing (a window that failed half-way)."""
        key = lease.key
        with self._lock:
            leases = self._leases.get(key)
            if leases is None or lease not in leases:
                return  # dropped meanwhile
            leases.discard(lease)
            if not leases:
                del self._leases[key]
            if state is not None:
                self._states[key] = state
                self._states.move_to_end(key)
                self._trim(self._states)
            if window is not None:
                self._keep_window(key, window, generation)

    def find(self, agent_id: str, session_id: str) -> SessionState | None:
        """The state of the session, or ``None`` when none is kept (or a window holds it)."""
        with self._lock:
            return self._states.get((agent_id, session_id))

    def note_window(
        self, agent_id: str, session_id: str, window: Sequence[ChatMessage], generation: str | None
    ) -> None:
        """Keep ``window`` as the session's last of ``generation`` (``None``: unknown), for a window assembled in a
        ``SessionContext`` of :meth:`get` (a window under a lease is kept by :meth:`give_back`)."""
        key = (agent_id, session_id)
        with self._lock:
            if key not in self._leases and key not in self._states:
                return  # dropped while it was assembled
            self._keep_window(key, window, generation)

    def _keep_window(self, key: tuple[str, str], window: Sequence[ChatMessage], generation: str | None) -> None:
        kept = self._windows.setdefault(key, {})
        kept.pop(generation, None)
        kept[generation] = list(window)  # the newest last
        while len(kept) > _GENERATIONS:
            del kept[next(iter(kept))]
        self._windows.move_to_end(key)
        self._trim(self._windows)

    def last_window(
        self, agent_id: str, session_id: str, generation: str | None = None
    ) -> tuple[list[ChatMessage] | None, str | None]:
        """The session's last window of ``generation`` (with ``None``: the last one kept, of any generation), and
        the generation it was assembled in; ``(None, None)`` when none is kept."""
        with self._lock:
            kept = self._windows.get((agent_id, session_id))
            if not kept:
                return None, None
            if generation is None:
                generation = next(reversed(kept))
            window = kept.get(generation)
            return (None, None) if window is None else (window, generation)

    def drop(self, agent_id: str, session_id: str) -> None:
        """Forget the session (after it was cleared, say): its state, its last window, and the states of the
        windows under way, which are not kept when they finish."""
        key = (agent_id, session_id)
        with self._lock:
            self._states.pop(key, None)
            self._windows.pop(key, None)
            self._leases.pop(key, None)
            self._dropped[key] = next(self._drops)
            self._dropped.move_to_end(key)
            while len(self._dropped) > _DROPS * self.max_sessions:
                self._trimmed = max(self._trimmed, self._dropped.popitem(last=False)[1])

    def _trim(self, kept: OrderedDict[tuple[str, str], Any]) -> None:
        while len(kept) > self.max_sessions:
            kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._states)


_DROPS = 4
"""How many times ``max_sessions`` sessions' epochs :class:`SessionStates` keeps."""
_GENERATIONS = 2
"""How many generations of a session :meth:`SessionStates.note_window` keeps a last window of."""


def counter_of(own: TokenCounter | None, session: SessionContext | None, default: TokenCounter) -> TokenCounter:
    """The counter a strategy uses: its own when it names one, else the session's (the pipeline's), else
    ``default``."""
    if own is not None:
        return own
    if session is not None and session.counter is not None:
        return session.counter
    return default


__all__ = ["Lease", "SessionRewritten", "SessionStates", "counter_of"]
