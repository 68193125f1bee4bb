"""``PostgresHistoryProvider``: durable conversation history on PostgreSQL."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from ravi.capabilities.postgres._db import Migration, PoolOptions, PostgresStore
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage.history import check_append
from ravi.kernel.values import check_page, check_scope

MIGRATIONS = [
    Migration(
        1,
        "sessions and messages",
        """
CREATE TABLE {schema}."{prefix}sessions" (
    agent_id   text   NOT NULL,
    session_id text   NOT NULL,
    next_seq   bigint NOT NULL DEFAULT 0,
    epoch      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, session_id)
);
CREATE TABLE {schema}."{prefix}messages" (
    agent_id   text   NOT NULL,
    session_id text   NOT NULL,
    seq        bigint NOT NULL,
    run_id     text   NOT NULL,
    message_id text   NOT NULL,
    body       text   NOT NULL,
    PRIMARY KEY (agent_id, session_id, seq),
    UNIQUE (agent_id, session_id, message_id)
);
CREATE INDEX "{prefix}messages_by_run" ON {schema}."{prefix}messages" (agent_id, session_id, run_id);

-- One round trip per batch. The session row is locked first, so appends to one session are serialised and
-- numbered without gaps; each later statement takes a fresh snapshot and sees every earlier append.
CREATE FUNCTION {schema}."{prefix}append_messages"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[]
) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    base bigint;
    added integer;
BEGIN
    INSERT INTO {schema}."{prefix}sessions" AS s (agent_id, session_id) VALUES (p_agent, p_session)
        ON CONFLICT (agent_id, session_id) DO UPDATE SET next_seq = s.next_seq
        RETURNING s.next_seq INTO base;
    WITH incoming AS (
        SELECT t.message_id, t.body, t.ord FROM unnest(p_ids, p_bodies) WITH ORDINALITY AS t(message_id, body, ord)
    ), firsts AS (
        SELECT DISTINCT ON (message_id) message_id, body, ord FROM incoming ORDER BY message_id, ord
    ), fresh AS (
        SELECT f.message_id, f.body, f.ord FROM firsts f
        WHERE NOT EXISTS (SELECT 1 FROM {schema}."{prefix}messages" m
                          WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.message_id = f.message_id)
    )
    INSERT INTO {schema}."{prefix}messages" (agent_id, session_id, seq, run_id, message_id, body)
    SELECT p_agent, p_session, base + row_number() OVER (ORDER BY ord) - 1, p_run, message_id, body FROM fresh;
    GET DIAGNOSTICS added = ROW_COUNT;
    UPDATE {schema}."{prefix}sessions" SET next_seq = base + added
        WHERE agent_id = p_agent AND session_id = p_session;
    RETURN added;
END
$fn$;
""",
    ),
]


@dataclass(frozen=True)
class _Cached:
    """A session as read at one moment: replaced, never changed."""

    epoch: int
    next_seq: int
    messages: list[ChatMessage]


class PostgresHistoryProvider(PostgresStore):
    """The ``HistoryProvider`` contract on PostgreSQL (asyncpg, a connection pool).

    * Each session's messages are numbered in a strict order with no gaps or duplicates, even with many
      concurrent writers (appends to one session are serialised by a row lock on the session).
    * ``append_many`` is one round trip; a retried append of a message id already in the session is ignored.
    * ``get_messages`` is one query served by the primary key. Messages are immutable, so the provider keeps
      the sessions it read last (``cache_sessions`` of them) and fetches only what was appended since; a
      ``clear`` or ``clear_run`` from any process bumps the session's epoch and invalidates the copy.
    * ``clear_run`` and ``count_messages`` use indexes, not scans.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: Schema of the tables (created and migrated on first use).
        table_prefix: Prefix of the table names.
        min_size, max_size: Connection pool size.
        cache_sessions: How many sessions to keep parsed in memory (0 turns the cache off).

    Example:
        >>> history = PostgresHistoryProvider("postgresql://localhost/app")  # doctest: +SKIP
        >>> await history.append("agent", ChatMessage.user("hi"), session_id="s1")  # doctest: +SKIP
    """

    component = "history"
    migrations = MIGRATIONS

    def __init__(self, dsn: str, *, cache_sessions: int = 64, **options: Unpack[PoolOptions]) -> None:
        super().__init__(dsn, **options)
        self._messages = self.db.table("messages")
        self._sessions = self.db.table("sessions")
        self._append = f'"{self.db.schema}"."{self.db.prefix}append_messages"'
        self._cache: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        self._cache_size = cache_sessions

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        """Add messages at the end of the session in one round trip, all or none."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return
        ids = [m.id for m in messages]
        bodies = [m.model_dump_json() for m in messages]
        await self.db.fetchval(f"SELECT {self._append}($1, $2, $3, $4, $5)", agent_id, session_id, run_id, ids, bodies)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, from ``offset``, at most ``limit``; one query."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_page(limit, offset)
        if self._cache_size == 0:
            rows = await self.db.fetch(
                f"SELECT body FROM {self._messages} WHERE agent_id = $1 AND session_id = $2 ORDER BY seq "
                "LIMIT $3 OFFSET $4",
                agent_id,
                session_id,
                limit,
                offset,
            )
            return [ChatMessage.model_validate_json(r["body"]) for r in rows]
        messages = await self._refresh(agent_id, session_id)
        end = None if limit is None else offset + limit
        return messages[offset:end]

    async def _refresh(self, agent_id: str, session_id: str) -> list[ChatMessage]:
        key = (agent_id, session_id)
        # A snapshot: the copy is never changed in place, so concurrent readers that start from the same copy
        # each build their own newer one from it, and none can add the same rows twice.
        base = self._cache.get(key)
        # One query: the session's epoch and next number, and every message appended since the copy was made.
        rows = await self.db.fetch(
            f"SELECT s.epoch, s.next_seq, m.seq, m.body FROM {self._sessions} s "
            f"LEFT JOIN {self._messages} m ON m.agent_id = s.agent_id AND m.session_id = s.session_id "
            "AND m.seq >= CASE WHEN s.epoch = $3 THEN $4 ELSE 0 END "
            "WHERE s.agent_id = $1 AND s.session_id = $2 ORDER BY m.seq",
            agent_id,
            session_id,
            base.epoch if base else -1,
            base.next_seq if base else 0,
        )
        if not rows:
            self._cache.pop(key, None)
            return []
        epoch, next_seq = rows[0]["epoch"], rows[0]["next_seq"]
        fresh = [ChatMessage.model_validate_json(r["body"]) for r in rows if r["body"] is not None]
        if base is not None and base.epoch == epoch:
            copy = _Cached(epoch, next_seq, base.messages + fresh if fresh else base.messages)
        else:
            copy = _Cached(epoch, next_seq, fresh)
        current = self._cache.get(key)
        # Keep whichever copy is newer: a slower reader must not put back an older one (or one of a cleared epoch).
        if current is None or current is base or (current.epoch, current.next_seq) <= (copy.epoch, copy.next_seq):
            self._cache[key] = copy
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return copy.messages  # never changed in place: callers get slices of it

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the session; returns how many messages it held."""
        check_scope(agent_id=agent_id, session_id=session_id)
        async with self.db.connection() as connection, connection.transaction():
            await connection.execute(
                f"UPDATE {self._sessions} SET epoch = epoch + 1, next_seq = 0 WHERE agent_id = $1 AND session_id = $2",
                agent_id,
                session_id,
            )
            status = await connection.execute(
                f"DELETE FROM {self._messages} WHERE agent_id = $1 AND session_id = $2", agent_id, session_id
            )
        self._cache.pop((agent_id, session_id), None)
        return int(status.split()[-1])

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages ``run_id`` wrote to the session; returns how many."""
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        async with self.db.connection() as connection, connection.transaction():
            status = await connection.execute(
                f"DELETE FROM {self._messages} WHERE agent_id = $1 AND session_id = $2 AND run_id = $3",
                agent_id,
                session_id,
                run_id,
            )
            removed = int(status.split()[-1])
            if removed:
                await connection.execute(
                    f"UPDATE {self._sessions} SET epoch = epoch + 1 WHERE agent_id = $1 AND session_id = $2",
                    agent_id,
                    session_id,
                )
        if removed:
            self._cache.pop((agent_id, session_id), None)
        return removed

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted (byte order)."""
        check_scope(agent_id=agent_id)
        check_page(limit, 0)
        rows = await self.db.fetch(
            f"SELECT s.session_id FROM {self._sessions} s WHERE s.agent_id = $1 AND EXISTS ("
            f"SELECT 1 FROM {self._messages} m WHERE m.agent_id = s.agent_id AND m.session_id = s.session_id) "
            'ORDER BY s.session_id COLLATE "C" LIMIT $2',
            agent_id,
            limit,
        )
        return [r["session_id"] for r in rows]

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds (an index-only count)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        count = await self.db.fetchval(
            f"SELECT count(*) FROM {self._messages} WHERE agent_id = $1 AND session_id = $2", agent_id, session_id
        )
        return int(count)


__all__ = ["PostgresHistoryProvider"]
