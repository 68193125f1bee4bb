"""``RedisSessionStore``: session state (``ShortTermMemory``) as a Redis hash."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Unpack

from ravi.capabilities.redis._client import RedisOptions, RedisStore, mapped_errors
from ravi.capabilities.redis.options import RedisStateOptions
from ravi.kernel.values import check_scope, json_copy, ttl_seconds


class RedisSessionStore(RedisStore):
    """One Redis hash per session: each top-level key a field holding its JSON value.

    ``update_state`` writes the fields and reads the result back in one ``MULTI`` transaction, so concurrent
    updaters never lose each other's keys. With ``ttl`` a session's state expires after that long without
    writes. Ravi's own records are kept apart, in ``reserved()`` (keys of their own kind, ``prefix:reserved:``,
    beside the sessions' ``prefix:state:``).
    """

    Options = RedisStateOptions

    _kind = "state"
    """The kind of key the states are under: ``state`` for the sessions', ``reserved`` for Ravi's own."""

    _view = False
    """A ``reserved()`` view: it uses its store's connections and closing it releases none of them."""

    def __init__(self, url: str, *, ttl: timedelta | float | None = None, **options: Unpack[RedisOptions]) -> None:
        RedisStateOptions.check(url=url, ttl=ttl, **options)
        super().__init__(url, **options)
        seconds = ttl_seconds(ttl)
        self._ttl_ms = None if seconds is None else max(1, int(seconds * 1000))

    def _key(self, session_id: str) -> str:
        return self.redis.key(self._kind, session_id)

    def reserved(self) -> RedisSessionStore:
        """The place of Ravi's own records (:class:`~ravi.kernel.storage.ReservedState`): the same server, prefix
        and TTL, keys of a kind no session's state has. It uses this store's connections: closing it releases
        nothing (this store's calls under way go on), and it works for as long as this store does."""
        view = copy.copy(self)
        view._kind = "reserved"
        view._view = True
        return view

    async def aclose(self) -> None:
        """Release the connections (the shared client closes with its last store); safe to call again. On a
        ``reserved()`` view it does nothing: the connections are its store's, closed with that store."""
        if not self._view:
            await super().aclose()

    @staticmethod
    def _decode(raw: Mapping[Any, Any]) -> dict[str, Any]:
        return {(k.decode() if isinstance(k, bytes) else k): json.loads(v) for k, v in raw.items()}

    async def get_state(self, session_id: str) -> dict[str, Any]:
        """The session's state; ``{}`` when none was set."""
        check_scope(session_id=session_id)
        with mapped_errors():
            return self._decode(await self.redis.client.hgetall(self._key(session_id)))

    async def set_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        """Replace the session's state."""
        check_scope(session_id=session_id)
        fields = {k: json.dumps(v) for k, v in json_copy(state).items()}
        key = self._key(session_id)
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                if fields:
                    pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
                    if self._ttl_ms:
                        pipe.pexpire(key, self._ttl_ms)
                await pipe.execute()

    async def update_state(self, session_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the top level of the state atomically; returns the merged state."""
        check_scope(session_id=session_id)
        fields = {k: json.dumps(v) for k, v in json_copy(patch, "patch").items()}
        key = self._key(session_id)
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                if fields:
                    pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
                    if self._ttl_ms:
                        pipe.pexpire(key, self._ttl_ms)
                pipe.hgetall(key)
                *_, merged = await pipe.execute()
        return self._decode(merged)

    async def clear(self, session_id: str) -> None:
        """Forget the session's state."""
        check_scope(session_id=session_id)
        with mapped_errors():
            await self.redis.client.delete(self._key(session_id))


__all__ = ["RedisSessionStore"]
