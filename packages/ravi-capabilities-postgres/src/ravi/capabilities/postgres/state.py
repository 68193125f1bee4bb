"""``PostgresMemoryStore``: session state (``ShortTermMemory``) as jsonb on PostgreSQL."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from ravi.capabilities.postgres._db import Migration, PostgresStore
from ravi.capabilities.postgres._jsonb import dumps as jsonb_dumps
from ravi.capabilities.postgres.options import PostgresStateOptions
from ravi.kernel.values import check_scope, json_copy

MIGRATIONS = [
    Migration(
        1,
        "session state",
        """
CREATE TABLE {schema}."{prefix}session_state" (
    session_id text PRIMARY KEY,
    state      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    Migration(
        2,
        "records of Ravi's own, apart from the sessions' states",
        """
CREATE TABLE {schema}."{prefix}reserved_state" (
    session_id text PRIMARY KEY,
    state      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
""",
    ),
]


class PostgresMemoryStore(PostgresStore):
    """One jsonb object per session. ``update_state`` merges top-level keys in a single atomic statement
    (``state || patch``), so concurrent updaters never lose each other's keys. Ravi's own records are kept
    apart, in ``reserved()`` (a table of their own, ``reserved_state``, beside ``session_state``).

    Args: as :class:`~ravi.capabilities.postgres.PostgresHistoryProvider` (``dsn``, ``schema``,
    ``table_prefix``, pool sizes).
    """

    Options = PostgresStateOptions
    component = "state"
    migrations = MIGRATIONS

    _relation = "session_state"
    """The table of the states: ``session_state`` for the sessions', ``reserved_state`` for Ravi's own."""

    _view = False
    """A ``reserved()`` view: it uses its store's pool and closing it releases nothing."""

    @property
    def _table(self) -> str:
        return self.db.table(self._relation)

    def reserved(self) -> PostgresMemoryStore:
        """The place of Ravi's own records (:class:`~ravi.kernel.storage.ReservedState`): the same schema and
        prefix, a table no session's state is in. It uses this store's connection pool: closing it releases
        nothing (this store's calls under way go on), and it works for as long as this store does."""
        view = copy.copy(self)
        view._relation = "reserved_state"
        view._view = True
        return view

    async def aclose(self) -> None:
        """Release the connection pool (closed once its last store lets go); safe to call again. On a
        ``reserved()`` view it does nothing: the pool is its store's, closed with that store."""
        if not self._view:
            await super().aclose()

    async def get_state(self, session_id: str) -> dict[str, Any]:
        """The session's state; ``{}`` when none was set."""
        check_scope(session_id=session_id)
        raw = await self.db.fetchval(f"SELECT state::text FROM {self._table} WHERE session_id = $1", session_id)
        return {} if raw is None else dict(json.loads(raw))

    async def set_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        """Replace the session's state."""
        check_scope(session_id=session_id)
        body = jsonb_dumps(json_copy(state))
        await self.db.execute(
            f"INSERT INTO {self._table} (session_id, state) VALUES ($1, $2::jsonb) "
            "ON CONFLICT (session_id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()",
            session_id,
            body,
        )

    async def update_state(self, session_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the top level of the state atomically; returns the merged state."""
        check_scope(session_id=session_id)
        body = jsonb_dumps(json_copy(patch, "patch"))
        raw = await self.db.fetchval(
            f"INSERT INTO {self._table} AS t (session_id, state) VALUES ($1, $2::jsonb) "
            "ON CONFLICT (session_id) DO UPDATE SET state = t.state || EXCLUDED.state, updated_at = now() "
            "RETURNING state::text",
            session_id,
            body,
        )
        return dict(json.loads(raw))

    async def clear(self, session_id: str) -> None:
        """Forget the session's state."""
        check_scope(session_id=session_id)
        await self.db.execute(f"DELETE FROM {self._table} WHERE session_id = $1", session_id)


__all__ = ["PostgresMemoryStore"]
