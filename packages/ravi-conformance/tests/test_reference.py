"""The suite against the reference in-memory implementations: every contract passes."""

from __future__ import annotations

import pytest

from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.hybrid import HybridHistoryProvider
from ravi.agents.storage import (
    InMemoryFileStore,
    InMemoryGraphStore,
    InMemoryLongTermMemory,
    InMemoryStateStore,
    InMemorySummaryStore,
    InMemoryVectorStore,
    TaskStore,
)
from ravi.conformance import (
    BlobStoreContract,
    CypherCapableContract,
    GraphStoreContract,
    HistoryProviderContract,
    HistorySearcherContract,
    HybridSearcherContract,
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    TaskStoreContract,
    VectorStoreContract,
    WindowReaderContract,
)


class TestInMemoryHistory(HistoryProviderContract):
    @pytest.fixture
    def backend(self) -> InMemoryHistoryProvider:
        return InMemoryHistoryProvider()


class TestInMemoryWindowReader(WindowReaderContract):
    @pytest.fixture
    def backend(self) -> InMemoryHistoryProvider:
        return InMemoryHistoryProvider()

    @pytest.fixture
    def peer(self, backend: InMemoryHistoryProvider) -> InMemoryHistoryProvider:
        return backend  # one process: the store itself


class TestInMemoryHistorySearcher(HistorySearcherContract):
    @pytest.fixture
    def backend(self) -> InMemoryHistoryProvider:
        return InMemoryHistoryProvider()


class TestInMemoryHybridSearcher(HybridSearcherContract):
    @pytest.fixture
    def backend(self) -> InMemoryHistoryProvider:
        return InMemoryHistoryProvider()


class TestHybridHistorySearcher(HistorySearcherContract):
    @pytest.fixture
    def backend(self) -> HybridHistoryProvider:
        return HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())


class TestHybridHistory(HistoryProviderContract):
    @pytest.fixture
    def backend(self) -> HybridHistoryProvider:
        return HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())


class TestHybridWindowReader(WindowReaderContract):
    @pytest.fixture
    def backend(self) -> HybridHistoryProvider:
        return HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())

    @pytest.fixture
    def peer(self, backend: HybridHistoryProvider) -> HybridHistoryProvider:
        return HybridHistoryProvider(backend.hot, backend.cold)  # a second face over the same two tiers


class TestInMemoryState(ShortTermMemoryContract):
    @pytest.fixture
    def backend(self) -> InMemoryStateStore:
        return InMemoryStateStore()


class TestInMemoryLongTerm(LongTermMemoryContract):
    @pytest.fixture
    def backend(self) -> InMemoryLongTermMemory:
        return InMemoryLongTermMemory()


class TestInMemoryVector(VectorStoreContract):
    @pytest.fixture
    def backend(self) -> InMemoryVectorStore:
        return InMemoryVectorStore()


class TestInMemoryGraph(GraphStoreContract):
    @pytest.fixture
    def backend(self) -> InMemoryGraphStore:
        return InMemoryGraphStore()


class TestInMemoryGraphIsNotCypher(CypherCapableContract):
    """The in-memory graph is not CypherCapable: these contracts skip, saying so."""

    @pytest.fixture
    def backend(self) -> InMemoryGraphStore:
        return InMemoryGraphStore()


class TestInMemoryBlob(BlobStoreContract):
    @pytest.fixture
    def backend(self) -> InMemoryFileStore:
        return InMemoryFileStore()


class TestInMemoryTasks(TaskStoreContract):
    @pytest.fixture
    def backend(self) -> TaskStore:
        return TaskStore()


class TestInMemorySummaries(SummaryStoreContract):
    @pytest.fixture
    def backend(self) -> InMemorySummaryStore:
        return InMemorySummaryStore()


class TestInMemoryHistorySummaries(SummaryStoreContract):
    """The history provider keeps its sessions' summaries beside them."""

    @pytest.fixture
    def backend(self) -> InMemoryHistoryProvider:
        return InMemoryHistoryProvider()


class TestHybridHistorySummaries(SummaryStoreContract):
    """The hybrid provider keeps summaries in its cold tier, under the cold tier's generations."""

    @pytest.fixture
    def backend(self) -> HybridHistoryProvider:
        return HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())
