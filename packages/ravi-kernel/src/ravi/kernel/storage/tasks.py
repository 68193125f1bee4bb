"""Task boards (004): the six-state lifecycle, ``Task``, ``TaskList``, the ``TaskStore`` Protocol, and
``TaskLifecycle``, the lifecycle moves written once for every store."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import AliasChoices, Field, field_validator

from ravi.kernel.errors import InvalidArgument, InvalidTransition
from ravi.kernel.messages import FrozenDict, ReadOnlyDict
from ravi.kernel.storage._common import _FROZEN, _new_id, _now
from ravi.kernel.values import Value, check_id, check_text


class TaskStatus(enum.StrEnum):
    """The six states of a task. ``succeeded`` and ``abandoned`` are final."""

    PLANNED = "planned"
    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    BLOCKED = "blocked"
    FAILED = "failed"
    ABANDONED = "abandoned"

    @property
    def is_final(self) -> bool:
        """Whether no ordinary transition leaves this state."""
        return self in (TaskStatus.SUCCEEDED, TaskStatus.ABANDONED)

    def can_move_to(self, target: TaskStatus) -> bool:
        """Whether ``update_status`` may move a task from this state to ``target``."""
        return target in TRANSITIONS[self]


TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PLANNED: frozenset({TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED, TaskStatus.ABANDONED}),
    TaskStatus.IN_PROGRESS: frozenset(
        {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.BLOCKED, TaskStatus.PLANNED, TaskStatus.ABANDONED}
    ),
    TaskStatus.BLOCKED: frozenset({TaskStatus.PLANNED, TaskStatus.IN_PROGRESS, TaskStatus.ABANDONED}),
    TaskStatus.FAILED: frozenset({TaskStatus.ABANDONED}),
    TaskStatus.SUCCEEDED: frozenset(),
    TaskStatus.ABANDONED: frozenset(),
}
"""The lifecycle. A failed task runs again only through ``increment_retry`` or ``force_retry``."""


MAX_RETRIES = 2**31 - 1
"""The largest ``retry_count`` and ``max_retries`` a task may have: what a 32-bit integer column holds (Postgres
refused more, while the in-memory store kept it)."""


def _check_result(result: object) -> None:
    """``InvalidArgument`` unless ``result`` is ``None`` or valid text: a task's result is a string on every
    store (a lone surrogate, or a number, was kept in memory and refused by Postgres)."""
    if result is None:
        return
    if not isinstance(result, str):
        raise InvalidArgument(f"a string or None is needed, got {type(result).__name__}", field="result")
    check_text(result, "result")


class Task(Value):
    """One step of an agent's plan. Frozen: change it with ``model_copy(update=...)``.

    ``retry_count`` counts the retries so far (``retries`` is accepted as its older name).
    """

    model_config = _FROZEN
    ID_FIELDS = ("id",)

    id: str = Field(default_factory=_new_id, min_length=1)
    title: str
    description: str = ""
    status: TaskStatus = TaskStatus.PLANNED
    retry_count: int = Field(default=0, ge=0, le=MAX_RETRIES, validation_alias=AliasChoices("retry_count", "retries"))
    max_retries: int = Field(default=3, ge=0, le=MAX_RETRIES)
    result: str | None = None
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)
    updated_at: datetime = Field(default_factory=_now)

    @field_validator("updated_at")
    @classmethod
    def _an_instant_every_store_keeps(cls, value: datetime) -> datetime:
        # Server stores keep an instant (Postgres's timestamptz): a naive time came back as UTC, another value, and
        # Postgres reads the first and last instants a datetime holds as -infinity and infinity, which asyncpg
        # gives back naive
        if value.utcoffset() is None:
            raise ValueError("updated_at must be timezone-aware (an instant), not a naive time")
        try:
            utc = value.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            utc = datetime.min
        if utc in (datetime.min, datetime.max):
            raise ValueError("updated_at must lie strictly between datetime.min and datetime.max, in UTC")
        return value

    def moved_to(self, status: TaskStatus, *, result: str | None = None) -> Task:
        """This task in ``status``; ``InvalidTransition`` if the lifecycle forbids the move (staying put included,
        so two workers racing to claim a task cannot both succeed)."""
        _check_result(result)
        if status == self.status:
            raise InvalidTransition(f"task {self.id!r} is already {status.value}")
        if not self.status.can_move_to(status):
            raise InvalidTransition(
                f"task {self.id!r} cannot move from {self.status.value} to {status.value}",
                hint=_transition_hint(self.status),
            )
        update: dict[str, Any] = {"status": status, "updated_at": _now()}
        if result is not None:
            update["result"] = result
        return self.model_copy(update=update)

    @property
    def retries(self) -> int:
        """The older name of :attr:`retry_count`."""
        return self.retry_count

    def retried(self) -> Task:
        """A failed task retried: back ``in_progress`` with one more retry while ``retry_count < max_retries``,
        else ``abandoned`` (004: ``failed --> in_progress : increment_retry()``)."""
        if self.status is not TaskStatus.FAILED:
            raise InvalidTransition(f"only a failed task can be retried; {self.id!r} is {self.status.value}")
        if self.retry_count >= self.max_retries:
            return self.model_copy(update={"status": TaskStatus.ABANDONED, "updated_at": _now()})
        return self.model_copy(
            update={"status": TaskStatus.IN_PROGRESS, "retry_count": self.retry_count + 1, "updated_at": _now()}
        )

    def force_retried(self) -> Task:
        """A human override: a failed or abandoned task goes back ``in_progress`` with its retry count reset (004:
        ``failed --> in_progress`` and ``abandoned --> in_progress : force_retry() user override``).

        Any other task is refused: a succeeded one has nothing to retry, and a planned, blocked or running one has
        not failed (``update_status`` moves it; resetting a running task's count would let a second worker claim
        it)."""
        if self.status not in (TaskStatus.FAILED, TaskStatus.ABANDONED):
            raise InvalidTransition(
                f"only a failed or abandoned task can be force_retry'd; {self.id!r} is {self.status.value}",
                hint=_transition_hint(self.status),
            )
        return self.model_copy(update={"status": TaskStatus.IN_PROGRESS, "retry_count": 0, "updated_at": _now()})

    def settled(self) -> Task:
        """The task when its run ends normally: ``in_progress`` becomes ``succeeded``, anything else stays."""
        if self.status is not TaskStatus.IN_PROGRESS:
            return self
        return self.model_copy(update={"status": TaskStatus.SUCCEEDED, "updated_at": _now()})


def _transition_hint(status: TaskStatus) -> str:
    allowed = sorted(s.value for s in TRANSITIONS[status])
    if status is TaskStatus.FAILED:
        return "use increment_retry or force_retry to plan a failed task again"
    return f"from {status.value} it may move to: {', '.join(allowed) or 'nothing (final)'}"


class TaskList(Value):
    """The task board of one agent in one conversation. Frozen."""

    model_config = _FROZEN

    conversation_id: str
    agent_id: str
    tasks: tuple[Task, ...] = ()

    def task(self, task_id: str) -> Task | None:
        """The task with ``task_id``, or ``None``."""
        return next((t for t in self.tasks if t.id == task_id), None)

    @property
    def settled(self) -> bool:
        """Whether every task is final."""
        return all(t.status.is_final for t in self.tasks)

    @property
    def max_retries(self) -> int | None:
        """The retry limit the board's tasks share (004: a TaskList "tracks max_retries"), or ``None`` when they
        differ or there are none. Each task keeps its own limit, which is what ``increment_retry`` applies (a
        board can mix a flaky call that deserves retries with a check that never will)."""
        limits = {t.max_retries for t in self.tasks}
        return limits.pop() if len(limits) == 1 else None


@runtime_checkable
class TaskStore(Protocol):
    """Task boards keyed by ``(conversation_id, agent_id)``, with the lifecycle of :class:`TaskStatus`."""

    async def create_task_list(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Start a board (replacing any existing one) with ``tasks`` (titles become planned tasks)."""
        ...

    async def get_task_list(self, conversation_id: str, agent_id: str) -> TaskList | None:
        """The board, or ``None``."""
        ...

    async def add_tasks(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Append tasks to the board (created if missing)."""
        ...

    async def update_status(
        self, conversation_id: str, agent_id: str, task_id: str, status: TaskStatus, *, result: str | None = None
    ) -> Task:
        """Move a task; ``InvalidTransition`` if not allowed, ``NotFound`` if there is no such task."""
        ...

    async def increment_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Retry a failed task: ``in_progress`` again while ``retry_count < max_retries``, else ``abandoned``."""
        ...

    async def force_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Human override: the task goes ``in_progress`` again with its retry count reset."""
        ...

    async def settle_conversation(self, conversation_id: str) -> list[TaskList]:
        """The run ended normally: every ``in_progress`` task of the conversation becomes ``succeeded`` (so a
        board stops spinning); returns the conversation's boards."""
        ...


def as_tasks(items: Sequence[Task | str]) -> list[Task]:
    """Tasks from a mix of ``Task`` objects and titles; a bare string (not a list of titles) is refused, and so is
    a task whose id is longer than :data:`~ravi.kernel.values.MAX_ID_BYTES`."""
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidArgument(
            f"tasks must be a list of Task objects or titles, got {type(items).__name__}",
            hint=f"pass [{items!r}] for one task" if isinstance(items, str) else None,
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Task):
            check_id(item.id, f"tasks[{i}].id")
            out.append(item)
        elif isinstance(item, str):
            out.append(Task(title=item))
        else:
            raise InvalidArgument(f"tasks[{i}] must be a Task or a title, got {type(item).__name__}")
    return out


class TaskLifecycle:
    """The lifecycle moves of a task store, written once on top of one atomic ``_change``.

    A store implements ``_change(conversation_id, agent_id, task_id, how)``: under its lock (or row lock), read
    the task, apply ``how`` (the kernel's :class:`~ravi.kernel.storage.Task` transition) and write the result.
    """

    async def _change(self, conversation_id: str, agent_id: str, task_id: str, how: Callable[[Task], Task]) -> Task:
        raise NotImplementedError

    async def update_status(
        self, conversation_id: str, agent_id: str, task_id: str, status: TaskStatus, *, result: str | None = None
    ) -> Task:
        """Move a task along its lifecycle."""
        try:
            target = TaskStatus(status)
        except ValueError:
            raise InvalidArgument(
                f"unknown task status {status!r}", hint=f"one of: {', '.join(s.value for s in TaskStatus)}"
            ) from None
        _check_result(result)  # before the store is touched
        return await self._change(conversation_id, agent_id, task_id, lambda t: t.moved_to(target, result=result))

    async def increment_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Retry a failed task (``abandoned`` once it reaches ``max_retries``)."""
        return await self._change(conversation_id, agent_id, task_id, Task.retried)

    async def force_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Human override: plan the task again with its retry count reset."""
        return await self._change(conversation_id, agent_id, task_id, Task.force_retried)


__all__ = ["MAX_RETRIES", "TRANSITIONS", "Task", "TaskLifecycle", "TaskList", "TaskStatus", "TaskStore", "as_tasks"]
