"""The thread harness backend authors test with: it refuses what would test nothing, names what went wrong, and
leaves the interpreter as it found it."""

from __future__ import annotations

import sys
import threading

import pytest

from ravi.conformance.threads import run_threads, switching_often
from ravi.kernel.errors import InvalidArgument


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "6", None])
def test_a_number_of_threads_that_runs_nothing_or_is_not_a_count_is_refused(threads: object) -> None:
    """No thread would pass whatever the store does: the harness says so instead of passing."""
    ran: list[int] = []
    with pytest.raises(InvalidArgument):
        run_threads(ran.append, threads)  # type: ignore[arg-type]
    assert not ran


@pytest.mark.parametrize("finish", [0, -1.0, float("nan"), float("inf"), "60", None, True])
def test_a_time_to_finish_that_is_not_a_positive_number_of_seconds_is_refused(finish: object) -> None:
    """Zero, a negative or NaN would report every thread hung; infinity would wait for ever on a hung one."""
    ran: list[int] = []
    with pytest.raises(InvalidArgument):
        run_threads(ran.append, 2, finish=finish)  # type: ignore[arg-type]
    assert not ran


def test_what_a_thread_raises_is_named_with_how_many_raised() -> None:
    def work(i: int) -> None:
        if i == 1:
            raise KeyError("missing")

    with pytest.raises(AssertionError, match=r"1 of 3 threads raised: \[\"KeyError: 'missing'\"\]"):
        run_threads(work, 3)


def test_a_thread_that_never_finishes_is_named() -> None:
    release = threading.Event()
    try:
        with pytest.raises(AssertionError, match=r"threads that never finished: \['thread-0'\]"):
            run_threads(lambda i: release.wait() if i == 0 else None, 3, finish=0.5)
    finally:
        release.set()


def test_switching_often_from_threads_whose_blocks_overlap_restores_the_interval() -> None:
    """Two threads' blocks overlap, the first to enter leaving first: the interval is the fast one while either
    block runs, and the one before them once both have ended (not left at a microsecond for the rest of the
    process)."""
    before = sys.getswitchinterval()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[float] = []

    def first() -> None:
        with switching_often():
            first_in.set()
            second_in.wait()
        first_out.set()

    def second() -> None:
        first_in.wait()
        with switching_often():
            second_in.set()
            first_out.wait()
            seen.append(sys.getswitchinterval())

    pool = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert seen == [pytest.approx(1e-6)]
    assert sys.getswitchinterval() == before


def test_work_that_is_a_coroutine_function_is_refused() -> None:
    """``run_threads(async_work)`` made a coroutine in each thread and dropped it: nothing ran and the run passed.
    The harness runs synchronous work only (``lambda i: asyncio.run(work(i))`` runs a coroutine)."""
    ran: list[int] = []

    async def work(i: int) -> None:
        ran.append(i)

    with pytest.raises(InvalidArgument, match=r"asyncio\.run"):
        run_threads(work, 2)
    with pytest.raises(AssertionError, match=r"2 of 2 threads raised.*asyncio\.run"):
        run_threads(lambda i: work(i), 2)
    assert not ran
