"""Redis backends for Ravi, registered under the name ``redis``: the fast, expiring tier.

* :class:`RedisHistoryProvider` (``history``): ordered, idempotent history with optional TTL per session.
* :class:`RedisSessionStore` (``state``): session state, merged atomically.
* :class:`RedisLongTermMemory` (``longterm``): memories with TTL by key expiry, searched by similarity.
* :class:`RedisSummaryStore` (``summaries``): summaries of spans, with optional TTL.
* :class:`LocalRedis`: a throwaway server (``redis-server``, or Valkey from the ``[local]`` extra; ``ravi dev
  redis`` runs one).

Each takes a ``url`` (``redis://host:port/db``) and a key ``prefix`` (default ``ravi``), and raises only the
kernel's typed errors.
"""

from ravi.capabilities.redis.history import RedisHistoryProvider
from ravi.capabilities.redis.local import LocalRedis
from ravi.capabilities.redis.longterm import RedisLongTermMemory
from ravi.capabilities.redis.state import RedisSessionStore
from ravi.capabilities.redis.summaries import RedisSummaryStore

__all__ = ["LocalRedis", "RedisHistoryProvider", "RedisLongTermMemory", "RedisSessionStore", "RedisSummaryStore"]
