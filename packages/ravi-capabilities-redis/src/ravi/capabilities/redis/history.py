"""``RedisHistoryProvider``: conversation history in Redis, with optional expiry per session."""

from __future__ import annotations

import contextlib
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Unpack
from urllib.parse import unquote

from ravi.capabilities.redis._client import RedisOptions, RedisStore, mapped_errors, part
from ravi.kernel.errors import BackendUnavailable, ConfigurationError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage.history import check_append
from ravi.kernel.values import check_page, check_scope, ttl_seconds

# KEYS: messages (list of JSON), runs (list of run ids, same positions), ids (hash message id -> 1), epoch
# ARGV: ttl in ms (0 = none), a fresh epoch token, then triples of (message id, run id, body)
# The epoch names one life of the session: set when the session is created, replaced by clear_run, gone with the
# session (clear or expiry). A cached copy is good only while its epoch is the session's.
_APPEND = """
redis.call('SET', KEYS[4], ARGV[2], 'NX')
local added = 0
for i = 3, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], 1) == 1 then
    redis.call('RPUSH', KEYS[1], ARGV[i + 2])
    redis.call('RPUSH', KEYS[2], ARGV[i + 1])
    added = added + 1
  end
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for k = 1, 4 do redis.call('PEXPIRE', KEYS[k], ttl) end
end
return added
"""

# Rebuilds the session without one run's messages, on the server and a chunk at a time, so a long session never
# blocks Redis for long. The kept messages go to scratch keys; the last chunk swaps them in atomically (with a
# new epoch), so readers see the session before or after, never half-rewritten. Appends that land meanwhile go
# to the session's tail and are taken by a later chunk. A clear (the epoch changes) abandons the rewrite.
# KEYS: messages, runs, ids, epoch, scratch messages, scratch runs, scratch ids
# ARGV: epoch when the rewrite began, first position of this chunk, chunk size, run id, new epoch, ttl in ms
_CLEAR_RUN = """
if redis.call('GET', KEYS[4]) ~= ARGV[1] then
  redis.call('DEL', KEYS[5], KEYS[6], KEYS[7])
  return {-1, 0}
end
local start = tonumber(ARGV[2])
local runs = redis.call('LRANGE', KEYS[2], start, start + tonumber(ARGV[3]) - 1)
local bodies = redis.call('LRANGE', KEYS[1], start, start + tonumber(ARGV[3]) - 1)
for i = 1, #runs do
  if runs[i] ~= ARGV[4] then
    redis.call('RPUSH', KEYS[5], bodies[i])
    redis.call('RPUSH', KEYS[6], runs[i])
    redis.call('HSET', KEYS[7], cjson.decode(bodies[i])['id'], 1)
  end
end
local total = redis.call('LLEN', KEYS[2])
local done = start + #runs
if done < total then
  for k = 5, 7 do redis.call('PEXPIRE', KEYS[k], 3600000) end
  return {0, done}
end
local kept = redis.call('LLEN', KEYS[6])
if kept == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
else
  for k = 1, 3 do
    redis.call('RENAME', KEYS[k + 4], KEYS[k])
    redis.call('PERSIST', KEYS[k])
  end
end
redis.call('SET', KEYS[4], ARGV[5])
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  for k = 1, 4 do if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], ttl) end end
end
return {1, total - kept}
"""


@dataclass(frozen=True)
class _Cached:
    """A session as read at one moment, in one life (``epoch``): replaced, never changed."""

    epoch: bytes
    messages: list[ChatMessage]


class RedisHistoryProvider(RedisStore):
    """The ``HistoryProvider`` contract on Redis: the fast, expiring tier.

    * A session is a list of messages (plus a parallel list of run ids and a hash of message ids) under keys
      that share one hash tag, so it works on Redis Cluster too.
    * ``append_many`` is one server-side script: atomic, one round trip, and idempotent by message id.
    * ``get_messages`` is one round trip (``LRANGE``); the provider keeps the sessions it read last
      (``cache_sessions``) and fetches only what was appended since, checked against the session's epoch: a token
      that names one life of the session, replaced by ``clear_run`` and gone with a ``clear`` or an expiry.
    * ``clear_run`` runs on the server: the session is never read into the client.
    * ``ttl`` (seconds or a timedelta) expires a whole session after that long without writes: every write
      refreshes it.

    Args:
        url: ``redis://host:port/db``.
        prefix: Key prefix (default ``ravi``) so several apps can share one Redis.
        ttl: Optional expiry of idle sessions.
        cache_sessions: Sessions kept parsed in memory (0 turns the cache off).
        socket_timeout: Seconds before a command is abandoned (``BackendUnavailable``).
        clear_run_chunk: Messages ``clear_run`` rewrites per script call (the longest Redis is kept busy).
    """

    def __init__(
        self,
        url: str,
        *,
        ttl: timedelta | float | None = None,
        cache_sessions: int = 64,
        clear_run_chunk: int = 1_000,
        **options: Unpack[RedisOptions],
    ) -> None:
        if not isinstance(clear_run_chunk, int) or clear_run_chunk < 1:
            raise ConfigurationError(f"clear_run_chunk must be an integer >= 1, got {clear_run_chunk!r}")
        super().__init__(url, **options)
        seconds = ttl_seconds(ttl)
        self._ttl_ms = 0 if seconds is None else max(1, int(seconds * 1000))
        self._cache: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        self._cache_size = cache_sessions
        self.clear_run_chunk = clear_run_chunk

    def _keys(self, agent_id: str, session_id: str) -> list[str]:
        key = self.redis.key
        return [key("h", agent_id, session_id, tail=t) for t in ("messages", "runs", "ids", "epoch")]

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        """Add messages at the end of the session: one atomic script, one round trip."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return
        args: list[str | int] = [self._ttl_ms, uuid.uuid4().hex]
        for m in messages:
            args += [m.id, run_id, m.model_dump_json()]
        with mapped_errors():
            await self.redis.run_script(_APPEND, self._keys(agent_id, session_id), args)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, from ``offset``, at most ``limit``; one round trip."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_page(limit, offset)
        keys = self._keys(agent_id, session_id)
        if self._cache_size == 0:
            if limit == 0:
                return []
            end = -1 if limit is None else offset + limit - 1
            with mapped_errors():
                rows = await self.redis.client.lrange(keys[0], offset, end)
            return [ChatMessage.model_validate_json(b) for b in rows]
        cache_key = (agent_id, session_id)
        # A snapshot: copies are never changed in place, so concurrent readers each build their own from it.
        base = self._cache.get(cache_key)
        have = len(base.messages) if base else 0
        epoch, length, raw = await self._read(keys, have)
        if base is not None and base.epoch == epoch and length == have + len(raw):
            messages = base.messages + [ChatMessage.model_validate_json(b) for b in raw] if raw else base.messages
        else:  # no copy, or the session was cleared, expired or rewritten since it was made: read it whole
            if have:
                epoch, length, raw = await self._read(keys, 0)
            messages = [ChatMessage.model_validate_json(b) for b in raw]
        if epoch is None:  # no session (or one written before epochs existed): nothing to keep
            self._cache.pop(cache_key, None)
        else:
            copy = _Cached(epoch, messages)
            current = self._cache.get(cache_key)
            if current is None or current is base or current.epoch != epoch or len(current.messages) <= len(messages):
                self._cache[cache_key] = copy
                self._cache.move_to_end(cache_key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        end_index = None if limit is None else offset + limit
        return messages[offset:end_index]

    async def _read(self, keys: list[str], start: int) -> tuple[bytes | None, int, list[bytes]]:
        """The session's epoch, length and messages from ``start``, read atomically in one round trip."""
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.get(keys[3])
                pipe.llen(keys[0])
                pipe.lrange(keys[0], start, -1)
                epoch, length, raw = await pipe.execute()
        return epoch, int(length), list(raw)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the session; returns how many messages it held."""
        check_scope(agent_id=agent_id, session_id=session_id)
        keys = self._keys(agent_id, session_id)
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.llen(keys[0])
                pipe.delete(*keys)  # the epoch goes too: the session's next life gets a new one
                count, _ = await pipe.execute()
        self._cache.pop((agent_id, session_id), None)
        return int(count)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages ``run_id`` wrote to the session; returns how many.

        Runs on the server, ``clear_run_chunk`` messages per script call, so a long session never blocks Redis
        for long; readers see the session before or after, never in between.
        """
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        keys = self._keys(agent_id, session_id)
        for _ in range(10):  # a clear racing the rewrite makes it start again
            with mapped_errors():
                async with self.redis.client.pipeline(transaction=True) as pipe:
                    pipe.get(keys[3])
                    pipe.lpos(keys[1], run_id)
                    epoch, found = await pipe.execute()
            if epoch is None or found is None:
                return 0
            token = uuid.uuid4().hex
            scratch = [self.redis.key("h", agent_id, session_id, tail=f"rewrite:{token}:{t}") for t in ("m", "r", "i")]
            start, state, removed = 0, 0, 0
            try:
                while state == 0:
                    with mapped_errors():
                        state, value = await self.redis.run_script(
                            _CLEAR_RUN,
                            [*keys, *scratch],
                            [epoch, start, self.clear_run_chunk, run_id, uuid.uuid4().hex, self._ttl_ms],
                        )
                    start = removed = int(value)
            finally:
                if state == 0:  # interrupted: drop the scratch copy
                    with contextlib.suppress(Exception):
                        await self.redis.client.delete(*scratch)
            if state == 1:
                self._cache.pop((agent_id, session_id), None)
                return removed
        raise BackendUnavailable(
            "clear_run: the session kept being cleared while its run was being removed", hint="try again"
        )

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted. Scans the keys (``SCAN``, never
        ``KEYS``): meant for tools and the CLI, not for the request path."""
        check_scope(agent_id=agent_id)
        check_page(limit, 0)
        # ids are percent-escaped in keys, so no glob character of the agent id survives into the pattern
        pattern = f"{self.redis.prefix}:h:{{{part(agent_id)}|*}}:messages"
        found: set[str] = set()
        with mapped_errors():
            async for raw in self.redis.client.scan_iter(match=pattern, count=1_000):
                key = raw.decode() if isinstance(raw, bytes) else raw
                tag = key[key.index("{") + 1 : key.rindex("}")]
                owner, _, session = tag.partition("|")
                if unquote(owner) == agent_id:
                    found.add(unquote(session))
        return sorted(found)[:limit]

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds (``LLEN``)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        with mapped_errors():
            return int(await self.redis.client.llen(self._keys(agent_id, session_id)[0]))


__all__ = ["RedisHistoryProvider"]
