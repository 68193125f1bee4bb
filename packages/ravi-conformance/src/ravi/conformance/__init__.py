"""The contract suite for Ravi storage backends.

A backend's test module subclasses a contract and overrides its one fixture, ``backend``, to yield an empty
backend::

    from ravi.conformance import HistoryProviderContract

    class TestMyHistory(HistoryProviderContract):
        @pytest.fixture
        def backend(self):
            return MyHistory()

Every contract test then runs against it. Installed as a pytest plugin, the suite also runs against any
registered backend with ``pytest --ravi-backend history=NAME --pyargs ravi.conformance.run``.
"""

import pytest

pytest.register_assert_rewrite(
    "ravi.conformance._base",
    "ravi.conformance.blob",
    "ravi.conformance.graph",
    "ravi.conformance.history",
    "ravi.conformance.longterm",
    "ravi.conformance.state",
    "ravi.conformance.strategy",
    "ravi.conformance.summaries",
    "ravi.conformance.tasks",
    "ravi.conformance.vector",
)

from ravi.conformance._base import Capabilities, ContractBase  # noqa: E402
from ravi.conformance.blob import BlobStoreContract  # noqa: E402
from ravi.conformance.graph import CypherCapableContract, GraphStoreContract  # noqa: E402
from ravi.conformance.history import (  # noqa: E402
    HistoryProviderContract,
    HistorySearcherContract,
    HybridSearcherContract,
    WindowReaderContract,
)
from ravi.conformance.longterm import LongTermMemoryContract  # noqa: E402
from ravi.conformance.state import ShortTermMemoryContract  # noqa: E402
from ravi.conformance.strategy import StrategyContract  # noqa: E402
from ravi.conformance.summaries import SummaryStoreContract  # noqa: E402
from ravi.conformance.tasks import TaskStoreContract  # noqa: E402
from ravi.conformance.vector import VectorStoreContract  # noqa: E402

CONTRACTS: dict[str, type[ContractBase]] = {
    "history": HistoryProviderContract,
    "state": ShortTermMemoryContract,
    "longterm": LongTermMemoryContract,
    "vector": VectorStoreContract,
    "graph": GraphStoreContract,
    "blob": BlobStoreContract,
    "tasks": TaskStoreContract,
    "summaries": SummaryStoreContract,
}
"""The contract of each store kind (``graph`` backends that are ``CypherCapable`` also run that contract)."""

__all__ = [
    "CONTRACTS",
    "BlobStoreContract",
    "Capabilities",
    "ContractBase",
    "CypherCapableContract",
    "GraphStoreContract",
    "HistoryProviderContract",
    "HistorySearcherContract",
    "HybridSearcherContract",
    "WindowReaderContract",
    "LongTermMemoryContract",
    "ShortTermMemoryContract",
    "StrategyContract",
    "SummaryStoreContract",
    "TaskStoreContract",
    "VectorStoreContract",
]
