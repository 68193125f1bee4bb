"""One event loop in a background thread, for LangChain's synchronous interfaces over Ravi's async stores.

Connection pools (asyncpg's, redis-py's) belong to the loop that made them. Every synchronous call of this
package runs on this one loop, so a store's pool is made once and used from one loop, whichever thread calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ravi-langchain-loop", daemon=True).start()
            _loop = loop
        return _loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the background loop and wait for its result (its exception is raised here)."""
    return asyncio.run_coroutine_threadsafe(coroutine, _background()).result()


__all__ = ["run"]
