"""``PostgresSummaryStore``: summaries as derived records of a session, in PostgreSQL, on their own.

The history provider keeps its sessions' summaries itself (``PostgresHistoryProvider`` is a ``SummaryStore``,
and removes them with the messages): this store is for summaries kept apart from the history.
"""

from __future__ import annotations

from ravi.capabilities.postgres._db import Database, Migration, PostgresStore
from ravi.capabilities.postgres.options import PostgresSummaryOptions
from ravi.kernel.scope import Scope
from ravi.kernel.storage.summaries import check_summary_scope
from ravi.kernel.values import check_scope, check_span, check_summary

MIGRATIONS = [
    Migration(
        1,
        "summaries by span",
        """
CREATE TABLE {schema}."{prefix}summaries" (
    span_id    text PRIMARY KEY,
    text       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    Migration(
        2,
        "summaries by session, generation and span",
        """
-- A span id is unique within a session only: summaries are kept under the whole scope, each part a column of
-- its own (never a joined string). The summaries kept by span alone cannot be given a session, so they go;
-- they are derived records, written again when next needed.
DROP TABLE {schema}."{prefix}summaries";
CREATE TABLE {schema}."{prefix}summaries" (
    agent_id   text NOT NULL,
    session_id text NOT NULL,
    generation text NOT NULL,
    span_id    text NOT NULL,
    text       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, session_id, generation, span_id)
);
""",
    ),
]


def _generation(scope: Scope) -> str:
    """The generation column of ``scope``: ``"-"`` for none, else ``"+"`` and the generation (injective)."""
    return "-" if scope.generation is None else "+" + scope.generation


class PostgresSummaryStore(PostgresStore):
    """The ``SummaryStore`` contract on PostgreSQL: one row per ``(agent, session, generation, span)``, the
    first text kept (``ON CONFLICT DO NOTHING``), shared by every process that reads the same schema.

    It cannot see a session's generation, so it keeps what it is given under the full scope: a summary of
    another generation is never returned, since its scope differs.
    """

    Options = PostgresSummaryOptions
    component = "summaries"
    migrations = MIGRATIONS

    @property
    def _table(self) -> str:
        return self.db.table("summaries")

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The summary of the span in ``scope``, or ``None``."""
        check_summary_scope(scope)
        check_span(span_id)
        value = await self.db.fetchval(
            f"SELECT text FROM {self._table} WHERE agent_id = $1 AND session_id = $2 AND generation = $3 "
            "AND span_id = $4",
            scope.agent_id,
            scope.session_id,
            _generation(scope),
            span_id,
        )
        return None if value is None else str(value)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep ``text`` as the span's summary in ``scope`` unless it has one; returns ``True``."""
        check_summary_scope(scope)
        check_span(span_id)
        check_summary(text)
        await self.db.execute(
            f"INSERT INTO {self._table} (agent_id, session_id, generation, span_id, text) "
            "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            scope.agent_id,
            scope.session_id,
            _generation(scope),
            span_id,
            text,
        )
        return True

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove every summary of the session (of every session of the agent when ``session_id`` is ``None``),
        whatever its generation; returns how many."""
        return await _delete_summaries(self.db, self._table, agent_id, session_id)


async def _delete_summaries(db: Database, table: str, agent_id: str, session_id: str | None) -> int:
    """Delete the summaries of ``table`` of one session (of every session of the agent when ``session_id`` is
    ``None``), whatever their generation; returns how many. Shared by this store and the history's summaries."""
    check_scope(agent_id=agent_id)
    if session_id is None:
        status = await db.execute(f"DELETE FROM {table} WHERE agent_id = $1", agent_id)
    else:
        check_scope(session_id=session_id)
        status = await db.execute(f"DELETE FROM {table} WHERE agent_id = $1 AND session_id = $2", agent_id, session_id)
    return int(status.split()[-1])


__all__ = ["PostgresSummaryStore"]
