"""What belongs to one event loop: a lock per key (``KeyedLocks``) and a resource closed with its loop
(``until_loop_ends``).

An ``asyncio.Lock`` belongs to the event loop that first waits on it: a task of another loop that then finds it
held raises ``RuntimeError``, or waits on a future the other loop's thread completes without waking it. A store
used from several threads, each running its own loop (``asyncio.run`` per thread, a sync face's own loop), must
therefore never share one lock between loops. ``KeyedLocks`` gives each running loop its own lock per key.

Tasks of one loop that take the same key run one at a time; tasks of different loops do not wait for each other,
exactly as two processes do not, so whatever a lock orders within a process must hold between processes by other
means (the store's own transactions), as it must anyway.

Connections belong to their loop too: a pool opened in an ``asyncio.run`` call is useless once that call returns,
and, unless something closes it, keeps its server connections open for the life of the process. Code that calls
``asyncio.run`` per request would open a pool per request. ``until_loop_ends`` closes such a pool when its loop
shuts down.

Example:
    >>> import asyncio
    >>> locks = KeyedLocks[str]()
    >>> async def write() -> bool:
    ...     async with locks("session-1"):
    ...         return locks("session-1").locked()
    >>> asyncio.run(write())
    True
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class KeyedLocks(Generic[K]):
    """A lock per key for the tasks of the running event loop; a key's lock lives while a task holds it or waits
    for it (the dictionary keeps it weakly), so keys never accumulate."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[tuple[asyncio.AbstractEventLoop, K], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def __call__(self, key: K) -> asyncio.Lock:
        """The running loop's lock for ``key``. Call it inside a coroutine: outside one it raises
        ``RuntimeError`` (no running event loop)."""
        entry = (asyncio.get_running_loop(), key)
        lock = self._locks.get(entry)
        if lock is None:
            lock = self._locks[entry] = asyncio.Lock()
        return lock


def until_loop_ends(close: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    """A handle that runs ``await close()`` once: when the running event loop shuts down, or earlier through
    ``await handle.aclose()``. Call it from code running on the loop (it raises ``RuntimeError`` otherwise).

    The loop's shutdown is ``loop.shutdown_asyncgens()``, which ``asyncio.run`` and ``asyncio.Runner`` call before
    closing the loop, while it can still run ``close``. The handle is an asynchronous generator, started here, that
    the loop knows of (and keeps weakly): keep a reference to it for as long as the resource lives. ``close`` runs
    on the handle's loop only: never ``aclose`` a handle from another loop. A loop closed without
    ``shutdown_asyncgens`` never runs ``close``.

    Example:
        >>> import asyncio
        >>> closed = []
        >>> async def close() -> None:
        ...     closed.append("pool")
        >>> async def open_pool() -> AsyncGenerator[None, None]:
        ...     return until_loop_ends(close)
        >>> handle = asyncio.run(open_pool())  # the loop ends here
        >>> closed
        ['pool']
    """
    asyncio.get_running_loop()

    async def watch() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await close()

    handle = watch()
    # Run it to its first ``yield`` now: starting it is what makes the running loop know of it (PEP 525's
    # first-iteration hook), and nothing before the ``yield`` awaits, so it gets there in this one step.
    with contextlib.suppress(StopIteration):
        handle.asend(None).send(None)
    return handle


__all__ = ["KeyedLocks", "until_loop_ends"]
