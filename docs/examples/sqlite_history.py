"""A complete HistoryProvider on SQLite, outside the ravi packages: the worked example of docs/conformance.md.

Messages are stored as JSON (``ChatMessage.model_dump_json``) with their position, run and id, so the session
order is the insertion order and a retried append of the same message is ignored by a unique index; a different
message under a held id is refused (``MessageConflict``), the whole batch with it. Reads build them back with
``messages_from_json``, as Ravi's own stores do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ravi.kernel.errors import InvalidArgument, MessageConflict
from ravi.kernel.messages import ChatMessage, messages_from_json
from ravi.kernel.storage import check_append

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    agent_id   TEXT NOT NULL,
    session_id TEXT NOT NULL,
    position   INTEGER NOT NULL,
    run_id     TEXT NOT NULL,
    message_id TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id, position),
    UNIQUE (agent_id, session_id, message_id)
);
CREATE INDEX IF NOT EXISTS messages_by_run ON messages (agent_id, session_id, run_id);
"""


def _check(**ids: object) -> None:
    for name, value in ids.items():
        if not isinstance(value, str) or (not value and name != "run_id"):
            raise InvalidArgument(f"{name} must be a non-empty string")


class SQLiteHistoryProvider:
    """Conversation history in one SQLite file (``":memory:"`` by default).

    SQLite calls are quick and never await, so each method is atomic with respect to other tasks.
    """

    def __init__(self, path: str = ":memory:") -> None:
        self._db = sqlite3.connect(path)
        self._db.executescript(SCHEMA)

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        check_append(agent_id, session_id, run_id, messages)  # the kernel's checks: scope, items, in-batch ids
        with self._db:  # one transaction: all or nothing (an exception inside rolls it back)
            (last,) = self._db.execute(
                "SELECT COALESCE(MAX(position), -1) FROM messages WHERE agent_id = ? AND session_id = ?",
                (agent_id, session_id),
            ).fetchone()
            for message in messages:
                body = message.model_dump_json()
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO messages VALUES (?, ?, ?, ?, ?, ?)",
                    (agent_id, session_id, last + 1, run_id, message.id, body),
                )
                if not cursor.rowcount:  # the id is held: the same message (a retry), or a broken promise
                    (held,) = self._db.execute(
                        "SELECT body FROM messages WHERE agent_id = ? AND session_id = ? AND message_id = ?",
                        (agent_id, session_id, message.id),
                    ).fetchone()
                    if held != body:
                        raise MessageConflict(message.id)
                last += cursor.rowcount

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        _check(agent_id=agent_id, session_id=session_id)
        if (limit is not None and limit < 0) or offset < 0:
            raise InvalidArgument("limit and offset must be >= 0")
        rows = self._db.execute(
            "SELECT body FROM messages WHERE agent_id = ? AND session_id = ? ORDER BY position LIMIT ? OFFSET ?",
            (agent_id, session_id, -1 if limit is None else limit, offset),
        ).fetchall()
        return messages_from_json(body for (body,) in rows)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        _check(agent_id=agent_id, session_id=session_id)
        with self._db:
            return self._db.execute(
                "DELETE FROM messages WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)
            ).rowcount

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        _check(agent_id=agent_id, session_id=session_id, run_id=run_id)
        with self._db:
            return self._db.execute(
                "DELETE FROM messages WHERE agent_id = ? AND session_id = ? AND run_id = ?",
                (agent_id, session_id, run_id),
            ).rowcount

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        _check(agent_id=agent_id, session_id=session_id)
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM messages WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)
        ).fetchone()
        return int(count)

    def close(self) -> None:
        self._db.close()
