"""``PostgresSummaryStore``: summaries as derived records beside the history, in PostgreSQL."""

from __future__ import annotations

from ravi.capabilities.postgres._db import Migration, PostgresStore
from ravi.capabilities.postgres.options import PostgresSummaryOptions
from ravi.kernel.values import check_span, check_summary

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
]


class PostgresSummaryStore(PostgresStore):
    """The ``SummaryStore`` contract on PostgreSQL: one row per span, the first text kept
    (``ON CONFLICT DO NOTHING``), shared by every process that reads the same schema."""

    Options = PostgresSummaryOptions
    component = "summaries"
    migrations = MIGRATIONS

    @property
    def _table(self) -> str:
        return self.db.table("summaries")

    async def get_summary(self, span_id: str) -> str | None:
        """The summary of the span, or ``None``."""
        check_span(span_id)
        value = await self.db.fetchval(f"SELECT text FROM {self._table} WHERE span_id = $1", span_id)
        return None if value is None else str(value)

    async def put_summary(self, span_id: str, text: str) -> None:
        """Keep ``text`` as the span's summary unless it has one."""
        check_span(span_id)
        check_summary(text)
        await self.db.execute(
            f"INSERT INTO {self._table} (span_id, text) VALUES ($1, $2) ON CONFLICT (span_id) DO NOTHING", span_id, text
        )


__all__ = ["PostgresSummaryStore"]
