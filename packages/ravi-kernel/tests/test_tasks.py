import pytest

from ravi.kernel.errors import InvalidTransition
from ravi.kernel.storage import TRANSITIONS, Task, TaskList, TaskStatus


def test_lifecycle_happy_path() -> None:
    task = Task(title="write tests")
    task = task.moved_to(TaskStatus.IN_PROGRESS).moved_to(TaskStatus.SUCCEEDED, result="42 tests")
    assert task.status is TaskStatus.SUCCEEDED and task.result == "42 tests"


@pytest.mark.parametrize("final", [TaskStatus.SUCCEEDED, TaskStatus.ABANDONED])
def test_final_states_admit_no_transition(final: TaskStatus) -> None:
    assert TRANSITIONS[final] == frozenset() and final.is_final
    task = Task(title="t", status=final)
    for target in TaskStatus:
        if target is not final:
            with pytest.raises(InvalidTransition):
                task.moved_to(target)


def test_failed_task_needs_a_retry_to_run_again() -> None:
    """004: "failed --> in_progress : increment_retry() retry_count < max_retries; failed --> abandoned :
    increment_retry() retry_count >= max_retries"."""
    task = Task(title="t", status=TaskStatus.FAILED, max_retries=2)
    with pytest.raises(InvalidTransition, match="increment_retry"):
        task.moved_to(TaskStatus.PLANNED)
    once = task.retried()
    assert once.status is TaskStatus.IN_PROGRESS and once.retry_count == 1
    twice = once.moved_to(TaskStatus.FAILED).retried()
    assert twice.status is TaskStatus.IN_PROGRESS and twice.retry_count == 2
    thrice = twice.moved_to(TaskStatus.FAILED).retried()
    assert thrice.status is TaskStatus.ABANDONED and thrice.retry_count == 2


def test_force_retry_resets_the_count_but_not_success() -> None:
    """004: "abandoned --> in_progress : force_retry() user override" (resets retry_count to 0)."""
    task = Task(title="t", status=TaskStatus.ABANDONED, retry_count=3)
    again = task.force_retried()
    assert again.status is TaskStatus.IN_PROGRESS and again.retry_count == 0
    with pytest.raises(InvalidTransition):
        Task(title="t", status=TaskStatus.SUCCEEDED).force_retried()


@pytest.mark.parametrize("state", [TaskStatus.FAILED, TaskStatus.ABANDONED])
def test_force_retry_takes_a_failed_or_abandoned_task(state: TaskStatus) -> None:
    """004 draws ``force_retry()`` from ``failed`` and from ``abandoned``, both to ``in_progress``."""
    again = Task(title="t", status=state, retry_count=2).force_retried()
    assert again.status is TaskStatus.IN_PROGRESS and again.retry_count == 0


@pytest.mark.parametrize("state", [TaskStatus.PLANNED, TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED])
def test_force_retry_refuses_a_task_that_has_not_failed(state: TaskStatus) -> None:
    """A task that has not failed has nothing to retry; resetting a running task's count would also let a second
    worker claim it (``update_status`` refuses ``in_progress`` to ``in_progress`` for that reason)."""
    task = Task(title="t", status=state, retry_count=1)
    with pytest.raises(InvalidTransition, match="force_retry"):
        task.force_retried()


def test_tasks_are_frozen_and_lists_settle() -> None:
    task = Task(title="t")
    with pytest.raises(AttributeError, match="Task is immutable: 'status' cannot change"):
        task.status = TaskStatus.FAILED  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del task.title
    board = TaskList(conversation_id="c", agent_id="a", tasks=(task,))
    assert board.task(task.id) == task and board.task("nope") is None
    assert not board.settled
