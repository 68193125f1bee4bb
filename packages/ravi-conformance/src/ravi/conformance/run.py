"""Contract classes bound to the backends chosen with ``--ravi-backend`` (see :mod:`ravi.conformance.plugin`).

Collected with ``pytest --ravi-backend KIND=NAME --pyargs ravi.conformance.run``; the kinds not chosen are
deselected.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

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
from ravi.conformance.plugin import backend_options, isolated_options, selected_backends
from ravi.kernel.registry import load_backend


async def _build(request: pytest.FixtureRequest, kind: str) -> AsyncIterator[Any]:
    name = selected_backends(request.config).get(kind)
    if name is None:
        pytest.skip(f"no --ravi-backend {kind}=NAME given")
    isolate = isolated_options(request.config).get(kind)
    backend = load_backend(kind, name, **backend_options(kind, isolate=isolate))
    if kind == "blob":
        await backend.connect()
    try:
        yield backend
    finally:
        destroy = getattr(backend, "destroy", None)
        if isolate and destroy is not None:  # the test's own scope: leave nothing behind
            await destroy()
        closer = getattr(backend, "disconnect" if kind == "blob" else "close", None)
        if closer is not None:
            result = closer()
            if inspect.isawaitable(result):
                await result


# One test class per contract, bound to the backend chosen for its kind: (class name, kind, contract, fixture).
CONTRACTS: list[tuple[str, str, type, str]] = [
    ("TestHistory", "history", HistoryProviderContract, "history"),
    ("TestWindowReader", "history", WindowReaderContract, "history"),
    ("TestState", "state", ShortTermMemoryContract, "state_store"),
    ("TestLongTerm", "longterm", LongTermMemoryContract, "memory_store"),
    ("TestVector", "vector", VectorStoreContract, "vector_store"),
    ("TestGraph", "graph", GraphStoreContract, "graph_store"),
    ("TestCypher", "graph", CypherCapableContract, "graph_store"),
    ("TestBlob", "blob", BlobStoreContract, "blob_store"),
    ("TestTasks", "tasks", TaskStoreContract, "task_store"),
    ("TestSummaries", "summaries", SummaryStoreContract, "summary_store"),
]


def _bound(name: str, kind: str, contract: type, fixture: str) -> type:
    """``contract`` with its backend fixture building the registered backend of ``kind``."""

    async def build(self: Any, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, kind):
            yield backend

    build.__name__ = fixture
    cls = type(name, (contract,), {fixture: pytest_asyncio.fixture(build), "__module__": __name__})
    return pytest.mark.ravi_kind(kind)(cls)


for _name, _kind, _contract, _fixture in CONTRACTS:
    globals()[_name] = _bound(_name, _kind, _contract, _fixture)
