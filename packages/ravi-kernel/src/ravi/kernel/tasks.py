"""The task lifecycle written once, for every task store: each store supplies one atomic ``_change``."""

from __future__ import annotations

from collections.abc import Callable

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.storage import Task, TaskStatus


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
        return await self._change(conversation_id, agent_id, task_id, lambda t: t.moved_to(target, result=result))

    async def increment_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Retry a failed task (``abandoned`` once it reaches ``max_retries``)."""
        return await self._change(conversation_id, agent_id, task_id, Task.retried)

    async def force_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Human override: plan the task again with its retry count reset."""
        return await self._change(conversation_id, agent_id, task_id, Task.force_retried)


__all__ = ["TaskLifecycle"]
