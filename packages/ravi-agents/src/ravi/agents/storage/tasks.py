"""Task boards: ``TaskStore`` in process memory, and ``GlobalTaskStore`` for the process-wide one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import ClassVar

from ravi.agents.storage.context_vars import (  # 000: the ContextVars live with the task boards
    current_agent_id,
    current_agent_label,
    current_parent_agent_id,
    current_thread_id,
)
from ravi.kernel.closing import Closeable
from ravi.kernel.env import read_raw
from ravi.kernel.errors import ConfigurationError, InvalidArgument, NotFound
from ravi.kernel.options import NoOptions
from ravi.kernel.storage import Task, TaskList, as_tasks, check_forget
from ravi.kernel.storage import TaskStore as TaskStoreProtocol
from ravi.kernel.tasks import TaskLifecycle
from ravi.kernel.values import check_scope


class TaskStore(TaskLifecycle, Closeable):
    """Task boards keyed by ``(conversation_id, agent_id)``, guarded by one ``threading.Lock``, held only by code that
    never awaits, so tasks of any event loop, in any thread, may share the store.

    Every change goes through the lifecycle of :class:`~ravi.kernel.storage.TaskStatus`: an illegal move
    raises ``InvalidTransition`` and changes nothing.

    Example:
        >>> import asyncio
        >>> store = TaskStore()
        >>> board = asyncio.run(store.create_task_list("conv", "agent", ["plan", "build"]))
        >>> [t.status.value for t in board.tasks]
        ['planned', 'planned']
    """

    Options = NoOptions
    """The store's options model, for configuration."""

    def __init__(self) -> None:
        self._boards: dict[tuple[str, str], TaskList] = {}
        self._lock = threading.Lock()

    async def create_task_list(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Start a board (replacing any existing one)."""
        check_scope(conversation_id=conversation_id, agent_id=agent_id)
        board = TaskList(conversation_id=conversation_id, agent_id=agent_id, tasks=tuple(as_tasks(tasks)))
        _check_unique(board)
        with self._lock:
            self._boards[(conversation_id, agent_id)] = board
        return board

    async def get_task_list(self, conversation_id: str, agent_id: str) -> TaskList | None:
        """The board, or ``None``."""
        check_scope(conversation_id=conversation_id, agent_id=agent_id)
        return self._boards.get((conversation_id, agent_id))

    async def add_tasks(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Append tasks to the board (created if missing)."""
        check_scope(conversation_id=conversation_id, agent_id=agent_id)
        new = as_tasks(tasks)
        with self._lock:
            board = self._boards.get((conversation_id, agent_id)) or TaskList(
                conversation_id=conversation_id, agent_id=agent_id
            )
            board = board.model_copy(update={"tasks": board.tasks + tuple(new)})
            _check_unique(board)
            self._boards[(conversation_id, agent_id)] = board
        return board

    async def _change(self, conversation_id: str, agent_id: str, task_id: str, how: Callable[[Task], Task]) -> Task:
        check_scope(conversation_id=conversation_id, agent_id=agent_id, task_id=task_id)
        with self._lock:
            board = self._boards.get((conversation_id, agent_id))
            task = board.task(task_id) if board else None
            if board is None or task is None:
                raise NotFound(f"no task {task_id!r} on the board of ({conversation_id!r}, {agent_id!r})")
            changed = how(task)
            tasks = tuple(changed if t.id == task_id else t for t in board.tasks)
            self._boards[(conversation_id, agent_id)] = board.model_copy(update={"tasks": tasks})
            return changed

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the agent's task list of the conversation ``session_id`` (every one of the agent's with ``None``)
        (``Forgetter``); returns how many task lists."""
        check_forget(agent_id, session_id)
        with self._lock:
            doomed = [k for k in self._boards if k[1] == agent_id and (session_id is None or k[0] == session_id)]
            for key in doomed:
                del self._boards[key]
        return len(doomed)

    async def settle_conversation(self, conversation_id: str) -> list[TaskList]:
        """Every ``in_progress`` task of the conversation becomes ``succeeded``; returns its boards, by agent id."""
        check_scope(conversation_id=conversation_id)
        with self._lock:
            settled = []
            for key in sorted(k for k in self._boards if k[0] == conversation_id):
                board = self._boards[key]
                tasks = tuple(t.settled() for t in board.tasks)
                board = board.model_copy(update={"tasks": tasks})
                self._boards[key] = board
                settled.append(board)
            return settled


InMemoryTaskStore = TaskStore
"""The in-memory task store under the name 004 gives it."""


def _check_unique(board: TaskList) -> None:

    ids = [t.id for t in board.tasks]
    if len(set(ids)) != len(ids):
        raise InvalidArgument("task ids on one board must be unique")


class GlobalTaskStore:
    """The process-wide task store (000).

    ``GlobalTaskStore.get()`` returns one shared store per configuration: the ``[tasks]`` store of the settings
    (``ravi.toml`` and ``RAVI_TASKS__*`` variables), in memory by default. ``RUNTIME_BACKEND=postgres``, the
    switch 000 names, is the same setting as ``[tasks] backend = "postgres"``: it picks the backend, and its
    options (``dsn``, ...) come from the ``[tasks]`` section as for any store. No capability is imported by name.
    """

    _stores: ClassVar[dict[str, TaskStoreProtocol]] = {}
    _building: ClassVar[threading.Lock] = threading.Lock()  # two threads asking at once get one store

    @classmethod
    def get(cls) -> TaskStoreProtocol:
        """The shared store the current configuration names."""
        from ravi.agents.settings import build_store, load_settings

        settings = load_settings()
        runtime = (read_raw("RUNTIME_BACKEND") or "").strip()
        if runtime:
            settings.tasks.backend = runtime
        key = settings.tasks.model_dump_json()
        with cls._building:
            store = cls._stores.get(key)
            if store is None:
                try:
                    store = TaskStore() if settings.tasks.backend == "memory" else build_store("tasks", settings)
                except ConfigurationError as error:
                    if not runtime:
                        raise
                    raise ConfigurationError(f"RUNTIME_BACKEND={runtime}: {error.message}", hint=error.hint) from error
                if not isinstance(store, TaskStoreProtocol):
                    raise ConfigurationError(
                        f"the tasks backend {settings.tasks.backend!r} does not implement TaskStore"
                    )
                cls._stores[key] = store
            return store

    @classmethod
    async def aclose(cls) -> None:
        """Close every shared store this process built (their connection pools) and forget them; the next
        :meth:`get` builds afresh. Call it when the application shuts down."""
        stores = list(cls._stores.values())
        cls._stores.clear()
        for store in stores:
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()


__all__ = [
    "GlobalTaskStore",
    "InMemoryTaskStore",
    "TaskStore",
    "current_agent_id",
    "current_agent_label",
    "current_parent_agent_id",
    "current_thread_id",
]
