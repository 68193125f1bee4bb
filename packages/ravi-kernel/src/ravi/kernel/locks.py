"""``KeyedLocks``: one ``asyncio.Lock`` per key and per event loop, kept only while it is in use.

An ``asyncio.Lock`` belongs to the event loop that first waits on it: a task of another loop that then finds it
held raises ``RuntimeError``, or waits on a future the other loop's thread completes without waking it. A store
used from several threads, each running its own loop (``asyncio.run`` per thread, a sync face's own loop), must
therefore never share one lock between loops. ``KeyedLocks`` gives each running loop its own lock per key.

Tasks of one loop that take the same key run one at a time; tasks of different loops do not wait for each other,
exactly as two processes do not, so whatever a lock orders within a process must hold between processes by other
means (the store's own transactions), as it must anyway.

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
import weakref
from collections.abc import Hashable
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
