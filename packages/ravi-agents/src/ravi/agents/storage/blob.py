"""``InMemoryFileStore``: the ``BlobStore`` contract in process memory."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import timedelta
from types import TracebackType

from ravi.agents.storage._clock import Clock, system_clock
from ravi.agents.storage.options import InMemoryBlobOptions
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import Blob, blob_prefix, check_blob_key, check_blob_metadata, check_content_type, check_forget
from ravi.kernel.values import ttl_seconds


class InMemoryFileStore:
    """Blobs in a dict: key to bytes, content type, metadata and expiry.

    ``presign_url`` gives ``memory://{key}`` (there is no server to fetch from); ``connect`` and ``disconnect``
    do nothing. An expired blob is gone: it is never returned and is dropped when next touched. Each call holds a
    ``threading.Lock`` and never awaits, so tasks of any event loop, in any thread, may share the store: of
    concurrent deletes of one blob, one reports ``True``.
    """

    Options = InMemoryBlobOptions
    """The store's options model, for configuration."""

    def __init__(self, *, clock: Clock = system_clock) -> None:
        self._blobs: dict[str, tuple[Blob, float | None]] = {}
        self._clock = clock
        self._lock = threading.Lock()

    async def __aenter__(self) -> InMemoryFileStore:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object | TracebackType | None) -> None:
        await self.disconnect()

    async def connect(self) -> None:
        """Nothing to open."""

    async def disconnect(self) -> None:
        """Nothing to close."""

    async def aclose(self) -> None:
        """Nothing to release; safe to call again."""

    def _live(self, key: str) -> Blob | None:
        """The live blob under ``key`` (call it holding the lock)."""
        entry = self._blobs.get(key)
        if entry is None:
            return None
        blob, expires = entry
        if expires is not None and self._clock() >= expires:
            del self._blobs[key]
            return None
        return blob

    async def upload(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        ttl: timedelta | float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Store ``data`` under ``key``, replacing what was there."""
        check_blob_key(key)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgument(f"data must be bytes, got {type(data).__name__}")
        seconds = ttl_seconds(ttl)
        meta = check_blob_metadata(metadata, ttl=seconds)
        blob = Blob(key=key, data=bytes(data), content_type=check_content_type(content_type), metadata=meta)
        with self._lock:
            self._blobs[key] = (blob, None if seconds is None else self._clock() + seconds)
        return key

    async def download(self, key: str) -> Blob:
        """The blob under ``key``; ``NotFound`` if missing or expired."""
        check_blob_key(key)
        with self._lock:
            blob = self._live(key)
        if blob is None:
            raise NotFound(f"no blob under key {key!r}")
        return blob

    async def delete(self, key: str) -> bool:
        """Remove the blob; ``False`` if it was not there."""
        check_blob_key(key)
        with self._lock:
            present = self._live(key) is not None
            self._blobs.pop(key, None)
        return present

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase every blob whose key starts with ``agent_id/`` (``agent_id/session_id/`` for a session)
        (``Forgetter``); returns how many live ones there were."""
        check_forget(agent_id, session_id)
        prefix = blob_prefix(agent_id, session_id)
        with self._lock:
            doomed = [key for key in self._blobs if key.startswith(prefix)]
            live = sum(1 for key in doomed if self._live(key) is not None)
            for key in doomed:
                self._blobs.pop(key, None)
        return live

    async def presign_url(self, key: str, *, expires_in: timedelta | float = 3600) -> str:
        """``memory://{key}``; ``NotFound`` if there is no such blob."""
        check_blob_key(key)
        if ttl_seconds(expires_in, name="expires_in") is None:
            raise InvalidArgument("expires_in must be a duration (seconds or a timedelta), got None")
        with self._lock:
            live = self._live(key)
        if live is None:
            raise NotFound(f"no blob under key {key!r}")
        return f"memory://{key}"


__all__ = ["InMemoryFileStore"]
