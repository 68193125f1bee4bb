"""Every Redis backend against a three-primary Redis Cluster: the whole conformance suite, and proof that each
scope's keys share one slot (a script or transaction over keys of two slots fails with CROSSSLOT)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from servers import Server, closing

from ravi.capabilities.redis import RedisHistoryProvider, RedisLongTermMemory, RedisSessionStore, RedisSummaryStore
from ravi.conformance import (
    HistoryProviderContract,
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    WindowReaderContract,
)
from ravi.kernel.messages import ChatMessage


class TestClusterHistory(HistoryProviderContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(
                redis_cluster_server.address, prefix=redis_prefix, cluster=True, clear_run_chunk=3, max_connections=1000
            )
        ):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(redis_cluster_server.address, prefix=redis_prefix, cluster=True, max_connections=1000)
        ):
            yield store


class TestClusterHistoryUncachedWithTtl(HistoryProviderContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(
                redis_cluster_server.address, prefix=redis_prefix, cluster=True, ttl=600, cache_sessions=0
            )
        ):
            yield store


class TestClusterWindowReader(WindowReaderContract):
    """The windowed read, with a TTL and a small clear_run chunk (counts carried across rewrite chunks)."""

    @pytest_asyncio.fixture
    async def backend(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(
                redis_cluster_server.address, prefix=redis_prefix, cluster=True, clear_run_chunk=3, max_connections=1000
            )
        ):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(redis_cluster_server.address, prefix=redis_prefix, cluster=True)
        ):
            yield store


class TestClusterState(ShortTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisSessionStore]:
        async for store in closing(RedisSessionStore(redis_cluster_server.address, prefix=redis_prefix, cluster=True)):
            yield store


class TestClusterLongTermMemory(LongTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisLongTermMemory]:
        async for store in closing(
            RedisLongTermMemory(redis_cluster_server.address, prefix=redis_prefix, cluster=True)
        ):
            yield store


class TestClusterSummaries(SummaryStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisSummaryStore]:
        async for store in closing(RedisSummaryStore(redis_cluster_server.address, prefix=redis_prefix, cluster=True)):
            yield store


class TestClusterHistorySummaries(SummaryStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_cluster_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(
            RedisHistoryProvider(redis_cluster_server.address, prefix=redis_prefix, cluster=True, max_connections=1000)
        ):
            yield store


@pytest.mark.asyncio
async def test_a_sessions_keys_share_one_slot_spread_across_the_cluster(
    redis_cluster_server: Server, redis_prefix: str
) -> None:
    async with RedisHistoryProvider(redis_cluster_server.address, prefix=redis_prefix, cluster=True) as history:
        client = history.redis.client
        slots_of_sessions = set()
        for i in range(40):
            keys = history._keys("agent", f"session-{i}")
            slots = {await client.cluster_keyslot(k) for k in keys}
            assert len(slots) == 1, f"session-{i}'s keys span slots {slots}"
            slots_of_sessions |= slots
            await history.append("agent", ChatMessage.user("hi"), session_id=f"session-{i}")
        assert len(slots_of_sessions) > 1, "every session landed on one slot: the hash tag is too wide"
        nodes = {
            await client.cluster_keyslot(history._keys("agent", f"session-{i}")[0]) // (16384 // 3) for i in range(40)
        }
        assert len(nodes) > 1, "every session landed on one node"
