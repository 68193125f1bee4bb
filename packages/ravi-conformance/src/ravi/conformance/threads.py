"""Sharing one store between threads that each run their own event loop: run the same work in several threads at
once, and make the interpreter switch between them as often as it can, so that races show up in every run.

A store a sync application calls through ``asyncio.run`` from a thread pool is shared that way. Use these to test
that a backend of your own holds there too (Ravi's own stores are tested with them).

Example:
    >>> import asyncio
    >>> seen = []
    >>> async def work(thread: int) -> None:
    ...     seen.append(thread)
    >>> with switching_often():
    ...     run_threads(lambda thread: asyncio.run(work(thread)), threads=4)
    >>> sorted(seen)
    [0, 1, 2, 3]
"""

from __future__ import annotations

import contextlib
import inspect
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage

FINISH = 60.0
"""Seconds after which a thread that has not finished counts as hung: a guard, not a measure of speed (a loop
waiting on a future that another thread completes is never woken)."""


_switching = threading.Lock()
_blocks = [0, 0.0]  # how many blocks run now, and the interval before the first of them


@contextlib.contextmanager
def switching_often() -> Iterator[None]:
    """Make the interpreter switch threads every microsecond while the block runs. The interval is the
    interpreter's, shared by every thread: blocks of several threads may overlap, in any order, and the interval
    before the first is restored when the last ends."""
    with _switching:
        if not _blocks[0]:
            _blocks[1] = sys.getswitchinterval()
        _blocks[0] += 1
        sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        with _switching:
            _blocks[0] -= 1
            if not _blocks[0]:
                sys.setswitchinterval(_blocks[1])


_COROUTINE = "work must run synchronously: wrap a coroutine function, lambda i: asyncio.run(work(i))"


def run_threads(work: Callable[[int], object], threads: int = 6, *, finish: float = FINISH) -> None:
    """Run ``work(i)`` for each ``i`` below ``threads``, each in a thread of its own, all started together (behind
    a barrier); raise ``AssertionError`` naming what any of them raised, or the threads that did not finish within
    ``finish`` seconds. ``InvalidArgument`` for fewer than one thread (a run that tests nothing), a ``finish``
    that is not a positive finite number of seconds, or a coroutine function for ``work`` (a ``work`` that
    returns an awaitable is reported as having raised ``InvalidArgument``: nothing would have run it)."""
    if inspect.iscoroutinefunction(work):
        raise InvalidArgument(_COROUTINE)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise InvalidArgument(f"threads must be an integer >= 1, got {threads!r}")
    if isinstance(finish, bool) or not isinstance(finish, int | float) or not 0 < finish < math.inf:
        raise InvalidArgument(f"finish must be a positive finite number of seconds, got {finish!r}")
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            result = work(i)
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never started: closing it spares the "never awaited" warning
                raise InvalidArgument(_COROUTINE)
        except BaseException as error:
            errors.append(error)

    pool = [threading.Thread(target=run, args=(i,), name=f"thread-{i}", daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    deadline = time.monotonic() + finish
    for thread in pool:
        thread.join(max(0.0, deadline - time.monotonic()))
    hung = [thread.name for thread in pool if thread.is_alive()]
    raised = list(errors)
    found = sorted({f"{type(e).__name__}: {e}" for error in raised for e in _leaves(error)})
    problems = [f"{len(raised)} of {threads} threads raised: {found}"] if raised else []
    if hung:
        problems.append(f"threads that never finished: {hung}")
    if problems:
        raise AssertionError("; ".join(problems)) from (raised[0] if raised else None)


def _leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions an exception group holds (the exception itself when it is not a group)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def assert_holds_exactly(messages: Sequence[ChatMessage], expected: Sequence[Sequence[ChatMessage]]) -> None:
    """Assert that ``messages`` (a session read back after the threads' work) are those of ``expected`` (what each
    thread appended, one list per thread): every message once, none lost or added, each thread's in its order and
    as it was appended; how the threads' messages interleave is free."""
    ids = [m.id for m in messages]
    assert len(set(ids)) == len(ids), "a message is stored twice"
    wanted = {m.id for own in expected for m in own}
    lost, extra = sorted(wanted - set(ids)), sorted(set(ids) - wanted)
    assert not lost and not extra, f"lost {len(lost)} {lost[:5]}, unexpected {len(extra)} {extra[:5]}"
    for own in expected:
        mine = {m.id for m in own}
        assert [m for m in messages if m.id in mine] == list(own), "a thread's messages out of its order"


__all__ = ["FINISH", "assert_holds_exactly", "run_threads", "switching_often"]
