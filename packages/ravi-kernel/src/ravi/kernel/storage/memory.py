"""Session state and long-term memory (004): ``ShortTermMemory``, ``Memory``, ``LongTermMemory``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from pydantic import Field

from ravi.kernel.messages import FrozenDict, ReadOnlyDict
from ravi.kernel.storage._common import _FROZEN, JSON, _now
from ravi.kernel.values import Value


@runtime_checkable
class ShortTermMemory(Protocol):
    """A JSON object of state per session (scratchpad, flags, counters).

    Every method refuses a ``session_id`` that is not a non-empty string of valid text with ``InvalidArgument``
    (:func:`~ravi.kernel.values.check_scope`), and a state no store keeps exactly (``NaN``, infinities, ``-0.0``,
    lone surrogates, keys that are not strings, nesting past ``MAX_DEPTH``) the same way, keeping what was
    stored (:func:`~ravi.kernel.values.json_copy` checks and copies it).
    """

    async def get_state(self, session_id: str) -> dict[str, JSON]:
        """The session's state; ``{}`` when none was set."""
        ...

    async def set_state(self, session_id: str, state: Mapping[str, JSON]) -> None:
        """Replace the session's state.

        Raises:
            InvalidArgument: a bad ``session_id``, or ``state`` is not a JSON object every store keeps exactly.
        """
        ...

    async def update_state(self, session_id: str, patch: Mapping[str, JSON]) -> dict[str, JSON]:
        """Merge ``patch`` into the state atomically (top-level keys); returns the merged state.

        Concurrent updaters never lose each other's keys.

        Raises:
            InvalidArgument: a bad ``session_id``, or ``patch`` is not a JSON object every store keeps exactly.
        """
        ...

    async def clear(self, session_id: str) -> None:
        """Forget the session's state."""
        ...


@runtime_checkable
class ReservedState(Protocol):
    """A session-state store with a place of its own for Ravi's records, apart from every session's state.

    The sessions' states are the application's: any session id is one an application may use, read, write and
    clear. Records Ravi keeps in a state store for itself (the provider corrections,
    :class:`~ravi.agents.context.calibration.Calibration`) go to :meth:`reserved`, where no session id reaches.
    """

    def reserved(self) -> ShortTermMemory:
        """A state store over a place of its own in the same backend: its states are keyed by names no session's
        state shares, so no call with a session id reads, writes or clears them. It uses this store's
        connections: close this store, not it (closing it, where it can be closed, releases nothing, and it
        works for as long as this store does)."""
        ...


class Memory(Value):
    """A fact an agent keeps across sessions. ``score`` is set on search results (higher is closer)."""

    model_config = _FROZEN

    id: str
    agent_id: str
    namespace: str
    content: str
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)
    created_at: datetime = Field(default_factory=_now)
    expires_at: datetime | None = None
    score: float | None = None


@runtime_checkable
class LongTermMemory(Protocol):
    """Facts kept per ``(agent_id, namespace)``, found again by meaning."""

    async def save(
        self,
        agent_id: str,
        content: str,
        namespace: str = "default",
        ttl: timedelta | float | None = None,
        *,
        metadata: Mapping[str, JSON] | None = None,
    ) -> str:
        """Store a memory; returns its id. With ``ttl`` (seconds or a timedelta) it is gone after that time."""
        ...

    async def search(self, agent_id: str, query: str, namespace: str = "default", limit: int = 5) -> list[Memory]:
        """The memories closest in meaning to ``query``, closest first, each with its ``score``."""
        ...

    async def get(self, agent_id: str, memory_id: str, namespace: str = "default") -> Memory | None:
        """One memory by id, or ``None`` (also when expired)."""
        ...

    async def delete(self, agent_id: str, memory_id: str, namespace: str = "default") -> bool:
        """Remove one memory; ``False`` if it was not there."""
        ...

    async def clear(self, agent_id: str, namespace: str | None = None) -> int:
        """Remove the agent's memories in ``namespace`` (all namespaces when ``None``); returns how many."""
        ...


__all__ = ["LongTermMemory", "Memory", "ReservedState", "ShortTermMemory"]
