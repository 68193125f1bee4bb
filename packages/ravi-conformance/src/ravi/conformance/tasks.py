"""``TaskStoreContract``: what every task store must do."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings

from ravi.conformance._base import (
    EXACT_NUMBERS,
    PROPERTY_CHECKS,
    ContractBase,
    assert_protocol,
    at_limit,
    id_texts,
    refuses_long_ids,
    typed,
    unique,
)
from ravi.kernel.errors import InvalidArgument, InvalidTransition, NotFound
from ravi.kernel.storage import MAX_RETRIES, Forgetter, Task, TaskStatus, TaskStore

S = TaskStatus


class TaskStoreContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``TaskStore``."""

    contract_name = "TaskStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> TaskStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    async def board(self, store: TaskStore, *titles: str) -> tuple[str, str, list[str]]:
        conv, agent = unique("conv"), unique("agent")
        board = await store.create_task_list(conv, agent, list(titles or ("one", "two")))
        return conv, agent, [t.id for t in board.tasks]

    async def test_is_a_task_store(self, backend: TaskStore) -> None:
        """The backend satisfies the ``TaskStore`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.TaskStore``).
        """
        assert_protocol(backend, TaskStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: TaskStore) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory or temporary store), or isolate a persistent one with ``--isolate KIND=OPTION``
        (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.get_task_list("canary", "canary") is None
        await backend.create_task_list("canary", "canary", ["left behind"])

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: TaskStore) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.get_task_list("canary", "canary") is None, (
            "state leaked between tests: get_task_list('canary', 'canary') found the first canary's board"
        )
        await backend.create_task_list("canary", "canary", ["left behind"])

    async def test_create_and_get(self, backend: TaskStore) -> None:
        """A board reads back as it was created.

        Fix: turn the given items into tasks with ``as_tasks`` of ``ravi.kernel.storage`` (a title becomes
        ``Task(title=...)``), keep every field of each task and its position, and build the ``TaskList`` of them on
        ``get_task_list``.
        """
        conv, agent = unique("conv"), unique("agent")
        task = Task(title="explicit", description="with a description", max_retries=5, metadata={"p": 1})
        board = await backend.create_task_list(conv, agent, ["by title", task])
        got = await backend.get_task_list(conv, agent)
        assert got == board
        assert [t.title for t in got.tasks] == ["by title", "explicit"]
        assert got.tasks[1].id == task.id and got.tasks[1].max_retries == 5 and got.tasks[1].metadata == {"p": 1}
        assert all(t.status is S.PLANNED for t in got.tasks)

    async def test_metadata_numbers_keep_their_type_and_value(self, backend: TaskStore) -> None:
        """Every number in a task's metadata comes back with its type and value (``1e16`` stays a float).

        Fix: keep task metadata as JSON text, or in ``jsonb`` with floats written in positional notation with a decimal
        point, since jsonb prints a float of 1e16 or more as an integer.
        """
        conv, agent = unique("conv"), unique("agent")
        await backend.create_task_list(conv, agent, [Task(title="numbers", metadata=EXACT_NUMBERS)])
        got = await backend.get_task_list(conv, agent)
        assert got is not None and typed(got.tasks[0].metadata) == typed(EXACT_NUMBERS)

    async def test_create_replaces_the_board(self, backend: TaskStore) -> None:
        """Creating a board again replaces it.

        Fix: make ``create_task_list`` remove the board's tasks and write the new ones in one transaction.
        """
        conv, agent, _ = await self.board(backend)
        await backend.create_task_list(conv, agent, ["fresh"])
        got = await backend.get_task_list(conv, agent)
        assert got is not None and [t.title for t in got.tasks] == ["fresh"]

    async def test_add_tasks_appends_or_creates(self, backend: TaskStore) -> None:
        """``add_tasks`` appends to a board, or creates it.

        Fix: append the new tasks after the board's last position, in the transaction that locks the board, and create
        the board when there is none.
        """
        conv, agent, _ = await self.board(backend, "a")
        board = await backend.add_tasks(conv, agent, ["b", "c"])
        assert [t.title for t in board.tasks] == ["a", "b", "c"]
        new_conv = unique("conv")
        created = await backend.add_tasks(new_conv, agent, ["only"])
        assert [t.title for t in created.tasks] == ["only"]

    async def test_lifecycle_to_success_with_a_result(self, backend: TaskStore) -> None:
        """A task goes ``planned`` to ``in_progress`` to ``succeeded``, keeping its result.

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result; ``Task.moved_to`` keeps the result.
        """
        conv, agent, [first, _] = await self.board(backend)
        await backend.update_status(conv, agent, first, S.IN_PROGRESS)
        done = await backend.update_status(conv, agent, first, S.SUCCEEDED, result="all green")
        assert done.status is S.SUCCEEDED and done.result == "all green"
        board = await backend.get_task_list(conv, agent)
        assert board is not None and board.task(first) == done

    async def test_illegal_transitions_raise_and_change_nothing(self, backend: TaskStore) -> None:
        """An illegal transition raises and changes nothing.

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result; ``Task.moved_to`` raises ``InvalidTransition``
        by ``TRANSITIONS`` before anything is written.
        """
        conv, agent, [first, second] = await self.board(backend)
        with pytest.raises(InvalidTransition):
            await backend.update_status(conv, agent, first, S.SUCCEEDED)  # planned cannot succeed at once
        await backend.update_status(conv, agent, second, S.ABANDONED)
        with pytest.raises(InvalidTransition):
            await backend.update_status(conv, agent, second, S.IN_PROGRESS)  # final
        board = await backend.get_task_list(conv, agent)
        assert board is not None
        assert [t.status for t in board.tasks] == [S.PLANNED, S.ABANDONED]

    @pytest.mark.parametrize("result", [123, b"bytes", "lone \ud800 surrogate"], ids=["int", "bytes", "surrogate"])
    async def test_a_result_that_is_not_text_is_refused_and_changes_nothing(
        self, backend: TaskStore, result: object
    ) -> None:
        """A task's result is text on every store: anything else is ``InvalidArgument`` and the task stays as it
        was (the in-memory store kept a number or a lone surrogate that a server store refuses).

        Fix: check the result before the store is touched, as ``TaskLifecycle.update_status`` of
        ``ravi.kernel.storage.tasks`` does (``InvalidArgument`` for anything but ``None`` or valid text).
        """
        conv, agent, [first, _] = await self.board(backend)
        running = await backend.update_status(conv, agent, first, S.IN_PROGRESS)
        with pytest.raises(InvalidArgument):
            await backend.update_status(conv, agent, first, S.FAILED, result=result)  # type: ignore[arg-type]
        board = await backend.get_task_list(conv, agent)
        assert board is not None and board.task(first) == running

    async def test_the_largest_retry_counts_are_kept(self, backend: TaskStore) -> None:
        """``MAX_RETRIES``, the largest ``retry_count`` and ``max_retries`` a task may have, is kept by every
        store (a 32-bit integer column holds it); one more is refused when the task is built.

        Fix: keep ``retry_count`` and ``max_retries`` in columns or fields that hold ``MAX_RETRIES`` (2**31 - 1: a
        32-bit ``int`` column does).
        """
        conv, agent = unique("conv"), unique("agent")
        task = Task(title="patient", retry_count=MAX_RETRIES, max_retries=MAX_RETRIES)
        await backend.create_task_list(conv, agent, [task])
        board = await backend.get_task_list(conv, agent)
        assert board is not None and board.task(task.id) == task
        with pytest.raises(InvalidArgument):
            Task(title="too patient", max_retries=MAX_RETRIES + 1)

    async def test_moving_to_the_same_status_is_refused(self, backend: TaskStore) -> None:
        """Moving a task to the status it has is refused.

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result; ``Task.moved_to`` refuses the status the task
        already has.
        """
        conv, agent, [first, _] = await self.board(backend)
        await backend.update_status(conv, agent, first, S.IN_PROGRESS)
        with pytest.raises(InvalidTransition):
            await backend.update_status(conv, agent, first, S.IN_PROGRESS)

    async def test_unknown_task_or_board_is_not_found(self, backend: TaskStore) -> None:
        """An unknown task or board raises ``NotFound``.

        Fix: raise ``NotFound`` of ``ravi.kernel.errors`` when the board or the task is missing, before applying any
        transition.
        """
        conv, agent, _ = await self.board(backend)
        with pytest.raises(NotFound):
            await backend.update_status(conv, agent, unique("task"), S.IN_PROGRESS)
        with pytest.raises(NotFound):
            await backend.increment_retry(unique("conv"), agent, "x")

    async def test_retry_until_abandoned(self, backend: TaskStore) -> None:
        """004: "failed --> in_progress : increment_retry() retry_count < max_retries; failed --> abandoned :
        increment_retry() retry_count >= max_retries".

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result; ``increment_retry`` applies ``Task.retried``,
        which counts a retry while ``retry_count < max_retries`` and abandons the task after.
        """
        conv, agent = unique("conv"), unique("agent")
        task = Task(title="flaky", max_retries=2)
        await backend.create_task_list(conv, agent, [task])
        await backend.update_status(conv, agent, task.id, S.IN_PROGRESS)
        for expected, count in ((S.IN_PROGRESS, 1), (S.IN_PROGRESS, 2), (S.ABANDONED, 2)):
            await backend.update_status(conv, agent, task.id, S.FAILED)
            retried = await backend.increment_retry(conv, agent, task.id)
            assert (retried.status, retried.retry_count) == (expected, count)

    async def test_only_failed_tasks_are_retried(self, backend: TaskStore) -> None:
        """``increment_retry`` of a task that has not failed is an ``InvalidTransition``.

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result; ``Task.retried`` refuses a task that has not
        failed.
        """
        conv, agent, [first, _] = await self.board(backend)
        with pytest.raises(InvalidTransition):
            await backend.increment_retry(conv, agent, first)

    async def test_force_retry_resets_the_count(self, backend: TaskStore) -> None:
        """``force_retry`` puts a task back ``in_progress`` with its count reset.

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result; ``force_retry`` applies ``Task.force_retried``,
        which sets ``in_progress`` and a count of 0.
        """
        conv, agent = unique("conv"), unique("agent")
        task = Task(title="stuck", max_retries=1)
        await backend.create_task_list(conv, agent, [task])
        await backend.update_status(conv, agent, task.id, S.IN_PROGRESS)
        await backend.update_status(conv, agent, task.id, S.FAILED)
        retried = await backend.increment_retry(conv, agent, task.id)
        assert retried.status is S.IN_PROGRESS and retried.retry_count == 1
        await backend.update_status(conv, agent, task.id, S.FAILED)
        abandoned = await backend.increment_retry(conv, agent, task.id)
        assert abandoned.status is S.ABANDONED
        again = await backend.force_retry(conv, agent, task.id)  # 004: "abandoned --> in_progress : force_retry()"
        assert again.status is S.IN_PROGRESS and again.retry_count == 0

    async def test_force_retry_needs_a_failed_or_abandoned_task(self, backend: TaskStore) -> None:
        """004 draws ``force_retry()`` only from ``failed`` and ``abandoned``: on a planned or running task it is an
        ``InvalidTransition`` and the task is unchanged.

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result; ``Task.force_retried`` refuses any task that is
        not failed or abandoned.
        """
        conv, agent, [first, _] = await self.board(backend)
        with pytest.raises(InvalidTransition):
            await backend.force_retry(conv, agent, first)
        await backend.update_status(conv, agent, first, S.IN_PROGRESS)
        with pytest.raises(InvalidTransition):
            await backend.force_retry(conv, agent, first)
        board = await backend.get_task_list(conv, agent)
        assert board is not None and board.tasks[0].status is S.IN_PROGRESS and board.tasks[0].retry_count == 0

    async def test_settle_conversation(self, backend: TaskStore) -> None:
        """004: "settle_conversation(conversation_id) — flips all in_progress tasks to succeeded when a run ends
        normally"; the other tasks stay as they are.

        Fix: check the conversation id with ``check_scope`` of ``ravi.kernel.values``, then, in one transaction, apply
        ``Task.settled`` to every task of every board of the conversation and return those boards, sorted by agent id
        (``[]`` for none).
        """
        conv = unique("conv")
        a1, a2 = "agent-a", "agent-b"
        b1 = await backend.create_task_list(conv, a1, ["done", "running", "open"])
        b2 = await backend.create_task_list(conv, a2, ["blocked", "running"])
        other_conv, other_agent, other_ids = await self.board(backend)
        done, running = b1.tasks[0].id, b1.tasks[1].id
        await backend.update_status(conv, a1, done, S.IN_PROGRESS)
        await backend.update_status(conv, a1, done, S.SUCCEEDED)
        await backend.update_status(conv, a1, running, S.IN_PROGRESS)
        await backend.update_status(conv, a2, b2.tasks[0].id, S.BLOCKED)
        await backend.update_status(conv, a2, b2.tasks[1].id, S.IN_PROGRESS)
        await backend.update_status(other_conv, other_agent, other_ids[0], S.IN_PROGRESS)
        settled = await backend.settle_conversation(conv)
        statuses = {b.agent_id: [t.status for t in b.tasks] for b in settled}
        assert statuses == {a1: [S.SUCCEEDED, S.SUCCEEDED, S.PLANNED], a2: [S.BLOCKED, S.SUCCEEDED]}
        assert [b.agent_id for b in settled] == sorted(statuses)
        other = await backend.get_task_list(other_conv, other_agent)
        assert other is not None and [t.status for t in other.tasks] == [S.IN_PROGRESS, S.PLANNED]
        assert await backend.settle_conversation(unique("conv")) == []

    async def test_boards_are_isolated(self, backend: TaskStore) -> None:
        """Boards of different conversations or agents never mix.

        Fix: key every board and task by conversation and agent id together (columns, or a key built from both without a
        separator either may hold).
        """
        conv, agent, [first, _] = await self.board(backend)
        other_agent = unique("agent")
        await backend.create_task_list(conv, other_agent, ["theirs"])
        await backend.update_status(conv, agent, first, S.IN_PROGRESS)
        theirs = await backend.get_task_list(conv, other_agent)
        assert theirs is not None and [t.status for t in theirs.tasks] == [S.PLANNED]
        assert await backend.get_task_list(unique("conv"), agent) is None

    async def test_racing_workers_cannot_both_claim_a_task(self, backend: TaskStore) -> None:
        """Two workers racing to claim one task cannot both succeed.

        Fix: subclass ``TaskLifecycle`` of ``ravi.kernel.storage.tasks`` and implement its one ``_change``: under the
        board's lock (``SELECT ... FOR UPDATE`` of the task's row in a transaction, a lock in memory), read the task,
        apply the kernel's transition it is given and write the result, so the second claim reads ``in_progress`` and
        ``Task.moved_to`` refuses it.
        """
        conv, agent, [first, _] = await self.board(backend)

        async def claim() -> bool:
            try:
                await backend.update_status(conv, agent, first, S.IN_PROGRESS)
            except InvalidTransition:
                return False
            return True

        wins = await asyncio.gather(*(claim() for _ in range(20)))
        assert wins.count(True) == 1

    async def test_a_task_every_board_holds_is_found_while_the_board_is_replaced(self, backend: TaskStore) -> None:
        """A board replaced (``create_task_list``) while a worker moves one of its tasks, by a board that holds a
        task of that id too: the move lands on the board before or after, or is refused as a move the task's
        status forbids, and is never ``NotFound``: the task was on every board.

        Fix: have a change wait for a replacement of its board that has begun (on Postgres, lock the board's row
        ``FOR SHARE`` before the task's row ``FOR UPDATE``): the task's row that was read is gone once the
        replacement commits, and its successor is not in the change's snapshot."""
        conv, agent = unique("conv"), unique("agent")
        await backend.create_task_list(conv, agent, [Task(id="t", title="0")])
        missing = 0

        async def move() -> None:
            nonlocal missing
            for _ in range(60):
                try:
                    await backend.update_status(conv, agent, "t", S.IN_PROGRESS)
                except InvalidTransition:
                    pass
                except NotFound:
                    missing += 1

        async def replace() -> None:
            for i in range(60):
                await backend.create_task_list(conv, agent, [Task(id="t", title=str(i))])

        await asyncio.gather(move(), replace())
        assert missing == 0, f"update_status found no task 't' {missing} times, while every board held one"

    async def test_concurrent_changes_to_different_tasks_all_land(self, backend: TaskStore) -> None:
        """Concurrent changes to different tasks of one board all land.

        Fix: lock the changed task (its row), not the board's whole value, or hold one lock around each read and write
        of the board: a change written as the whole board read before another writer's change loses that change.
        """
        conv, agent = unique("conv"), unique("agent")
        board = await backend.create_task_list(conv, agent, [f"t{i}" for i in range(20)])
        await asyncio.gather(*(backend.update_status(conv, agent, t.id, S.IN_PROGRESS) for t in board.tasks))
        got = await backend.get_task_list(conv, agent)
        assert got is not None and all(t.status is S.IN_PROGRESS for t in got.tasks)

    async def test_bad_input_raises_typed_errors_and_changes_nothing(self, backend: TaskStore) -> None:
        """A bare string is not a list of tasks (``"abc"`` is not three tasks), and an unknown status is refused
        with InvalidArgument, not a bare ValueError.

        Fix: turn ``tasks`` into tasks with ``as_tasks`` of ``ravi.kernel.storage``, which refuses a bare string, and
        move tasks through ``TaskLifecycle.update_status`` of ``ravi.kernel.storage.tasks``, which refuses an unknown
        status with ``InvalidArgument``.
        """
        conv, agent, ids = await self.board(backend, "one")
        with pytest.raises(InvalidArgument):
            await backend.create_task_list(conv, agent, "abc")
        with pytest.raises(InvalidArgument):
            await backend.add_tasks(conv, agent, "abc")
        with pytest.raises(InvalidArgument):
            await backend.update_status(conv, agent, ids[0], "bogus")  # type: ignore[arg-type]
        board = await backend.get_task_list(conv, agent)
        assert board is not None and [(t.title, t.status) for t in board.tasks] == [("one", S.PLANNED)]

    async def test_ids_that_are_not_text_are_refused(self, backend: TaskStore) -> None:
        """A conversation, agent or task id with a lone surrogate or a NUL (which PostgreSQL keeps in no text), or
        not a string, is InvalidArgument on every call, reads included, and nothing is stored.

        Fix: check ids with ``check_scope`` of ``ravi.kernel.values``, and tasks with ``as_tasks``."""
        conv, agent, ids = await self.board(backend, "one")
        for bad in ("t\ud800", "t\x00", 42):
            with pytest.raises(InvalidArgument):
                await backend.update_status(conv, agent, bad, S.IN_PROGRESS)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.get_task_list(bad, agent)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.create_task_list(conv, bad, ["x"])  # type: ignore[arg-type]
        board = await backend.get_task_list(conv, agent)
        assert board is not None and [t.id for t in board.tasks] == ids

    async def test_unicode_titles_round_trip(self, backend: TaskStore) -> None:
        """Unicode titles round-trip exactly.

        Fix: pass ids and titles as bound parameters, keep them as UTF-8 text, and key boards by the ids as given.
        """
        conv, agent = "conv 'ü' 🚀", 'agent "漢"'
        board = await backend.create_task_list(conv, agent, ["Überprüfen 🚀 'quotes' \"$$\""])
        assert await backend.get_task_list(conv, agent) == board

    async def test_a_time_comes_back_as_the_same_instant_or_is_refused(self, backend: TaskStore) -> None:
        """A task's ``updated_at`` comes back as the same instant, still timezone-aware, or is refused with
        ``InvalidArgument`` and the board keeps what it had: a naive time (no server keeps a wall-clock reading)
        and the first and last instants a datetime can hold (Postgres reads them as -infinity and infinity).

        Fix: keep ``updated_at`` as an instant (``timestamptz``, or ISO 8601 text with its offset) and give back an
        aware datetime; ``Task`` refuses a naive time and the first and last instants when it is built, so nothing else
        is refused.
        """
        conv, agent = unique("conv"), unique("agent")
        await backend.create_task_list(conv, agent, ["keep"])
        kept = await backend.get_task_list(conv, agent)
        odd_offset = timezone(timedelta(hours=5, minutes=45))
        for when in (
            datetime(2020, 1, 1, 12, 30),
            datetime.min.replace(tzinfo=UTC),
            datetime.max.replace(tzinfo=UTC),
            datetime(2020, 1, 1, 12, 30, 0, 123456, tzinfo=odd_offset),
            datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            datetime(9999, 12, 31, 23, 59, 59, 999998, tzinfo=UTC),
        ):
            try:
                task = Task(title="t", updated_at=when)
                board = await backend.add_tasks(conv, agent, [task])
            except InvalidArgument:
                assert await backend.get_task_list(conv, agent) == kept, when
                continue
            back = board.tasks[-1].updated_at
            assert back.tzinfo is not None and back == when, (when, back)
            stored = await backend.get_task_list(conv, agent)
            assert stored is not None
            back = stored.tasks[-1].updated_at
            assert back.tzinfo is not None and back == when, (when, back)
            kept = await backend.create_task_list(conv, agent, ["keep"])

    async def test_forget_erases_the_task_lists_of_the_scope_only(self, backend: TaskStore) -> None:
        """``forget`` (``Forgetter``, optional) of a session erases the agent's task list of that conversation;
        of an agent, all of its task lists; never another agent's; a second call removes nothing.

        Fix: call ``check_forget`` of ``ravi.kernel.storage`` first, then delete the agent's board of the conversation
        whose id is the session id (every board of the agent without one), by equality on both ids, and return how many
        boards went.
        """
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a, b = unique("agent"), unique("agent")
        c1, c2 = unique("conv"), unique("conv")
        for conv in (c1, c2):
            for agent in (a, b):
                await backend.create_task_list(conv, agent, ["one", "two"])
        assert await backend.forget(a, session_id=c1) == 1
        assert await backend.forget(a, session_id=c1) == 0
        assert await backend.get_task_list(c1, a) is None
        assert await backend.get_task_list(c2, a) is not None
        assert await backend.forget(a) == 1
        assert await backend.get_task_list(c2, a) is None
        for conv in (c1, c2):
            assert await backend.get_task_list(conv, b) is not None

    async def test_ids_past_the_limit_are_refused_and_nothing_is_lost(self, backend: TaskStore) -> None:
        """A conversation, agent or task id of more than ``MAX_ID_BYTES`` UTF-8 bytes is refused by every call
        with ``InvalidArgument`` naming it and the limit, on every backend (PostgreSQL indexes no longer keys), and
        nothing of the call is stored.

        Fix: check ids with ``check_scope`` of ``ravi.kernel.values``, and tasks with ``as_tasks`` of
        ``ravi.kernel.storage``, which hold ``MAX_ID_BYTES``.
        """
        conv, agent, [first, _] = await self.board(backend)
        before = await backend.get_task_list(conv, agent)

        def calls(long: str) -> dict[str, tuple[str, Callable[[], Awaitable[Any]]]]:
            out: dict[str, tuple[str, Callable[[], Awaitable[Any]]]] = {
                "create_task_list(conversation_id)": (
                    "conversation_id",
                    lambda: backend.create_task_list(long, agent, ["x"]),
                ),
                "create_task_list(agent_id)": ("agent_id", lambda: backend.create_task_list(conv, long, ["x"])),
                "create_task_list(task id)": (
                    "tasks[1].id",
                    lambda: backend.create_task_list(unique("conv"), agent, ["ok", Task(id=long, title="x")]),
                ),
                "add_tasks(task id)": (
                    "tasks[0].id",
                    lambda: backend.add_tasks(conv, agent, [Task(id=long, title="x")]),
                ),
                "get_task_list(agent_id)": ("agent_id", lambda: backend.get_task_list(conv, long)),
                "update_status(task_id)": (
                    "task_id",
                    lambda: backend.update_status(conv, agent, long, TaskStatus.IN_PROGRESS),
                ),
                "increment_retry(task_id)": ("task_id", lambda: backend.increment_retry(conv, agent, long)),
                "force_retry(conversation_id)": (
                    "conversation_id",
                    lambda: backend.force_retry(long, agent, first),
                ),
                "settle_conversation()": ("conversation_id", lambda: backend.settle_conversation(long)),
            }
            if isinstance(backend, Forgetter):
                out["forget(agent_id)"] = ("agent_id", lambda: backend.forget(long))
            return out

        await refuses_long_ids(calls)
        assert await backend.get_task_list(conv, agent) == before

    @settings(max_examples=10, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(text=id_texts())
    async def test_ids_at_the_limit_are_stored_and_read_back(self, backend: TaskStore, text: str) -> None:
        """Conversation, agent and task ids of exactly ``MAX_ID_BYTES`` UTF-8 bytes, of any text, the three at once,
        are stored and read back by every backend.

        Fix: keep conversation, agent and task ids whole, as given: keys or columns that hold ``MAX_ID_BYTES`` bytes of
        UTF-8 each, the three at once, no truncation.
        """
        tag = unique("")
        conv, agent, task_id = (at_limit(text, f"{tag}{part}") for part in "cat")
        board = await backend.create_task_list(conv, agent, [Task(id=task_id, title="at the limit")])
        assert await backend.get_task_list(conv, agent) == board
        moved = await backend.update_status(conv, agent, task_id, TaskStatus.IN_PROGRESS)
        assert (moved.id, moved.status) == (task_id, TaskStatus.IN_PROGRESS)
        [kept] = await backend.settle_conversation(conv)
        assert (kept.conversation_id, kept.agent_id, [t.id for t in kept.tasks]) == (conv, agent, [task_id])
