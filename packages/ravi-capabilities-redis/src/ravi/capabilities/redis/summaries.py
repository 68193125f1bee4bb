"""``RedisSummaryStore``: summaries as derived records in Redis, optionally expiring."""

from __future__ import annotations

from datetime import timedelta
from typing import Unpack

from ravi.capabilities.redis._client import RedisOptions, RedisStore, mapped_errors
from ravi.capabilities.redis.options import RedisSummaryOptions
from ravi.kernel.values import check_span, check_summary, ttl_seconds


class RedisSummaryStore(RedisStore):
    """The ``SummaryStore`` contract on Redis: one key per span, written with ``SET NX`` so the first text
    wins; with ``ttl``, summaries expire with the hot tier."""

    Options = RedisSummaryOptions

    def __init__(self, url: str, *, ttl: timedelta | float | None = None, **options: Unpack[RedisOptions]) -> None:
        RedisSummaryOptions.check(url=url, ttl=ttl, **options)
        super().__init__(url, **options)
        seconds = ttl_seconds(ttl)
        self._ttl_ms = None if seconds is None else max(1, int(seconds * 1000))

    async def get_summary(self, span_id: str) -> str | None:
        """The summary of the span, or ``None``."""
        check_span(span_id)
        with mapped_errors():
            value = await self.redis.client.get(self.redis.key("summary", span_id))
        return None if value is None else value.decode() if isinstance(value, bytes) else str(value)

    async def put_summary(self, span_id: str, text: str) -> None:
        """Keep ``text`` as the span's summary unless it has one."""
        check_span(span_id)
        check_summary(text)
        with mapped_errors():
            await self.redis.client.set(self.redis.key("summary", span_id), text, nx=True, px=self._ttl_ms)


__all__ = ["RedisSummaryStore"]
