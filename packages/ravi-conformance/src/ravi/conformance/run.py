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


@pytest.mark.ravi_kind("history")
class TestHistory(HistoryProviderContract):
    @pytest_asyncio.fixture
    async def history(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "history"):
            yield backend


@pytest.mark.ravi_kind("state")
class TestState(ShortTermMemoryContract):
    @pytest_asyncio.fixture
    async def state_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "state"):
            yield backend


@pytest.mark.ravi_kind("longterm")
class TestLongTerm(LongTermMemoryContract):
    @pytest_asyncio.fixture
    async def memory_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "longterm"):
            yield backend


@pytest.mark.ravi_kind("vector")
class TestVector(VectorStoreContract):
    @pytest_asyncio.fixture
    async def vector_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "vector"):
            yield backend


@pytest.mark.ravi_kind("graph")
class TestGraph(GraphStoreContract):
    @pytest_asyncio.fixture
    async def graph_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "graph"):
            yield backend


@pytest.mark.ravi_kind("graph")
class TestCypher(CypherCapableContract):
    @pytest_asyncio.fixture
    async def graph_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "graph"):
            yield backend


@pytest.mark.ravi_kind("blob")
class TestBlob(BlobStoreContract):
    @pytest_asyncio.fixture
    async def blob_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "blob"):
            yield backend


@pytest.mark.ravi_kind("tasks")
class TestTasks(TaskStoreContract):
    @pytest_asyncio.fixture
    async def task_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "tasks"):
            yield backend


@pytest.mark.ravi_kind("summaries")
class TestSummaries(SummaryStoreContract):
    @pytest_asyncio.fixture
    async def summary_store(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for backend in _build(request, "summaries"):
            yield backend
