"""The task boards as the design documents (000, 004) describe them, checked against their own words."""

from __future__ import annotations

import contextvars

from ravi.agents.storage.tasks import (
    GlobalTaskStore,
    InMemoryTaskStore,
    TaskStore,
    current_agent_id,
    current_agent_label,
    current_parent_agent_id,
    current_thread_id,
)
from ravi.kernel.storage import Task, TaskStatus


def test_the_four_context_vars_import_from_the_task_module() -> None:
    """000: "TaskStore, GlobalTaskStore, the ContextVars — agents/storage/tasks.py"."""
    assert {v.name for v in (current_thread_id, current_agent_id, current_agent_label, current_parent_agent_id)} == {
        "current_thread_id",
        "current_agent_id",
        "current_agent_label",
        "current_parent_agent_id",
    }
    assert InMemoryTaskStore is TaskStore
    assert isinstance(GlobalTaskStore.get(), TaskStore)


def test_a_board_written_with_no_context_set_lands_on_the_default_thread() -> None:
    """000: "Stamp these inside the agent's message handler ... or boards will all land on the "default" thread"."""

    def unset() -> tuple[str, str, str | None]:
        return current_thread_id.get(), current_agent_id.get(), current_parent_agent_id.get()

    assert contextvars.Context().run(unset) == ("default", "default", None)


def test_retry_counts_and_goes_back_in_progress() -> None:
    """004: "failed --> in_progress : increment_retry() retry_count < max_retries"."""
    task = Task(title="flaky", status=TaskStatus.FAILED, max_retries=1)
    again = task.retried()
    assert (again.status, again.retry_count) == (TaskStatus.IN_PROGRESS, 1)
    assert again.model_copy(update={"status": TaskStatus.FAILED}).retried().status is TaskStatus.ABANDONED
    assert Task(title="old name", retries=2).retry_count == 2  # the older field name is still accepted


async def test_settle_flips_in_progress_to_succeeded() -> None:
    """004: "settle_conversation(conversation_id) — flips all in_progress tasks to succeeded"."""
    store = InMemoryTaskStore()
    board = await store.create_task_list("c", "a", ["running", "waiting"])
    await store.update_status("c", "a", board.tasks[0].id, TaskStatus.IN_PROGRESS)
    [settled] = await store.settle_conversation("c")
    assert [t.status for t in settled.tasks] == [TaskStatus.SUCCEEDED, TaskStatus.PLANNED]
