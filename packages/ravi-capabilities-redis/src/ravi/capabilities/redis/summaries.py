"""``RedisSummaryStore``: summaries as derived records of a session in Redis, on their own, optionally expiring.

The history provider keeps its sessions' summaries itself (``RedisHistoryProvider`` is a ``SummaryStore``, and
removes them with the messages): this store is for summaries kept apart from the history.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Unpack

from ravi.capabilities.redis._client import RedisOptions, RedisStore, mapped_errors, part
from ravi.capabilities.redis.history import summary_field
from ravi.capabilities.redis.options import RedisSummaryOptions
from ravi.kernel.scope import Scope
from ravi.kernel.storage.summaries import check_summary_scope
from ravi.kernel.values import check_scope, check_span, check_summary, ttl_seconds

# KEYS: the session's summaries (a hash). ARGV: field, text, ttl in ms (0 = none).
_PUT = """
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
"""


class RedisSummaryStore(RedisStore):
    """The ``SummaryStore`` contract on Redis: one hash per session (under the session's hash tag, so it works on
    Redis Cluster), one field per ``(generation, span)`` in an injective JSON encoding, written with ``HSETNX`` so
    the first text wins; with ``ttl``, a session's summaries expire that long after its last summary was put.

    It cannot see a session's generation, so it keeps what it is given under the full scope: a summary of
    another generation is never returned, since its scope differs.
    """

    Options = RedisSummaryOptions

    def __init__(self, url: str, *, ttl: timedelta | float | None = None, **options: Unpack[RedisOptions]) -> None:
        RedisSummaryOptions.check(url=url, ttl=ttl, **options)
        super().__init__(url, **options)
        seconds = ttl_seconds(ttl)
        self._ttl_ms = 0 if seconds is None else max(1, int(seconds * 1000))

    def _key(self, agent_id: str, session_id: str) -> str:
        return self.redis.key("summaries", agent_id, session_id)

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The summary of the span in ``scope``, or ``None``."""
        check_summary_scope(scope)
        check_span(span_id)
        with mapped_errors():
            value = await self.redis.client.hget(
                self._key(scope.agent_id, scope.session_id), summary_field(scope.generation, span_id)
            )
        return None if value is None else value.decode() if isinstance(value, bytes) else str(value)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep ``text`` as the span's summary in ``scope`` unless it has one; returns ``True``."""
        check_summary_scope(scope)
        check_span(span_id)
        check_summary(text)
        key = self._key(scope.agent_id, scope.session_id)
        with mapped_errors():
            await self.redis.run_script(_PUT, [key], [summary_field(scope.generation, span_id), text, self._ttl_ms])
        return True

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove every summary of the session (of every session of the agent when ``session_id`` is ``None``,
        found by ``SCAN``), whatever its generation; returns how many."""
        check_scope(agent_id=agent_id)
        if session_id is not None:
            check_scope(session_id=session_id)
            found = [self._key(agent_id, session_id)]
        else:
            pattern = f"{self.redis.prefix}:summaries:{{{part(agent_id)}|*}}"
            with mapped_errors():
                found = [raw async for raw in self.redis.client.scan_iter(match=pattern, count=1_000)]
        removed = 0
        for key in found:
            with mapped_errors():
                async with self.redis.client.pipeline(transaction=True) as pipe:
                    pipe.hlen(key)
                    pipe.delete(key)
                    count, _ = await pipe.execute()
            removed += int(count)
        return removed


__all__ = ["RedisSummaryStore"]
