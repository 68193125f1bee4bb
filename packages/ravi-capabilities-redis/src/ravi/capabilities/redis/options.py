"""The options of every Redis store, one model each: types, documentation and defaults in one place.

The same model checks ``ravi.toml``, ``RAVI_<KIND>__<KEY>`` variables (strings, converted here:
``RAVI_HISTORY__TTL=3600`` arrives as 3600.0 seconds) and keyword arguments, and the configuration page's tables
are generated from it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from pydantic import Field, field_validator

from ravi.kernel.options import BackendOptions
from ravi.kernel.values import ttl_seconds

PREFIX = r"^[A-Za-z0-9_.\-]{1,64}$"
"""A key prefix: 1-64 letters, digits, ``_``, ``.`` or ``-``."""


class RedisConnectionOptions(BackendOptions):
    """How a store reaches its server (one client per server, shared by every store of it)."""

    url: str = Field(description="`redis://[:password@]host:port/db` (`rediss://` for TLS, `unix://` for a socket).")
    prefix: str = Field(
        "ravi", pattern=PREFIX, description="Prepended to every key, so several apps can share one Redis."
    )
    socket_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds before a command is abandoned (`BackendUnavailable`); also the longest wait for a free "
        "connection.",
    )
    max_connections: int = Field(50, ge=1, description="Connections kept open at most; further calls wait for one.")
    cluster: bool = Field(False, description="`url` is a node of a Redis Cluster: talk to the whole cluster.")

    @field_validator("url")
    @classmethod
    def _a_redis_address(cls, url: str) -> str:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "a Redis URL starts with redis://, rediss:// or unix://, for example redis://localhost:6379/0"
            )
        return url


class _Expiring(RedisConnectionOptions):
    ttl: timedelta | float | None = Field(None, description="Seconds (or a `timedelta`) each entry lives; none: kept.")

    @field_validator("ttl")
    @classmethod
    def _a_ttl(cls, ttl: timedelta | float | None) -> timedelta | float | None:
        ttl_seconds(ttl)  # positive, finite, at most a hundred years
        return ttl


class RedisHistoryOptions(_Expiring):
    """The options of ``RedisHistoryProvider`` (``[history] backend = "redis"``)."""

    ttl: timedelta | float | None = Field(
        None, description="Seconds (or a `timedelta`) a session lives after its last write; none: kept."
    )
    cache_sessions: int = Field(64, ge=0, description="Sessions kept parsed in memory (0 turns the cache off).")
    clear_run_chunk: int = Field(1_000, ge=1, description="Messages `clear_run` removes per round trip.")


class RedisStateOptions(_Expiring):
    """The options of ``RedisSessionStore`` (``[state] backend = "redis"``)."""

    ttl: timedelta | float | None = Field(
        None, description="Seconds (or a `timedelta`) a session's state lives after its last write; none: kept."
    )


class RedisLongTermOptions(RedisConnectionOptions):
    """The options of ``RedisLongTermMemory`` (``[longterm] backend = "redis"``)."""

    code_only: ClassVar[frozenset[str]] = frozenset({"embedding_client"})
    embedding_client: Any = Field(
        None, description="An `EmbeddingClient` (in code only); the hashing embedder by default."
    )


class RedisSummaryOptions(_Expiring):
    """The options of ``RedisSummaryStore`` (``[summaries] backend = "redis"``)."""

    ttl: timedelta | float | None = Field(None, description="Seconds (or a `timedelta`) a summary lives; none: kept.")


__all__ = [
    "PREFIX",
    "RedisConnectionOptions",
    "RedisHistoryOptions",
    "RedisLongTermOptions",
    "RedisStateOptions",
    "RedisSummaryOptions",
]
