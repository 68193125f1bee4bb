"""``InMemoryStateStore``: session state (``ShortTermMemory``) in process memory."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from ravi.kernel.closing import Closeable
from ravi.kernel.options import NoOptions
from ravi.kernel.values import check_scope, json_copy


class InMemoryStateStore(Closeable):
    """One JSON object per session. Values are copied in and out through JSON, so what comes back is what
    a database backend would return (tuples become lists) and no caller can change another's copy.
    ``update_state`` merges under a ``threading.Lock`` and never awaits, so concurrent updaters never lose each
    other's keys, whichever event loop or thread they run on. Ravi's own records are kept apart, in
    ``reserved()``."""

    Options = NoOptions
    """The store's options model, for configuration."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._lock = threading.Lock()
        self._reserved: InMemoryStateStore | None = None

    def reserved(self) -> InMemoryStateStore:
        """The place of Ravi's own records (:class:`~ravi.kernel.storage.ReservedState`): a store of its own
        beside this one's sessions, the same one at every call."""
        with self._lock:
            if self._reserved is None:
                self._reserved = InMemoryStateStore()
            return self._reserved

    async def get_state(self, session_id: str) -> dict[str, Any]:
        """The session's state; ``{}`` when none was set."""
        check_scope(session_id=session_id)
        raw = self._states.get(session_id)
        return {} if raw is None else dict(json.loads(raw))

    async def set_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        """Replace the session's state."""
        check_scope(session_id=session_id)
        self._states[session_id] = json.dumps(json_copy(state))

    async def update_state(self, session_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the top level of the state; returns the merged state."""
        check_scope(session_id=session_id)
        keys = json_copy(patch, "patch")
        with self._lock:
            raw = self._states.get(session_id)
            merged = {} if raw is None else dict(json.loads(raw))
            merged.update(keys)
            self._states[session_id] = json.dumps(merged)
        return merged

    async def clear(self, session_id: str) -> None:
        """Forget the session's state."""
        check_scope(session_id=session_id)
        self._states.pop(session_id, None)


__all__ = ["InMemoryStateStore", "json_copy"]
