"""``PostgresSummaryStore``: summaries as derived records beside the history, in PostgreSQL."""

from __future__ import annotations

from ravi.agents.storage.summaries import check_span
from ravi.capabilities.postgres._db import Database, Migration
from ravi.kernel.errors import InvalidArgument

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


class PostgresSummaryStore:
    """The ``SummaryStore`` contract on PostgreSQL: one row per span, the first text kept
    (``ON CONFLICT DO NOTHING``), shared by every process that reads the same schema."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "ravi",
        table_prefix: str = "",
        min_size: int = 1,
        max_size: int = 5,
        command_timeout: float = 30.0,
    ) -> None:
        self.db = Database(
            dsn,
            schema=schema,
            table_prefix=table_prefix,
            min_size=min_size,
            max_size=max_size,
            command_timeout=command_timeout,
        )
        self.db.add_migrations("summaries", MIGRATIONS)
        self._table = self.db.table("summaries")

    async def close(self) -> None:
        """Close the connection pool."""
        await self.db.close()

    async def get_summary(self, span_id: str) -> str | None:
        """The summary of the span, or ``None``."""
        check_span(span_id)
        value = await self.db.fetchval(f"SELECT text FROM {self._table} WHERE span_id = $1", span_id)
        return None if value is None else str(value)

    async def put_summary(self, span_id: str, text: str) -> None:
        """Keep ``text`` as the span's summary unless it has one."""
        check_span(span_id)
        if not isinstance(text, str):
            raise InvalidArgument("a summary must be a string")
        await self.db.execute(
            f"INSERT INTO {self._table} (span_id, text) VALUES ($1, $2) ON CONFLICT (span_id) DO NOTHING", span_id, text
        )


__all__ = ["PostgresSummaryStore"]
