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
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    TaskStoreContract,
    VectorStoreContract,
    WindowReaderContract,
)


class TestInMemoryHistory(HistoryProviderContract):
    @pytest.fixture
    def history(self) -> InMemoryHistoryProvider:
        return InMemoryHistoryProvider()


class TestInMemoryWindowReader(WindowReaderContract):
    @pytest.fixture
    def history(self) -> InMemoryHistoryProvider:
        return InMemoryHistoryProvider()


class TestHybridHistory(HistoryProviderContract):
    @pytest.fixture
    def history(self) -> HybridHistoryProvider:
        return HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())


class TestHybridWindowReader(WindowReaderContract):
    @pytest.fixture
    def history(self) -> HybridHistoryProvider:
        return HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())


class TestInMemoryState(ShortTermMemoryContract):
    @pytest.fixture
    def state_store(self) -> InMemoryStateStore:
        return InMemoryStateStore()


class TestInMemoryLongTerm(LongTermMemoryContract):
    @pytest.fixture
    def memory_store(self) -> InMemoryLongTermMemory:
        return InMemoryLongTermMemory()


class TestInMemoryVector(VectorStoreContract):
    @pytest.fixture
    def vector_store(self) -> InMemoryVectorStore:
        return InMemoryVectorStore()


class TestInMemoryGraph(GraphStoreContract):
    @pytest.fixture
    def graph_store(self) -> InMemoryGraphStore:
        return InMemoryGraphStore()


class TestInMemoryGraphIsNotCypher(CypherCapableContract):
    """The in-memory graph is not CypherCapable: these contracts skip, saying so."""

    @pytest.fixture
    def graph_store(self) -> InMemoryGraphStore:
        return InMemoryGraphStore()


class TestInMemoryBlob(BlobStoreContract):
    @pytest.fixture
    def blob_store(self) -> InMemoryFileStore:
        return InMemoryFileStore()


class TestInMemoryTasks(TaskStoreContract):
    @pytest.fixture
    def task_store(self) -> TaskStore:
        return TaskStore()


class TestInMemorySummaries(SummaryStoreContract):
    @pytest.fixture
    def summary_store(self) -> InMemorySummaryStore:
        return InMemorySummaryStore()
