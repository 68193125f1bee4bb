"""``PgTaskStore``: task boards in PostgreSQL, changed under row locks."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import asyncpg

from ravi.capabilities.postgres._db import Migration, PostgresStore
from ravi.capabilities.postgres._jsonb import dumps as jsonb_dumps
from ravi.capabilities.postgres.options import PgTaskOptions
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import Task, TaskList, TaskStatus, as_tasks, check_forget
from ravi.kernel.tasks import TaskLifecycle
from ravi.kernel.values import check_scope

MIGRATIONS = [
    Migration(
        1,
        "task boards",
        """
CREATE TABLE {schema}."{prefix}tasks" (
    conversation_id text NOT NULL,
    agent_id        text NOT NULL,
    position        int  NOT NULL,
    id              text NOT NULL,
    title           text NOT NULL,
    description     text NOT NULL,
    status          text NOT NULL,
    retries         int  NOT NULL,
    max_retries     int  NOT NULL,
    result          text,
    metadata        jsonb NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (conversation_id, agent_id, id),
    UNIQUE (conversation_id, agent_id, position)
);
CREATE TABLE {schema}."{prefix}task_boards" (
    conversation_id text NOT NULL,
    agent_id        text NOT NULL,
    PRIMARY KEY (conversation_id, agent_id)
);
""",
    ),
]

_COLUMNS = "id, title, description, status, retries, max_retries, result, metadata::text AS metadata, updated_at"


def _task(row: asyncpg.Record) -> Task:
    return Task(
        id=row["id"],
        title=row["title"],
        description=row["description"],
        status=TaskStatus(row["status"]),
        retry_count=row["retries"],
        max_retries=row["max_retries"],
        result=row["result"],
        metadata=json.loads(row["metadata"]),
        updated_at=row["updated_at"],
    )


class PgTaskStore(PostgresStore, TaskLifecycle):
    """The ``TaskStore`` contract on PostgreSQL.

    Every change reads the task with ``SELECT ... FOR UPDATE`` inside a transaction and applies the kernel's
    lifecycle (:class:`~ravi.kernel.storage.TaskStatus`) before writing, so two workers racing on one task
    cannot both move it: the second waits, then sees the first one's move. A change holds its board's row
    ``FOR SHARE`` first, and a replacement or an addition ``FOR UPDATE``: a change never reads a task of a board
    being replaced.
    """

    Options = PgTaskOptions
    component = "tasks"
    migrations = MIGRATIONS

    @property
    def _tasks(self) -> str:
        return self.db.table("tasks")

    @property
    def _boards(self) -> str:
        return self.db.table("task_boards")

    async def _insert(
        self, connection: asyncpg.Connection, conversation_id: str, agent_id: str, start: int, tasks: Sequence[Task]
    ) -> None:
        if len({t.id for t in tasks}) != len(tasks):
            raise InvalidArgument("task ids on one board must be unique")
        await connection.executemany(
            f"INSERT INTO {self._tasks} (conversation_id, agent_id, position, id, title, description, status, "
            "retries, max_retries, result, metadata, updated_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12)",
            [
                (
                    conversation_id,
                    agent_id,
                    start + i,
                    t.id,
                    t.title,
                    t.description,
                    t.status.value,
                    t.retry_count,
                    t.max_retries,
                    t.result,
                    jsonb_dumps(t.metadata),
                    t.updated_at,
                )
                for i, t in enumerate(tasks)
            ],
        )

    async def _board(self, connection: asyncpg.Connection, conversation_id: str, agent_id: str) -> TaskList | None:
        exists = await connection.fetchval(
            f"SELECT true FROM {self._boards} WHERE conversation_id = $1 AND agent_id = $2", conversation_id, agent_id
        )
        if not exists:
            return None
        rows = await connection.fetch(
            f"SELECT {_COLUMNS} FROM {self._tasks} WHERE conversation_id = $1 AND agent_id = $2 ORDER BY position",
            conversation_id,
            agent_id,
        )
        return TaskList(conversation_id=conversation_id, agent_id=agent_id, tasks=tuple(_task(r) for r in rows))

    async def _lock_board(self, connection: asyncpg.Connection, conversation_id: str, agent_id: str) -> None:
        """Create the board row if missing and lock it until the transaction ends: one writer per board.

        One upsert, which ends holding the row's lock whatever ran meanwhile: an insert, then a ``SELECT ... FOR
        UPDATE``, locked nothing when a ``forget`` deleted the row between them, and the tasks were then written
        under no board."""
        await connection.execute(
            f"INSERT INTO {self._boards} AS b VALUES ($1, $2) ON CONFLICT (conversation_id, agent_id) "
            "DO UPDATE SET agent_id = b.agent_id",
            conversation_id,
            agent_id,
        )

    async def create_task_list(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Start a board (replacing any existing one)."""
        check_scope(conversation_id=conversation_id, agent_id=agent_id)
        new = as_tasks(tasks)
        async with self.db.connection() as connection, connection.transaction():
            await self._lock_board(connection, conversation_id, agent_id)
            await connection.execute(
                f"DELETE FROM {self._tasks} WHERE conversation_id = $1 AND agent_id = $2", conversation_id, agent_id
            )
            await self._insert(connection, conversation_id, agent_id, 0, new)
            board = await self._board(connection, conversation_id, agent_id)
        assert board is not None
        return board

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the agent's task list of the conversation ``session_id`` (every one of the agent's with ``None``)
        (``Forgetter``), in one transaction; returns how many task lists."""
        check_forget(agent_id, session_id)
        where = "agent_id = $1" if session_id is None else "agent_id = $1 AND conversation_id = $2"
        args = (agent_id,) if session_id is None else (agent_id, session_id)
        async with self.db.connection() as connection, connection.transaction():
            # the boards first, waiting for their writers; then, in a statement of its own (which sees what those
            # writers committed), the tasks: in one statement, tasks a writer added meanwhile were left behind
            returning = f"WHERE {where} RETURNING conversation_id"
            boards = await connection.fetch(f"DELETE FROM {self._boards} {returning}", *args)
            tasks = await connection.fetch(f"DELETE FROM {self._tasks} {returning}", *args)
        return len({r["conversation_id"] for r in [*boards, *tasks]})

    async def get_task_list(self, conversation_id: str, agent_id: str) -> TaskList | None:
        """The board, or ``None``."""
        check_scope(conversation_id=conversation_id, agent_id=agent_id)
        async with self.db.connection() as connection, connection.transaction(isolation="repeatable_read"):
            return await self._board(connection, conversation_id, agent_id)

    async def add_tasks(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Append tasks to the board (created if missing)."""
        check_scope(conversation_id=conversation_id, agent_id=agent_id)
        new = as_tasks(tasks)
        async with self.db.connection() as connection, connection.transaction():
            await self._lock_board(connection, conversation_id, agent_id)
            existing = await connection.fetch(
                f"SELECT id, position FROM {self._tasks} WHERE conversation_id = $1 AND agent_id = $2",
                conversation_id,
                agent_id,
            )
            if {r["id"] for r in existing} & {t.id for t in new}:
                raise InvalidArgument("task ids on one board must be unique")
            start = max((r["position"] for r in existing), default=-1) + 1
            await self._insert(connection, conversation_id, agent_id, start, new)
            board = await self._board(connection, conversation_id, agent_id)
        assert board is not None
        return board

    async def _change(self, conversation_id: str, agent_id: str, task_id: str, how: Callable[[Task], Task]) -> Task:
        check_scope(conversation_id=conversation_id, agent_id=agent_id, task_id=task_id)
        async with self.db.connection() as connection, connection.transaction():
            # The board first, shared: a replacement of the board (which locks it for update) that has begun is
            # waited for, so the task's row read next is the board's as it then is. Without it, the row read was
            # one the replacement deleted, and its successor of the same id was not in this statement's snapshot:
            # a task every board held was NotFound. Changes to the board's tasks still run side by side.
            await connection.execute(
                f"SELECT 1 FROM {self._boards} WHERE conversation_id = $1 AND agent_id = $2 FOR SHARE",
                conversation_id,
                agent_id,
            )
            row = await connection.fetchrow(
                f"SELECT {_COLUMNS} FROM {self._tasks} WHERE conversation_id = $1 AND agent_id = $2 AND id = $3 "
                "FOR UPDATE",
                conversation_id,
                agent_id,
                task_id,
            )
            if row is None:
                raise NotFound(f"no task {task_id!r} on the board of ({conversation_id!r}, {agent_id!r})")
            changed = how(_task(row))
            await connection.execute(
                f"UPDATE {self._tasks} SET status = $4, retries = $5, result = $6, updated_at = $7 "
                "WHERE conversation_id = $1 AND agent_id = $2 AND id = $3",
                conversation_id,
                agent_id,
                task_id,
                changed.status.value,
                changed.retry_count,
                changed.result,
                changed.updated_at,
            )
        return changed

    async def settle_conversation(self, conversation_id: str) -> list[TaskList]:
        """Every ``in_progress`` task of the conversation becomes ``succeeded``; returns its boards, by agent id."""
        check_scope(conversation_id=conversation_id)
        async with self.db.connection() as connection, connection.transaction():
            agents = [
                r["agent_id"]
                for r in await connection.fetch(
                    f'SELECT agent_id FROM {self._boards} WHERE conversation_id = $1 ORDER BY agent_id COLLATE "C" '
                    "FOR UPDATE",
                    conversation_id,
                )
            ]
            await connection.execute(
                f"UPDATE {self._tasks} SET status = $2, updated_at = now() WHERE conversation_id = $1 AND status = $3",
                conversation_id,
                TaskStatus.SUCCEEDED.value,
                TaskStatus.IN_PROGRESS.value,
            )
            boards = [await self._board(connection, conversation_id, a) for a in agents]
        return [b for b in boards if b is not None]


__all__ = ["PgTaskStore"]
