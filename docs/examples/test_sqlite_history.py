"""Run Ravi's HistoryProvider contract against the SQLite example: all it takes is one fixture."""

from collections.abc import Iterator

import pytest
from sqlite_history import SQLiteHistoryProvider

from ravi.conformance import HistoryProviderContract


class TestSQLiteHistory(HistoryProviderContract):
    @pytest.fixture
    def backend(self) -> Iterator[SQLiteHistoryProvider]:
        store = SQLiteHistoryProvider()
        yield store
        store.close()
