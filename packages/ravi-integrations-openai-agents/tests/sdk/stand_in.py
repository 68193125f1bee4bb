"""What the SDK's own session tests import, pointing at Ravi.

``SQLiteSession`` here is a :class:`RaviSession` under the name the SDK's tests construct. SQLite sessions that
name the same database file share it; here every database path is an agent scope of one Ravi history store, and
each ``":memory:"`` session gets a scope of its own. The store is in memory, or, with ``RAVI_SDK_SUITE=configured``,
the history store that ``ravi.toml`` and ``RAVI_HISTORY__*`` configure (how the suite runs on Postgres and Redis).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from ravi.agents.context import InMemoryHistoryProvider
from ravi.agents.settings import build_store
from ravi.integrations.openai_agents import RaviSession
from ravi.kernel.storage import HistoryProvider

_store: HistoryProvider | None = None
_RUN = uuid.uuid4().hex[:8]


def store() -> HistoryProvider:
    global _store
    if _store is None:
        _store = (
            build_store("history") if os.environ.get("RAVI_SDK_SUITE") == "configured" else InMemoryHistoryProvider()
        )
    return _store


def scope_of(db_path: str | Path) -> str:
    """The agent scope standing for a database file: one per path, a new one for each ``:memory:``."""
    key = uuid.uuid4().hex if str(db_path) == ":memory:" else str(db_path)
    return f"sdk-{_RUN}-{uuid.uuid5(uuid.NAMESPACE_URL, key).hex[:16]}"


class SQLiteSession(RaviSession):
    """A RaviSession built with ``SQLiteSession``'s arguments."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        create_tables: bool = False,
        *,
        session_settings: Any = None,
    ) -> None:
        super().__init__(session_id, store(), agent_id=scope_of(db_path), session_settings=session_settings)

    def close(self) -> None:
        """Nothing to close: the store outlives the session object."""


def get_text_message(content: str) -> ResponseOutputMessage:
    """An assistant message the scripted model returns (the SDK's test helper of this name)."""
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )
